"""rmsnorm_kernels.families: a dγ family declares its numbers, the registry joins them to the launch grid, and the
engine reads them through `extra_traffic` / `partial_bytes` (no family name is special-cased anywhere)."""

import random
from dataclasses import replace

import pytest

from rmsnorm_kernels.families import BackwardFamily, FamilyLaunch, extra_traffic, partial_bytes
from rmsnorm_kernels.registry import Implementation, Registry, load_path


def _fn(x, w, eps=1e-6):
    return x


HALVES = BackwardFamily("halves", "half a partial row per program", partial_rows=lambda g, M, N: g["programs"] // 2)


def grid(M, N, sm):
    return {"programs": sm, "rows_per_program": -(-M // sm)}


def test_default_numbers_are_one_partial_row_per_program_written_and_read():
    fam = BackwardFamily("plain", "one row per program")
    M, N, G = random.randint(1, 5000), random.randint(1, 9000), random.randint(1, 300)
    got = fam.numbers({"programs": G}, M, N)
    assert got == {
        "family": "plain",
        "partial_rows": G,
        "partial_bytes": G * N * 4,
        "extra_bytes": 2 * G * N * 4,
        "extra_bytes_note": f"+ fp32 dγ partials written and read back (2·{G}·N·4)",
    }


def test_declared_rules_are_used():
    got = HALVES.numbers({"programs": 10}, 100, 8)
    assert got["partial_rows"] == 5 and got["partial_bytes"] == 5 * 8 * 4 and got["extra_bytes"] == 2 * 5 * 8 * 4
    custom = BackwardFamily(
        "fixed", "x", extra_bytes=lambda g, M, N: 77, extra_bytes_note=lambda g, M, N: "seventy-seven"
    )
    assert custom.numbers({"programs": 3}, 1, 1)["extra_bytes"] == 77
    assert custom.numbers({"programs": 3}, 1, 1)["extra_bytes_note"] == "seventy-seven"


@pytest.mark.parametrize("name", ["", "Tree", "two words", "baseline", "other", "9lives"])
def test_bad_family_names_are_refused(name):
    with pytest.raises(ValueError):
        BackwardFamily(name, "x")


def test_an_implementation_with_a_family_reports_its_numbers_through_launch():
    impl = Implementation("halves-impl", fn=_fn, family=HALVES, launch=grid)
    assert impl.family == "halves" and impl.dgamma is HALVES and impl.fused is True
    assert isinstance(impl.launch, FamilyLaunch) and impl.launch.grid is grid
    launch = impl.launch(1000, 64, 132)
    assert launch["programs"] == 132 and launch["rows_per_program"] == 8
    assert launch["partial_rows"] == 66 and launch["partial_bytes"] == 66 * 64 * 4
    again = replace(impl, source="plugin")  # what load_path does to a plugin: the launch is not wrapped twice
    assert again.launch(1000, 64, 132) == launch and again.launch.grid is grid
    d = impl.describe()
    assert d["dgamma"] == HALVES.describe() and d["launch_example"]["partial_rows"] == 66
    assert d["launch_example"]["M"] == 16384 and d["launch_example"]["sm_count"] == 132


def test_family_declarations_are_checked():
    with pytest.raises(ValueError, match="needs the launch grid"):
        Implementation("no-grid", fn=_fn, family=HALVES)
    with pytest.raises(ValueError, match="family"):
        Implementation("bad-name", fn=_fn, family="Not A Name")
    with pytest.raises(ValueError, match="is not its dγ family"):
        Implementation("mismatch", fn=_fn, family="atomic", dgamma=HALVES, launch=grid)
    plain = Implementation("drawn-like-workspace", fn=_fn, family="workspace")
    assert plain.dgamma is None and plain.fused is False and plain.describe()["launch_example"] is None
    assert Implementation("unfused", fn=_fn, family=HALVES, launch=grid, fused=False).fused is False


def test_a_failing_plugin_launch_does_not_break_the_listing():
    def broken(M, N, sm):
        raise RuntimeError("no grid today")

    impl = Implementation("broken-grid", fn=_fn, family=HALVES, launch=broken)
    assert impl.describe()["launch_example"] is None
    with pytest.raises(RuntimeError, match="no grid today"):
        impl.launch(1, 1, 1)


def test_engine_contract_reads_declared_numbers_or_the_plain_partials_rule():
    assert extra_traffic(None, 64) is None and extra_traffic({"programs": 3}, 64) is None
    assert extra_traffic({"partial_rows": 0}, 64) is None
    assert extra_traffic({"partial_rows": 5}, 64) == (
        2 * 5 * 64 * 4,
        "+ fp32 dγ partials written and read back (2·5·N·4)",
    )
    assert extra_traffic({"partial_rows": 5, "extra_bytes": 9, "extra_bytes_note": "mine"}, 64) == (9, "mine")
    assert extra_traffic({"extra_bytes": 0}, 64)[0] == 0  # a declared zero is a number, not "unknown"
    assert partial_bytes(None, 64) == 0 and partial_bytes({"partial_rows": 3}, 64) == 3 * 64 * 4
    assert partial_bytes({"partial_rows": 3, "partial_bytes": 10}, 64) == 10


def test_the_example_plugin_named_by_family_keeps_its_plain_launch():
    """examples/dock_plugin.py names the family "workspace" without a descriptor: drawn like one, its own
    launch numbers used as they are."""
    import sys

    from rmsnorm_kernels.registry import REGISTRY

    had = "torch-chunked" in REGISTRY, "examples.dock_plugin" in sys.modules
    registry = Registry()
    try:
        load_path("examples.dock_plugin:chunked_rmsnorm", registry)
    finally:  # its @register also ran on import, into the global registry: leave that as found
        if not had[0]:
            REGISTRY.remove("torch-chunked")
        if not had[1]:
            sys.modules.pop("examples.dock_plugin", None)
    impl = registry.get("torch-chunked")
    assert impl.family == "workspace" and impl.dgamma is None and impl.fused is True
    launch = impl.launch(1000, 8, 132)
    assert launch["partial_rows"] == -(-1000 // 64) and "extra_bytes" not in launch


def test_a_family_whose_scratch_is_more_than_the_partial_rows_declares_its_bytes():
    M, N = random.randint(1, 5000), random.randint(8, 9000)
    floor = BackwardFamily(
        "floor",
        "M×N terms, then 64 rows",
        partial_rows=lambda g, M, N: 64,
        partial_bytes=lambda g, M, N: M * N * 2 + 64 * N * 4,
    )
    got = floor.numbers({"programs": M}, M, N)
    assert got["partial_rows"] == 64 and got["partial_bytes"] == M * N * 2 + 64 * N * 4
    assert partial_bytes(got, N) == M * N * 2 + 64 * N * 4  # what the memory estimate reads


def test_supports_names_the_shapes_an_implementation_takes():
    impl = Implementation("even-only", fn=_fn, supports=lambda M, N, dtype: None if N % 2 == 0 else f"odd N = {N}")
    assert impl.shape_refusal(4, 8, "bfloat16") is None and impl.shape_refusal(4, 7, "bfloat16") == "odd N = 7"
    assert Implementation("any", fn=_fn).shape_refusal(1, 1, "float32") is None
    broken = Implementation("broken", fn=_fn, supports=lambda M, N, dtype: 1 / 0)
    assert broken.shape_refusal(1, 1, "float32").startswith("shape check failed: ZeroDivisionError")
