"""The correctness gate: a wrong implementation is timed but comes back ``wrong``, never best."""

import pytest
import torch

from engine import verify as verify_mod
from engine.runner import DeviceBench, iter_run, run_sweep
from engine.models import Case, ResultRow, Sweep
from engine.summary import summarize
from rmsnorm_kernels.registry import Implementation
from tiny_impls import failing, make_registry, off_by_one_percent, one_wrong_row, torch_rmsnorm

SMALL_CEILING = 1 << 20


@pytest.fixture
def registry():
    return make_registry(
        wrong=Implementation("test-wrong", fn=off_by_one_percent, description="fast, off by 1 %"),
        failing=Implementation("test-failing", fn=failing),
        last_row=Implementation("test-last-row", fn=one_wrong_row(lambda m: m - 1)),
        strided=Implementation("test-mid-row", fn=one_wrong_row(lambda m: m // 2 + 7)),
    )


@pytest.fixture
def bench(registry):
    return DeviceBench("cpu", ceiling_bytes=SMALL_CEILING, registry=registry)


def case(impl, pass_="fwd", dtype="float16", M=64, N=96):
    return Case(impl=impl, pass_=pass_, dtype=dtype, M=M, N=N)


@pytest.mark.parametrize("pass_", ["fwd", "bwd"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_right_implementation_is_verified_with_its_tolerance(bench, pass_, dtype):
    r = bench.run_case(case("test-torch", pass_, dtype), 2, 1)
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    assert r.status == "ok" and r.verified is True and r.reason is None
    assert r.tolerance == tol and 0 <= r.max_rel_err <= tol


@pytest.mark.parametrize("pass_", ["fwd", "bwd"])
def test_off_by_one_percent_is_timed_but_wrong(bench, pass_):
    r = bench.run_case(case("test-wrong", pass_), 3, 1)
    assert r.status == "wrong" and r.verified is False
    assert r.max_rel_err == pytest.approx(0.01, rel=0.15) and r.max_rel_err > r.tolerance
    assert "relative error" in r.reason and ("y" in r.reason if pass_ == "fwd" else "dx" in r.reason)
    assert r.median_us > 0 and r.GBps > 0 and r.repetitions == 3  # timed all the same


def test_wrong_never_best_even_when_fastest(registry, monkeypatch):
    sweep = Sweep.model_validate(
        {
            "implementations": ["test-torch", "test-wrong"],
            "passes": ["fwd"],
            "dtypes": ["fp16"],
            "M": [64],
            "N": [128],
            "repetitions": 3,
            "warmup": 1,
            "device": "cpu",
            "baseline": "test-torch",
        },
        context={"registry": registry},
    )
    rows = list(iter_run(sweep, registry=registry, ceiling_bytes=SMALL_CEILING))[1:]
    by = {r.impl: r for r in rows}
    # make the wrong one look 100× faster than the right one: still not best
    fast = by["test-wrong"].model_copy(update={"GBps": by["test-torch"].GBps * 100})
    s = summarize([by["test-torch"], fast], baseline="test-torch")
    assert s["wrong"] == 1 and s["ok"] == 1
    assert s["best"]["fwd/float16/64x128"]["impl"] == "test-torch"
    assert s["speedup"]["by_shape"]["fwd/float16/64x128"] == {"test-torch": 1.0}


def test_raising_implementation_is_an_error_row_with_its_reason(bench):
    r = bench.run_case(case("test-failing"), 2, 1)
    assert r.status == "error" and "exploded on purpose" in r.reason and "correctness check" in r.reason
    assert r.verified is None and r.median_us is None


def test_verify_off_leaves_rows_not_verified(bench):
    r = bench.run_case(case("test-wrong"), 2, 1, verify=False)
    assert r.status == "ok" and r.verified is None and r.max_rel_err is None and r.tolerance is None


@pytest.mark.parametrize("impl", ["test-last-row", "test-mid-row"])
def test_one_wrong_row_of_a_small_case_is_caught(bench, impl):
    r = bench.run_case(case(impl, M=300, N=64), 2, 1)
    assert r.status == "wrong" and f"row {299 if impl == 'test-last-row' else 157}" in r.reason


def test_sampled_rows_catch_a_wrong_last_row_of_a_large_case(bench, monkeypatch):
    monkeypatch.setattr(verify_mod, "FULL_CHECK_ELEMENTS", 1 << 12)  # 4096 elements: a 1024×64 case is "large"
    r = bench.run_case(case("test-last-row", M=1024, N=64), 2, 1)
    assert r.status == "wrong" and "row 1023" in r.reason
    assert r.rows_checked < 1024
    ok = bench.run_case(case("test-torch", "bwd", M=1024, N=64), 2, 1)
    assert ok.status == "ok" and ok.verified is True and ok.rows_checked < 1024


def test_sample_rows_edges_and_random_middle():
    rows = verify_mod.sample_rows(100_000, 4096, seed=3)
    assert rows[:64].tolist() == list(range(64)) and rows[-64:].tolist() == list(range(100_000 - 64, 100_000))
    assert len(rows) == len(set(rows.tolist())) and 128 < len(rows) <= (1 << 22) // 4096
    middle = rows[64:-64]
    assert middle.min() >= 64 and middle.max() < 100_000 - 64 and middle.max() - middle.min() > 50_000
    assert torch.equal(verify_mod.sample_rows(1000, 64, seed=3), torch.arange(1000))


def test_dgamma_over_all_rows_in_chunks_matches_the_reference(monkeypatch):
    from rmsnorm_kernels.reference import rmsnorm_backward_reference

    monkeypatch.setattr(verify_mod, "CHUNK_ELEMENTS", 3 * 16)  # 3 rows per chunk: several chunks and a remainder
    g = torch.Generator().manual_seed(1)
    x, dy = torch.randn(10, 16, generator=g), torch.randn(10, 16, generator=g)
    w = 1 + 0.1 * torch.randn(16, generator=g)
    _, dw_ref = rmsnorm_backward_reference(x, w, dy, 1e-6)
    assert torch.allclose(verify_mod._dw_reference(x, w, dy, 1e-6), dw_ref, rtol=1e-12, atol=1e-12)


def test_nan_output_is_wrong_with_no_finite_error(registry):
    def nan_row(x, weight, eps=1e-6):
        y = torch_rmsnorm(x, weight, eps).clone()
        y[3, 5] = float("nan")
        return y

    registry.add(Implementation("test-nan", fn=nan_row, passes=("fwd",)))
    r = DeviceBench("cpu", ceiling_bytes=SMALL_CEILING, registry=registry).run_case(case("test-nan"), 2, 1)
    assert r.status == "wrong" and r.max_rel_err is None and "inf" in r.reason and "row 3" in r.reason
    ResultRow.model_validate_json(r.model_dump_json())


def test_run_file_counts_wrong_and_summary_speedup(registry):
    sweep = Sweep.model_validate(
        {
            "implementations": ["test-torch", "test-wrong"],
            "passes": ["fwd", "bwd"],
            "dtypes": ["fp32"],
            "M": [32],
            "N": [64],
            "repetitions": 2,
            "warmup": 1,
            "device": "cpu",
            "baseline": "test-torch",
        },
        context={"registry": registry},
    )
    run = run_sweep(sweep, registry=registry, ceiling_bytes=SMALL_CEILING)
    assert run.summary["wrong"] == 2 and run.summary["ok"] == 2
    assert {v["impl"] for v in run.summary["best"].values()} == {"test-torch"}
    assert run.summary["speedup"]["baseline"] == "test-torch"
    assert set(run.summary["speedup"]["by_shape"]) == {"fwd/float32/32x64", "bwd/float32/32x64"}
