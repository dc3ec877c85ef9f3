"""The scheduler: per-device queues of benchmark jobs, one job at a time per device.

- A job is one `POST /benchmark`: a run id, its planned cases, and a listener that receives the stream lines
  (``queued``, ``header``, ``row``, ``summary``; see docs/ARCHITECTURE.md) from the scheduler's threads.
- Each device has a queue and a dispatcher thread that drives that device's worker process: the job at the
  head of the queue runs (position 0), the others wait and are told their position whenever it changes.
- A job goes to the device it pins (``cuda:3``, ``cpu:1``), or to the least busy device of the requested kind.
  A *split* job is queued on every device: each device, when the job reaches its head, takes the next
  unmeasured case, so the cases go to whichever worker is free; each device sends its own header (its ceiling).
- Cancel (the client went away) drops the cases not yet started; the case being measured finishes and is kept;
  the partial run stays in the store marked incomplete.
- A worker that dies mid-case is restarted; that case becomes an error row; the sweep goes on.

Every row is written to the store as soon as it arrives, so nothing measured is lost, whoever listens.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable, Iterable

from app.store import Store
from app.workers import (
    DeviceWorker,
    WorkerCommandFailed,
    WorkerDied,
    WorkerStartFailed,
    describe_exit,
    tag_device,
    torch_device_of,
)

log = logging.getLogger("rmsnorm.jobs")

Listener = Callable[[dict], None]


class QueueFull(Exception):
    """No device the request may use has room in its queue (answered 429)."""


class UnknownDevice(ValueError):
    """The request names a device this service has no worker for (answered 422)."""


def new_run_id() -> str:
    """The engine's run id (``20261202-140000-3fa2c1d0``: sortable, URL-safe, no dots)."""
    from engine.runner import new_run_id as engine_run_id

    return engine_run_id()


def case_label(case: dict) -> str:
    return f"{case['impl']} {case['pass']} {case['dtype']} M={case['M']} N={case['N']}"


class Job:
    """One benchmark request on its way through the queues."""

    def __init__(self, run_id: str, request: dict, worker_sweep: dict, cases: list[dict], split: bool,
                 listener: Listener | None = None) -> None:
        self.run_id = run_id
        self.request = request
        """The request as the client sent it (validated), recorded in the header's ``sweep``."""
        self.worker_sweep = worker_sweep
        """The engine `Sweep` the workers get (its device is set per worker)."""
        self.cases = cases
        self.split = split
        self.pending: deque[dict] = deque(cases)
        self.implementations = list(dict.fromkeys(case["impl"] for case in cases))
        self.devices: list[str] = []
        self.active: set[str] = set()
        self.headers: dict[str, dict] = {}
        self.rows: list[dict] = []
        self.cancelled = threading.Event()
        self.finished = threading.Event()
        self.finishing = False
        self.stored = False
        self.summary: dict | None = None
        self.last_error: str | None = None
        self._position: tuple[int, str] | None = None
        self._listener = listener

    def emit(self, line: dict) -> None:
        listener = self._listener
        if listener is None:
            return
        try:
            listener(line)
        except Exception:  # a listener whose client is gone must not stop the device
            log.debug("listener of %s failed", self.run_id, exc_info=True)

    def detach(self) -> None:
        self._listener = None

    def document(self) -> dict:
        """The run as one document (``?stream=false``): ``{"run", "rows", "summary"}`` (+ ``"headers"`` when split
        over several devices)."""
        headers = list(self.headers.values())
        document = {"run": headers[0] if headers else None, "rows": list(self.rows), "summary": self.summary}
        if len(headers) > 1:
            document["headers"] = headers
        return document


class Scheduler:
    def __init__(self, labels: Iterable[str], store: Store, max_queue: int, plugins: tuple[str, ...] = (),
                 ceiling_bytes: int | None = None, worker_factory=DeviceWorker,
                 case_timeout_s: float | None = None, self_check: bool = False) -> None:
        self.labels = list(labels)
        self.case_timeout_s = case_timeout_s
        """A case unanswered after this long: its worker is killed and restarted, the case is an error row."""
        if not self.labels:
            raise ValueError("the scheduler needs at least one device")
        self.store = store
        self.max_queue = max_queue
        self.workers: dict[str, DeviceWorker] = {
            label: worker_factory(label, plugins=plugins, ceiling_bytes=ceiling_bytes, self_check=self_check)
            for label in self.labels
        }
        self.queues: dict[str, list[Job]] = {label: [] for label in self.labels}
        self._cond = threading.Condition()
        self._threads: dict[str, threading.Thread] = {}
        self._stopping = False
        self.ceilings: dict[str, float | None] = {}
        self._live: set[str] = set()

    # -- life cycle -------------------------------------------------------------------------------------------

    def start(self, warm: bool = True) -> None:
        """Start one dispatcher thread per device (idempotent); ``warm`` also starts the worker processes now."""
        with self._cond:
            if self._threads or self._stopping:
                return
            for label in self.labels:
                thread = threading.Thread(target=self._dispatch, args=(label, warm), name=f"dispatch-{label}",
                                          daemon=True)
                self._threads[label] = thread
                thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel every job (their partial runs are kept, incomplete), stop the workers, join the threads."""
        with self._cond:
            self._stopping = True
            jobs = {id(job): job for queue in self.queues.values() for job in queue}
            self._cond.notify_all()
        for job in jobs.values():
            self.cancel(job)
        for worker in self.workers.values():
            worker.kill()  # interrupts a case or a start-up in progress
        for thread in self._threads.values():
            thread.join(timeout)
        for worker in self.workers.values():
            worker.stop()

    def is_running(self, run_id: str) -> bool:
        """Whether a job with this run id is queued or being measured (its run may not be deleted yet)."""
        with self._cond:
            return run_id in self._live

    # -- requests ----------------------------------------------------------------------------------------------

    def devices_for(self, device: str | None) -> list[str]:
        """The labels a request may use: ``auto``/None → all; ``cpu``/``cuda`` → those of that kind; a label → it."""
        spec = (device or "auto").strip().lower()
        if spec == "auto":
            return list(self.labels)
        if spec in ("cpu", "cuda"):
            found = [label for label in self.labels if label.startswith(spec + ":")]
        else:
            found = [label for label in self.labels if label == spec]
        if not found:
            raise UnknownDevice(f"no worker for device {device!r}; this service has: {', '.join(self.labels)}")
        return found

    def submit(self, request: dict, worker_sweep: dict, cases: list[dict], *, device: str | None, split: bool,
               listener: Listener | None = None, run_id: str | None = None) -> Job:
        """Queue a job (raises `UnknownDevice`, `QueueFull`). Its first ``queued`` line is emitted before return."""
        candidates = self.devices_for(device)
        job = Job(run_id or new_run_id(), request, worker_sweep, cases, split, listener)
        if not self._threads:
            self.start(warm=False)
        with self._cond:
            if self._stopping:
                raise QueueFull("the service is shutting down")
            roomy = [label for label in candidates if len(self.queues[label]) <= self.max_queue]
            if not roomy:
                waiting = {label: max(len(self.queues[label]) - 1, 0) for label in candidates}
                raise QueueFull(
                    "queue full: " + ", ".join(f"{label} has {n} job(s) waiting" for label, n in waiting.items())
                    + f" (at most {self.max_queue} may wait per device); try again later"
                )
            chosen = roomy if split else [min(roomy, key=self._load)]
            job.devices = chosen
            self._live.add(job.run_id)
            for label in chosen:
                self.queues[label].append(job)
            self._report_positions()
            self._cond.notify_all()
        return job

    def cancel(self, job: Job) -> None:
        """Drop the job's unstarted cases; it finishes (incomplete) once its in-flight case is back."""
        with self._cond:
            if job.finished.is_set() or job.finishing:
                return
            job.cancelled.set()
            for label, queue in self.queues.items():
                if job in queue and label not in job.active:
                    queue.remove(job)
            self._report_positions()
            finish = self._claim_finish(job)
            self._cond.notify_all()
        if finish:
            self._finish(job)

    def status(self) -> list[dict]:
        """Per device: label, index, name, uuid, queue_length (jobs running or waiting), busy, ready, restarts."""
        with self._cond:
            lengths = {label: len(queue) for label, queue in self.queues.items()}
            busy = {label: any(label in job.active for job in queue) for label, queue in self.queues.items()}
        out = []
        for label in self.labels:
            entry = self.workers[label].describe()
            entry.update(queue_length=lengths[label], busy=busy[label], ceiling_GBps=self.ceilings.get(label))
            out.append(entry)
        return out

    # -- inside the scheduler (lock held where noted) -------------------------------------------------------------

    def _load(self, label: str) -> tuple:
        """Sort key of the least busy device: one whose worker failed to start comes last, then fewer jobs, fewer
        cases left, lower index."""
        queue = self.queues[label]
        broken = self.workers[label].start_error is not None
        return (broken, len(queue), sum(len(job.pending) for job in queue), self.labels.index(label))

    def _report_positions(self) -> None:
        """(lock held) Tell every queued job its position, when it changed."""
        seen: set[int] = set()
        for queue in self.queues.values():
            for job in queue:
                if id(job) in seen:
                    continue
                seen.add(id(job))
                where = [(q.index(job), label) for label, q in self.queues.items() if job in q]
                position = min(where)
                if position != job._position:
                    job._position = position
                    line = {"type": "queued", "run_id": job.run_id, "position": position[0], "device": position[1]}
                    if job.split:
                        line["devices"] = [label for _, label in sorted(where)]
                    job.emit(line)

    def _claim_finish(self, job: Job) -> bool:
        """(lock held) True, once, when the job has nothing left that any device will do."""
        if job.finishing or job.active:
            return False
        queued = any(job in queue for queue in self.queues.values())
        if job.cancelled.is_set() or not job.pending or not queued:
            job.finishing = True
            return True
        return False

    def _dispatch(self, label: str, warm: bool) -> None:
        worker = self.workers[label]
        if warm:
            try:
                worker.ensure_ready()
            except (WorkerStartFailed, WorkerDied) as exc:
                log.warning("%s", exc)
        while True:
            with self._cond:
                while not self._stopping and not self.queues[label]:
                    self._cond.wait()
                if self._stopping:
                    return
                job = self.queues[label][0]
                if job.cancelled.is_set() or not job.pending:
                    self.queues[label].pop(0)
                    self._report_positions()
                    finish = self._claim_finish(job)
                    job = None if not finish else job
                else:
                    job.active.add(label)
                    finish = False
            if job is None:
                continue
            if finish:
                self._finish(job)
                continue
            try:
                self._run_on(label, worker, job)
            except Exception as exc:  # a bug here must not kill the device's thread
                log.exception("device %s failed on run %s", label, job.run_id)
                job.last_error = f"{label}: internal error: {type(exc).__name__}: {exc}"
            with self._cond:
                job.active.discard(label)
                if job in self.queues[label]:
                    self.queues[label].remove(job)
                self._report_positions()
                finish = self._claim_finish(job)
                self._cond.notify_all()
            if finish:
                self._finish(job)

    def _run_on(self, label: str, worker: DeviceWorker, job: Job) -> None:
        """Measure the job's cases on one device until none is left (or it is cancelled)."""
        if label not in job.headers and not self._header(label, worker, job):
            return
        while True:
            with self._cond:
                if job.cancelled.is_set() or self._stopping or not job.pending:
                    return
                case = job.pending.popleft()
            self._record_row(job, self._measure(label, worker, job, case))

    def _header(self, label: str, worker: DeviceWorker, job: Job) -> bool:
        sweep = dict(job.worker_sweep, device=torch_device_of(label))
        for attempt in (1, 2):
            try:
                header = worker.request("header", {"sweep": sweep, "run_id": job.run_id,
                                                   "implementations": job.implementations})
                break
            except WorkerDied as exc:
                job.last_error = f"{exc} while preparing the run (measuring the ceiling)"
                if self._stopping:
                    return False
                worker.restart()
            except (WorkerStartFailed, WorkerCommandFailed) as exc:
                job.last_error = f"{label}: could not prepare the run: {str(exc).splitlines()[0]}"
                return False
        else:
            return False
        header["sweep"] = dict(header.get("sweep") or {}, **{k: job.request.get(k) for k in ("split", "device")})
        self.ceilings[label] = header.get("ceiling_GBps")
        with self._cond:
            first = not job.headers
            job.headers[label] = header
        try:
            if first:
                self.store.begin_run(job.run_id, header)
                job.stored = True
            else:
                self.store.add_header(job.run_id, header)
        except Exception:
            log.exception("could not store the header of %s", job.run_id)
        job.emit({"type": "header", **header})
        return True

    def _measure(self, label: str, worker: DeviceWorker, job: Job, case: dict) -> dict:
        common = dict(job.worker_sweep)
        payload = {"case": case, "repetitions": common.get("repetitions", 100), "warmup": common.get("warmup", 10),
                   "timing": common.get("timing", "events"), "run_id": job.run_id,
                   "triton_interpreter": common.get("triton_interpreter", False)}
        started = time.time()
        try:
            return worker.request("case", payload, timeout=self.case_timeout_s)
        except WorkerDied as exc:
            how = worker.last_death or describe_exit(exc.exitcode)
            reason = f"worker for {label} died ({how}) while running {case_label(case)}"
            if not self._stopping:
                worker.restart()
                reason += "; restarted"
        except WorkerCommandFailed as exc:
            reason = f"{label}: the worker could not run {case_label(case)}: {exc}"
        except WorkerStartFailed as exc:
            reason = str(exc).splitlines()[0]
        job.last_error = reason
        return self._error_row(label, worker, job, case, reason, started)

    def _error_row(self, label: str, worker: DeviceWorker | None, job: Job, case: dict, reason: str,
                   started: float) -> dict:
        info = (worker.info if worker is not None else None) or {"name": label}
        row = {
            "run_id": job.run_id, **case, "status": "error", "reason": reason,
            "repetitions": 0, "bytes": _min_bytes(case), "mode": "cpu" if label.startswith("cpu") else "cuda",
            "device": tag_device({"index": info.get("index"), "name": info.get("name", label),
                                  "uuid": info.get("uuid")}, label),
            "launch": None, "started_at": started, "ended_at": time.time(),
        }
        from engine.models import ResultRow

        return ResultRow.model_validate(row).model_dump(mode="json")

    def _record_row(self, job: Job, row: dict) -> None:
        with self._cond:
            job.rows.append(row)
        if job.stored:
            try:
                self.store.add_row(job.run_id, row)
            except Exception:
                log.exception("could not store a row of %s", job.run_id)
        job.emit({"type": "row", **row})

    def _finish(self, job: Job) -> None:
        """Close the job: leftover cases (no device could take them) become error rows, the summary is stored
        and sent, and the run is marked complete or not."""
        with self._cond:
            leftovers = [] if job.cancelled.is_set() else list(job.pending)
            job.pending.clear()
            for queue in self.queues.values():
                if job in queue:
                    queue.remove(job)
            self._report_positions()
        for case in leftovers:
            label = job.devices[0] if job.devices else self.labels[0]
            reason = f"no device could run {case_label(case)}: {job.last_error or 'unknown reason'}"
            self._record_row(job, self._error_row(label, self.workers.get(label), job, case, reason, time.time()))
        complete = not job.cancelled.is_set() and len(job.rows) == len(job.cases) and not leftovers
        from engine.summary import summarize

        job.summary = {"run_id": job.run_id, **summarize(job.rows, complete=complete), "planned": len(job.cases),
                       "cancelled": job.cancelled.is_set(), "devices": list(job.headers)}
        if job.stored:
            try:
                self.store.finish_run(job.run_id, job.summary, complete)
            except Exception:
                log.exception("could not store the summary of %s", job.run_id)
        job.emit({"type": "summary", **job.summary})
        job.finished.set()
        with self._cond:
            self._live.discard(job.run_id)
            self._cond.notify_all()


def _min_bytes(case: dict) -> int:
    try:
        from engine.byte_model import min_bytes

        return min_bytes(case["pass"], case["M"], case["N"], case["dtype"])
    except Exception:
        return 0
