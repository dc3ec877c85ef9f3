"""A backward with a new dγ family is one Python file (tests/engine/toy_tree_backward.py): loaded as a
plugin, its family's numbers reach the listing, the launch grid, the byte model and the memory estimate of
a real engine run, with no edit anywhere else."""

import sys

import pytest

from engine import memory
from engine.byte_model import min_bytes
from engine.models import Case
from engine.runner import DeviceBench
from rmsnorm_kernels.registry import REGISTRY, Registry, describe_all, load_path

SMALL_CEILING = 1 << 20


@pytest.fixture
def toy():
    """The toy module loaded by path (it registers itself in the global registry); taken out afterwards."""
    sys.modules.pop("toy_tree_backward", None)
    added = load_path("toy_tree_backward")
    assert added == ["toy-tree"]
    yield REGISTRY.get("toy-tree")
    REGISTRY.remove("toy-tree")
    sys.modules.pop("toy_tree_backward", None)


def test_the_listing_shows_the_new_family_and_its_numbers(toy):
    entry = {d["name"]: d for d in describe_all()}["toy-tree"]
    assert entry["family"] == "tree" and entry["source"] == "path:toy_tree_backward"
    assert entry["dgamma"]["name"] == "tree" and "pairwise" in entry["dgamma"]["description"]
    assert entry["dgamma"]["partial_rows"].startswith("2·G − 1")
    example = entry["launch_example"]
    programs = -(-example["M"] // 16)
    assert example["programs"] == programs and example["family"] == "tree"
    assert example["partial_rows"] == 2 * programs - 1
    assert example["partial_bytes"] == (2 * programs - 1) * example["N"] * 4
    assert example["extra_bytes"] == 2 * (2 * programs - 1) * example["N"] * 4 + programs * 8


def test_launch_carries_the_family_numbers_for_any_shape(toy):
    for M, N in ((1, 8), (17, 100), (4096, 4096)):
        launch = toy.launch(M, N, 7)
        g = -(-M // 16)
        assert (launch["programs"], launch["partial_rows"], launch["family"]) == (g, 2 * g - 1, "tree")
        assert launch["extra_bytes_note"].startswith(f"+ tree of {2 * g - 1}")


def test_an_engine_run_counts_its_bytes_and_memory(toy):
    registry = Registry()
    registry.add(toy)
    bench = DeviceBench("cpu", ceiling_bytes=SMALL_CEILING, registry=registry)
    M, N = 40, 48
    row = bench.run_case(Case(impl="toy-tree", pass_="bwd", dtype="float32", M=M, N=N), repetitions=2, warmup=1)
    assert row.status == "ok" and row.verified is True, row.reason
    g = -(-M // 16)
    assert row.launch["partial_rows"] == 2 * g - 1
    assert row.actual_bytes == min_bytes("bwd", M, N, "float32") + 2 * (2 * g - 1) * N * 4 + g * 8
    assert row.actual_bytes_note.startswith("+ tree of")
    with_partials = memory.footprint("bwd", M, N, 4, True, row.launch)
    without = memory.footprint("bwd", M, N, 4, True, None)
    assert with_partials.transient - without.transient == (2 * g - 1) * N * 4
    flush = 2 * bench.info.l2_bytes if row.l2_flush else 0
    assert row.memory_estimate_bytes == with_partials.total(row.rotating_sets) + flush
