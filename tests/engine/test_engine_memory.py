"""Unit tests of engine.memory (the estimate checked before a case is allocated)."""

import pytest

from engine import memory


def test_fused_backward_saves_rstd_only_and_counts_partials():
    M, N, s = 1024, 512, 2
    fp = memory.footprint("bwd", M, N, s, True, {"partial_rows": 132})
    assert fp.per_set == 3 * M * N * s + M * 4
    assert fp.transient == 2 * (M * N * s + N * s) + 132 * N * 4
    unfused = memory.footprint("bwd", M, N, s, False, None)
    assert unfused.per_set == 3 * M * N * s + 2 * M * N * 4 + M * 4
    assert unfused.transient == 2 * (M * N * s + N * s) + 3 * M * N * 4
    assert fp.total(3) == fp.shared + fp.transient + 3 * fp.per_set + memory.FIXED_OVERHEAD


def test_family_name_is_not_accepted_for_fused():
    with pytest.raises(TypeError, match="fused must be a bool"):
        memory.footprint("fwd", 8, 8, 2, "persistent", None)


def test_fit_sets_bounds():
    fp = memory.Footprint(per_set=100, shared=0, transient=0)
    base = memory.FIXED_OVERHEAD
    assert memory.fit_sets(fp, 10, base + 99) == 0
    assert memory.fit_sets(fp, 10, base + 350) == 3
    assert memory.fit_sets(fp, 2, base + 10_000) == 2
    assert memory.fit_sets(fp, 10, base + 350, flush_bytes=200) == 1


def test_budget_and_human():
    assert memory.budget(1000, "cuda") == 900 and memory.budget(1000, "cpu") == 500
    assert memory.human(3 << 30) == "3.0 GiB" and memory.human(1536) == "1.5 KiB" and memory.human(12) == "12 B"


def test_forward_footprint_and_declared_partial_bytes():
    M, N, s = 300, 96, 4
    fwd = memory.footprint("fwd", M, N, s, True, {"partial_rows": 50})
    assert fwd.per_set == M * N * s and fwd.transient == 2 * (M * N * s + M * 4)  # the forward has no partials
    assert fwd.shared == N * 4 * 2
    plain = memory.footprint("bwd", M, N, s, True, {"partial_rows": 7})
    declared = memory.footprint("bwd", M, N, s, True, {"partial_rows": 7, "partial_bytes": 123})
    none = memory.footprint("bwd", M, N, s, True, None)
    assert plain.transient - none.transient == 7 * N * 4  # a plain launch: fp32 rows of N
    assert declared.transient - none.transient == 123  # what the family declared wins
