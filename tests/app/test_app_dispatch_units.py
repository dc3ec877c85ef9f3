"""Unit tests of the scheduler (`app.dispatch`, `app.queues`) with stand-in workers (no processes): what the
parent adds around the engine's run — queue positions, one job at a time per device, restarts, error rows,
leftovers, split runs, cancel, the summary with the sweep's baseline, the store."""

from __future__ import annotations

import random
import threading
import time

import pytest

from app.dispatch import Scheduler
from app.queues import QueueFull, UnknownDevice
from app.schemas import BenchmarkRequest
from app.store import Store
from app.worker_protocol import WorkerDied, WorkerStartFailed, row_device
from engine.models import Case, ResultRow, RunHeader


class FakeWorker:
    """Stands in for `DeviceWorker`: ``die`` cases kill it, ``block`` cases wait for `gate`; others are ok rows."""

    fail_start = False
    gate = threading.Event()

    def __init__(self, label, plugins=(), ceiling_bytes=None, self_check=False):
        self.label, self.kind = label, label.partition(":")[0]
        self.info, self.start_error, self.restarts, self.last_death = None, None, 0, None
        self.run_id = None
        self.begun: list[str] = []
        self.busy = threading.Lock()

    def ensure_ready(self):
        return None

    def begin(self, sweep, run_id, implementations):
        if self.fail_start:
            self.start_error = f"worker for {self.label} could not start: boom"
            raise WorkerStartFailed(self.start_error + "\ntraceback")
        self.run_id = run_id
        self.begun.append(run_id)
        return RunHeader.model_validate(
            {
                "run_id": run_id,
                "created_at": "2026-12-03T00:00:00Z",
                "ceiling_GBps": 10.0,
                "ceiling_method": "fake",
                "device": {
                    "kind": "cpu",
                    "name": "fake",
                    "sm_count": 1,
                    "memory_bytes": 1,
                    "l2_bytes": 1,
                    "label": self.label,
                },
                "versions": {},
                "sweep": {**sweep.model_dump(), "implementations": implementations},
            }
        )

    def in_run(self, run_id):
        return self.run_id == run_id

    def measure(self, case, timeout=None):
        assert self.busy.acquire(blocking=False), "two cases at once on one device"
        try:
            if case.impl == "die":
                self.run_id, self.last_death = None, "exit code 3"
                raise WorkerDied(self.label, 3)
            if case.impl == "block":
                assert FakeWorker.gate.wait(10)
            now = time.time()
            return ResultRow.model_validate(
                {
                    "run_id": self.run_id,
                    "impl": case.impl,
                    "pass": case.pass_,
                    "dtype": case.dtype,
                    "M": case.M,
                    "N": case.N,
                    "status": "ok",
                    "median_us": 1.0,
                    "GBps": float(case.M),
                    "bytes": 1,
                    "mode": "cpu",
                    "device": row_device(None, self.label).model_dump(),
                    "started_at": now,
                    "ended_at": now,
                }
            )
        finally:
            self.busy.release()

    def end(self):
        self.run_id = None

    def restart(self):
        self.restarts += 1

    def row_device(self):
        return row_device(None, self.label)

    def describe(self):
        return {
            "label": self.label,
            "index": 0,
            "name": self.label,
            "uuid": None,
            "ready": True,
            "pid": None,
            "restarts": self.restarts,
            "error": self.start_error,
            "self_check": None,
        }

    def kill(self):
        pass

    def stop(self):
        pass


@pytest.fixture
def make(tmp_path):
    made = []

    def build(labels=("cpu:0",), max_queue=4, fail_start=False):
        FakeWorker.fail_start = fail_start
        FakeWorker.gate = threading.Event()
        scheduler = Scheduler(labels, Store(tmp_path / f"db{len(made)}.sqlite3"), max_queue, worker_factory=FakeWorker)
        made.append(scheduler)
        return scheduler

    yield build
    FakeWorker.gate.set()
    for scheduler in made:
        scheduler.stop(timeout=5)


def submit(scheduler, impls_m, **request):
    request = BenchmarkRequest.model_validate(
        {"implementations": ["eager"], "passes": ["fwd"], "dtypes": ["float32"], "M": [8], "N": [64], **request}
    )
    cases = [Case(impl=impl, pass_="fwd", dtype="float32", M=m, N=64) for impl, m in impls_m]
    lines: list[dict] = []
    job = scheduler.submit(request, request.engine_sweep(), cases, listener=lines.append)
    return job, lines


def test_dead_worker_case_is_an_error_row_and_the_run_goes_on_in_a_new_one(make):
    scheduler = make()
    ms = random.sample(range(1, 500), 3)
    job, lines = submit(scheduler, [("eager", ms[0]), ("die", ms[1]), ("eager", ms[2])], baseline="eager")
    assert job.finished.wait(10)
    rows = [line for line in lines if line["type"] == "row"]
    assert [(r["impl"], r["M"], r["status"]) for r in rows] == [
        ("eager", ms[0], "ok"),
        ("die", ms[1], "error"),
        ("eager", ms[2], "ok"),
    ]
    assert (
        rows[1]["reason"]
        == f"worker for cpu:0 died (exit code 3) while running die fwd float32 M={ms[1]} N=64; restarted"
    )
    assert rows[1]["device"]["label"] == "cpu:0" and rows[1]["bytes"] > 0
    worker = scheduler.workers["cpu:0"]
    assert worker.restarts == 1 and worker.begun == [job.run_id, job.run_id]  # begun again in the new worker
    headers = [line for line in lines if line["type"] == "header"]
    assert len(headers) == 1 and headers[0]["sweep"]["split"] is False and headers[0]["sweep"]["device"] == "auto"
    summary = lines[-1]
    assert summary["type"] == "summary" and (summary["ok"], summary["error"], summary["complete"]) == (2, 1, True)
    assert summary["speedup"]["baseline"] == "eager" and summary["planned"] == 3
    stored = scheduler.store.get_run(job.run_id)
    assert [r["status"] for r in stored["rows"]] == ["ok", "error", "ok"] and stored["summary"]["complete"] is True


def test_a_device_that_cannot_start_leaves_error_rows_naming_why(make):
    scheduler = make(fail_start=True)
    job, lines = submit(scheduler, [("eager", 8), ("eager", 16)])
    assert job.finished.wait(10)
    rows = [line for line in lines if line["type"] == "row"]
    assert len(rows) == 2 and all(r["status"] == "error" for r in rows)
    assert rows[0]["reason"] == (
        "no device could run eager fwd float32 M=8 N=64: cpu:0: could not prepare the run: "
        "worker for cpu:0 could not start: boom"
    )
    document = job.document()
    assert document["run"] is None and document["summary"]["complete"] is False


def test_positions_full_queue_and_cancel(make):
    scheduler = make(max_queue=1)
    first, first_lines = submit(scheduler, [("block", 8)])
    second, second_lines = submit(scheduler, [("eager", 8)])
    assert [line["position"] for line in first_lines if line["type"] == "queued"] == [0]
    assert [line["position"] for line in second_lines if line["type"] == "queued"] == [1]
    with pytest.raises(QueueFull, match="cpu:0 has 1 job"):
        submit(scheduler, [("eager", 8)])
    scheduler.cancel(second)  # before it started: no rows, incomplete
    assert second.finished.wait(5) and not [line for line in second_lines if line["type"] == "row"]
    assert second_lines[-1]["cancelled"] is True and second_lines[-1]["complete"] is False
    assert scheduler.is_running(first.run_id) and not scheduler.is_running(second.run_id)
    FakeWorker.gate.set()
    assert first.finished.wait(10) and first_lines[-1]["complete"] is True


def test_split_runs_every_case_once_over_the_devices_and_pinning(make):
    scheduler = make(labels=("cpu:0", "cpu:1", "cpu:2"))
    ms = list(range(8, 8 * 13, 8))
    job, lines = submit(scheduler, [("eager", m) for m in ms], split=True)
    assert job.finished.wait(10)
    rows = [line for line in lines if line["type"] == "row"]
    assert sorted(r["M"] for r in rows) == ms
    assert set(job.headers) >= {r["device"]["label"] for r in rows}
    pinned, pinned_lines = submit(scheduler, [("eager", 8)], device="cpu:2")
    assert pinned.finished.wait(10)
    assert {line["device"]["label"] for line in pinned_lines if line["type"] == "row"} == {"cpu:2"}
    with pytest.raises(UnknownDevice, match="cuda"):
        submit(scheduler, [("eager", 8)], device="cuda")
    assert scheduler.books.devices_for("cpu") == ["cpu:0", "cpu:1", "cpu:2"]
