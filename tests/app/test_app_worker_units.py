"""Unit tests of the worker's two sides: the child's run loop (`app.worker_child.run`, in-process over a pipe)
and the parent's handle (`app.worker_handle.DeviceWorker`, a real spawned process): typed messages, tagging,
a case feed that resumes in a restarted worker, the ceiling measured once at start-up and reused."""

from __future__ import annotations

import multiprocessing
import random
import threading

import pytest
import torch
from service_harness import CEILING_BYTES

from app.worker_child import run
from app.worker_handle import DeviceWorker
from app.worker_protocol import (
    EndRun,
    NextCase,
    RunEnded,
    RunFailed,
    StartRun,
    Stop,
    WorkerDied,
    describe_exit,
    row_device,
    tag_device,
    torch_device_of,
)
from engine.models import Case, DeviceInfo, ResultRow, RunHeader, Sweep
from engine.runner import DeviceBench
from rmsnorm_kernels.registry import Implementation, Registry


def _rmsnorm(x, weight, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


@pytest.fixture
def registry():
    reg = Registry()
    reg.add(Implementation("unit-torch", fn=_rmsnorm, family="baseline"))
    return reg


def _sweep(registry, **over) -> Sweep:
    data = {
        "implementations": ["unit-torch"],
        "passes": ["fwd"],
        "dtypes": ["float32"],
        "M": [8],
        "N": [64],
        "repetitions": 2,
        "warmup": 0,
        "device": "cpu",
        **over,
    }
    return Sweep.model_validate(data, context={"registry": registry})


def _child(bench, label, start):
    parent, child = multiprocessing.Pipe()
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("ok", run(bench, label, child, start)), daemon=True)
    thread.start()
    return parent, thread, result


def test_child_runs_the_engine_with_the_cases_fed_to_it(registry):
    bench = DeviceBench("cpu", ceiling_bytes=int(CEILING_BYTES), registry=registry)
    sweep = _sweep(registry, verify=False)
    parent, thread, result = _child(
        bench, "cpu:2", StartRun(sweep=sweep, run_id="r-unit", implementations=["unit-torch"])
    )
    header = parent.recv()
    assert isinstance(header, RunHeader) and header.run_id == "r-unit"
    assert (header.device.label, header.device.index, header.device.uuid) == ("cpu:2", 2, "cpu-2")
    shapes = random.sample([8, 16, 24, 32, 40], 3)
    for m in shapes:
        parent.send(NextCase(case=Case(impl="unit-torch", pass_="fwd", dtype="float32", M=m, N=64)))
        row = parent.recv()
        assert isinstance(row, ResultRow) and row.M == m and row.status == "ok", row.reason
        assert row.device.label == "cpu:2" and row.run_id == "r-unit"
        assert row.verified is None  # the sweep's verify: false reached the engine
    parent.send(EndRun())
    assert isinstance(parent.recv(), RunEnded)
    thread.join(10)
    assert result["ok"] is True


def test_child_stops_when_told_mid_run(registry):
    bench = DeviceBench("cpu", ceiling_bytes=int(CEILING_BYTES), registry=registry)
    parent, thread, result = _child(bench, "cpu:0", StartRun(sweep=_sweep(registry), run_id="r", implementations=[]))
    assert isinstance(parent.recv(), RunHeader)
    parent.send(Stop())
    thread.join(10)
    assert result["ok"] is False  # the process is to exit
    try:
        extra = parent.recv() if parent.poll(0.2) else None
    except EOFError:  # the child's end is closed: nothing more was said
        extra = None
    assert extra is None  # no RunEnded


def test_engine_failure_is_a_run_failed_message(registry, monkeypatch):
    bench = DeviceBench("cpu", ceiling_bytes=int(CEILING_BYTES), registry=registry)
    monkeypatch.setattr(bench, "header", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no header today")))
    parent, thread, result = _child(bench, "cpu:0", StartRun(sweep=_sweep(registry), run_id="r", implementations=[]))
    answer = parent.recv()
    assert isinstance(answer, RunFailed) and answer.message == "RuntimeError: no header today"
    thread.join(10)
    assert result["ok"] is True  # the worker lives on, ready for the next run


def test_labels_and_tags():
    assert torch_device_of("cpu:3") == "cpu" and torch_device_of("cuda:1") == "cuda:1"
    assert tag_device({"name": "x", "index": 9}, "cpu:4") == {
        "name": "x",
        "index": 4,
        "uuid": "cpu-4",
        "label": "cpu:4",
    }
    assert tag_device({"name": "H200", "index": 1, "uuid": "GPU-a"}, "cuda:1")["uuid"] == "GPU-a"
    assert row_device(None, "cuda:7").model_dump() == {"index": None, "name": "cuda:7", "uuid": None, "label": "cuda:7"}
    info = DeviceInfo(kind="cuda", index=1, name="H200", uuid="GPU-a", sm_count=132, memory_bytes=1, l2_bytes=1)
    assert row_device(info, "cuda:1").name == "H200"
    assert describe_exit(3) == "exit code 3" and "SIGKILL" in describe_exit(-9) and "out-of-memory" in describe_exit(-9)


def _case(impl: str, m: int) -> Case:
    return Case(impl=impl, pass_="fwd", dtype="float32", M=m, N=64)


def test_spawned_worker_resumes_the_feed_after_a_crash_and_a_hang():
    worker = DeviceWorker(
        "cpu:1", plugins=("tests.app.crash_plugin", "tests.app.slow_plugin"), ceiling_bytes=int(CEILING_BYTES)
    )
    try:
        info = worker.ensure_ready()
        assert info.label == "cpu:1" and info.index == 1 and worker.ready
        ceiling = worker.known_ceiling
        assert ceiling is not None and ceiling.GBps > 0  # measured while getting ready
        sweep = Sweep.model_validate(
            {
                "implementations": ["eager"],
                "passes": ["fwd"],
                "dtypes": ["float32"],
                "M": [8],
                "N": [64],
                "repetitions": 3,
                "warmup": 1,
            }
        )
        header = worker.begin(sweep, "r-spawn", ["eager", "crash-exit"])
        assert header.ceiling_GBps == ceiling.GBps and header.sweep["implementations"] == ["eager", "crash-exit"]
        assert worker.in_run("r-spawn") and worker.measure(_case("eager", 8), timeout=60).status == "ok"

        with pytest.raises(WorkerDied):
            worker.measure(_case("crash-exit", 8), timeout=60)
        assert worker.last_death == "exit code 3" and not worker.in_run("r-spawn")
        worker.restart()
        again = worker.begin(sweep, "r-spawn", ["eager", "crash-exit"])
        assert (again.ceiling_GBps, again.ceiling_method) == (header.ceiling_GBps, header.ceiling_method)  # reused
        assert worker.measure(_case("eager", 16), timeout=60).M == 16  # the new worker takes the remaining cases

        slow = _case("slow-eager", 8)  # ≥ 0.05 s per call × (verify + warm-up + 100 repetitions)
        sweep_slow = sweep.model_copy(update={"repetitions": 100})
        worker.begin(sweep_slow, "r-slow", ["slow-eager"])
        with pytest.raises(WorkerDied):
            worker.measure(slow, timeout=1)
        assert worker.last_death == "did not answer within 1 s and was killed"
        worker.restart()
        assert worker.restarts == 2 and worker.ensure_ready().label == "cpu:1"
        worker.begin(sweep, "r-3", ["eager"])
        worker.end()
        assert not worker.in_run("r-3") and worker.ready  # ended cleanly, the process waits for the next run
    finally:
        worker.stop()
    assert not worker.alive


def test_the_child_module_needs_no_web_framework_nor_torch_to_import():
    import subprocess
    import sys

    from service_harness import REPO

    probe = "import app.worker_child, sys; print([m for m in ('fastapi', 'starlette', 'torch') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
