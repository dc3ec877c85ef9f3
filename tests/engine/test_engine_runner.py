import math
import threading

import pytest
import torch

from engine import runner as engine_mod
from engine.byte_model import min_bytes
from engine.runner import DeviceBench, iter_run, plan, run_sweep
from engine.models import ResultRow, RunFile, RunHeader, Sweep
from rmsnorm_kernels.registry import Implementation
from tiny_impls import failing, make_registry, torch_rmsnorm, wrong_shape

SMALL_CEILING = 1 << 20


@pytest.fixture
def registry():
    return make_registry(
        failing=Implementation("test-failing", fn=failing),
        wrong=Implementation("test-wrong-shape", fn=wrong_shape),
        triton=Implementation(
            "triton-pretend",
            fn=torch_rmsnorm,
            family="persistent",
            uses_triton=True,
            launch=lambda M, N, sm: {"programs": sm, "rows_per_program": -(-M // sm), "partial_rows": sm},
        ),
    )


@pytest.fixture
def bench(registry):
    return DeviceBench("cpu", ceiling_bytes=SMALL_CEILING, registry=registry)


def tiny(registry, **over):
    data = {
        "implementations": ["test-torch"],
        "passes": ["fwd", "bwd"],
        "dtypes": ["bf16"],
        "M": [32, 64],
        "N": [64],
        "repetitions": 3,
        "warmup": 1,
        "device": "cpu",
    }
    data.update(over)
    return Sweep.model_validate(data, context={"registry": registry})


def test_plan_orders_shapes_then_implementations(registry):
    cases = plan(tiny(registry, implementations=["test-torch", "test-fwd-only"], dtypes=["bf16", "fp16"]), registry)
    assert len(cases) == 2 * 2 * 2 * 1 * 2
    assert [c.impl for c in cases[:2]] == ["test-torch", "test-fwd-only"]
    assert (cases[0].dtype, cases[0].pass_, cases[0].M) == ("bfloat16", "fwd", 32)
    assert cases[-1].dtype == "float16"


def test_default_implementations_are_the_available_ones(registry):
    names = {c.impl for c in plan(tiny(registry, implementations=None), registry)}
    assert "test-torch" in names and "test-unavailable" not in names


def test_tiny_cpu_sweep_header_first_then_one_row_per_case(registry):
    sweep = tiny(registry, implementations=["test-torch", "test-fwd-only"], dtypes=["bf16", "fp32"])
    items = list(iter_run(sweep, registry=registry, ceiling_bytes=SMALL_CEILING))
    header, rows = items[0], items[1:]
    assert isinstance(header, RunHeader) and all(isinstance(r, ResultRow) for r in rows)
    assert header.device.kind == "cpu" and header.ceiling_GBps > 0 and "1 MiB" in header.ceiling_method
    assert header.sweep["implementations"] == ["test-torch", "test-fwd-only"]
    assert header.versions["torch"] == torch.__version__
    assert len(rows) == 2 * 2 * 2 * 2
    assert {r.run_id for r in rows} == {header.run_id}
    ok = [r for r in rows if r.status == "ok"]
    assert len(ok) == 12  # test-fwd-only has no backward: 4 skipped
    for r in ok:
        for value in (r.median_us, r.min_us, r.max_us, r.q1_us, r.q3_us, r.GBps, r.pct_of_ceiling):
            assert math.isfinite(value) and value > 0
        assert r.min_us <= r.q1_us <= r.median_us <= r.q3_us <= r.max_us
        assert r.bytes == min_bytes(r.pass_, r.M, r.N, r.dtype)
        assert r.GBps == pytest.approx(r.bytes / (r.median_us * 1e-6) / 1e9)
        assert r.pct_of_ceiling == pytest.approx(100 * r.GBps / header.ceiling_GBps)
        assert r.repetitions == 3 and r.mode == "cpu" and r.started_at <= r.ended_at
        assert r.peak_bytes is None and "not measured on CPU" in r.peak_bytes_note
    skipped = [r for r in rows if r.status == "skipped"]
    assert len(skipped) == 4 and all("does not provide the bwd pass" in r.reason for r in skipped)


def test_skip_reasons(bench):
    def row(impl, pass_="fwd", **kw):
        from engine.models import Case

        return bench.run_case(Case(impl=impl, pass_=pass_, dtype="bfloat16", M=8, N=16), repetitions=2, warmup=1, **kw)

    r = row("test-unavailable")
    assert r.status == "skipped" and "flux capacitor" in r.reason
    r = row("nobody")
    assert r.status == "skipped" and "not registered" in r.reason
    r = row("triton-pretend")
    from rmsnorm_kernels.triton_mode import INTERPRETER_SM_COUNT

    assert r.status == "skipped" and "interpreter" in r.reason and r.launch["programs"] == INTERPRETER_SM_COUNT
    r = row("test-torch", timing="cuda-graph")
    assert r.status == "skipped" and "CUDA" in r.reason


def test_triton_on_cpu_runs_labelled_interpreter_when_asked(bench, monkeypatch):
    from engine.models import Case

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    r = bench.run_case(
        Case(impl="triton-pretend", pass_="bwd", dtype="float32", M=16, N=32), 2, 1, triton_interpreter=True
    )
    assert r.status == "ok" and r.mode == "interpreter"
    assert r.actual_bytes == r.bytes + 2 * r.launch["partial_rows"] * 32 * 4 and r.launch["partial_rows"] > 2
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    r = bench.run_case(
        Case(impl="triton-pretend", pass_="fwd", dtype="float32", M=16, N=32), 2, 1, triton_interpreter=True
    )
    assert r.status == "skipped" and "TRITON_INTERPRET=1" in r.reason


def test_kernel_failures_become_error_rows_and_the_run_goes_on(registry):
    sweep = tiny(registry, implementations=["test-failing", "test-wrong-shape", "test-torch"], passes=["fwd"], M=[16])
    rows = list(iter_run(sweep, registry=registry, ceiling_bytes=SMALL_CEILING))[1:]
    by_impl = {r.impl: r for r in rows}
    assert by_impl["test-failing"].status == "error" and "exploded on purpose" in by_impl["test-failing"].reason
    assert by_impl["test-wrong-shape"].status == "error" and "shape" in by_impl["test-wrong-shape"].reason
    assert by_impl["test-torch"].status == "ok"
    assert by_impl["test-failing"].median_us is None and by_impl["test-failing"].GBps is None


def test_oversize_case_refused_before_allocation(bench, monkeypatch):
    from engine.models import Case

    allocations = []
    monkeypatch.setattr(engine_mod, "random_inputs", lambda *a, **k: allocations.append(a) or pytest.fail("allocated"))
    monkeypatch.setattr(bench, "free_memory", lambda: 3 << 30)
    r = bench.run_case(Case(impl="test-torch", pass_="bwd", dtype="float32", M=1 << 20, N=2048), 2, 1)
    assert r.status == "skipped"
    assert "not enough memory" in r.reason and "refused before allocation" in r.reason and "GiB" in r.reason
    assert r.memory_estimate_bytes > 3 << 30
    assert allocations == []


def test_memory_caps_rotating_sets(bench, monkeypatch):
    from engine.models import Case

    bench.info = bench.info.model_copy(update={"l2_bytes": 512 << 20})  # would want 32 sets of 16 MiB
    monkeypatch.setattr(bench, "free_memory", lambda: 512 << 20)  # budget 256 MiB on CPU
    r = bench.run_case(Case(impl="test-torch", pass_="fwd", dtype="float32", M=1024, N=4096), 40, 1)
    assert r.status == "ok" and 1 <= r.rotating_sets <= 7
    assert r.memory_estimate_bytes <= 256 << 20 and r.l2_flush is False  # no room for a 1 GiB flush buffer


def test_small_case_with_few_sets_flushes_the_cache(bench):
    from engine.models import Case

    r = bench.run_case(Case(impl="test-torch", pass_="fwd", dtype="float32", M=8, N=16), 2, 1)
    assert r.status == "ok" and r.rotating_sets == 3 and r.l2_flush is True


def test_cancel_stops_between_cases(registry):
    cancel = threading.Event()
    seen = []

    def progress(done, total, row):
        seen.append((done, total))
        if done == 2:
            cancel.set()

    sweep = tiny(registry, M=[8, 16, 32], passes=["fwd"])
    items = list(iter_run(sweep, registry=registry, cancel=cancel, on_progress=progress, ceiling_bytes=SMALL_CEILING))
    assert isinstance(items[0], RunHeader)
    assert len(items) == 1 + 2 and seen == [(1, 3), (2, 3)]


def test_ceiling_measured_once_per_bench(bench, registry, monkeypatch):
    calls = []
    real = engine_mod.measure_copy
    monkeypatch.setattr(engine_mod, "measure_copy", lambda *a, **k: calls.append(1) or real(*a, **k))
    list(iter_run(tiny(registry, passes=["fwd"], M=[8]), registry=registry, bench=bench))
    list(iter_run(tiny(registry, passes=["fwd"], M=[8]), registry=registry, bench=bench))
    assert len(calls) == 1


def test_run_sweep_file_and_summary(registry):
    sweep = tiny(registry, implementations=["test-torch", "test-failing"], passes=["fwd"])
    run = run_sweep(sweep, registry=registry, ceiling_bytes=SMALL_CEILING)
    doc = RunFile.model_validate_json(run.model_dump_json())
    assert doc.summary["rows"] == 4 and doc.summary["ok"] == 2 and doc.summary["error"] == 2
    assert doc.summary["complete"] is True
    best = doc.summary["best"]["fwd/bfloat16/32x64"]
    assert best["impl"] == "test-torch" and best["GBps"] > 0


def test_unknown_device_is_a_clear_error(registry):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ValueError, match="no CUDA GPU"):
        DeviceBench("cuda:0", registry=registry)


def test_engine_imports_no_web_stack():
    import subprocess
    import sys
    from pathlib import Path

    modules = ["models", "byte_model", "device", "ceiling", "timing", "memory", "summary", "runner", "report", "plot"]
    code = (
        "import sys\n"
        + "".join(f"import engine.{m}\n" for m in modules)
        + "print([m for m in ('fastapi', 'uvicorn', 'starlette', 'jinja2', 'plotly', 'app') if m in sys.modules])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_header_loads_the_native_node_first_where_a_gpu_sweep_has_a_triton_implementation(bench, monkeypatch):
    """The header's native_node says how the run's Triton calls go: on a GPU the node is loaded before the header is
    written (and before the ceiling is measured), never for a CPU run or a sweep without Triton."""
    calls = []
    monkeypatch.setattr(engine_mod.native, "ensure", lambda: calls.append("ensure"))
    monkeypatch.setattr(bench, "ceiling", lambda: calls.append("ceiling"))
    monkeypatch.setattr(engine_mod.devices, "run_header", lambda *a, **k: "header")
    sweep = Sweep(M=[8], N=[16])
    assert bench.header(sweep, "r", ["triton-pretend"]) == "header"  # CPU
    assert calls and "ensure" not in calls
    bench.device = torch.device("cuda")
    calls.clear()
    bench.header(sweep, "r", ["test-torch"])
    assert calls and "ensure" not in calls
    calls.clear()
    bench.header(sweep, "r", ["test-torch", "triton-pretend"])
    assert calls[0] == "ensure" and calls.count("ensure") == 1 and "ceiling" in calls
