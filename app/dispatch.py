"""The scheduler: one dispatcher thread per device drives that device's worker through the job at the head of
its queue (`app.queues`); the worker runs the engine's `iter_run` (`app.worker_child`), this side adds only the
queueing, the stream, the store and the time limits.

- Per job and device: `DeviceWorker.begin` (the worker's header, with its ceiling), then the job's cases, one
  at a time, each under ``case_timeout_s``; a split job's cases go to whichever device takes them first.
- A worker that dies or hangs mid-case is restarted; that case becomes an error row (`engine.runner.error_row`)
  and the run goes on in the new worker with the cases that are left. A device that cannot take up a split run
  again (its worker will not start, its node left the fleet) leaves the cases left to the other devices.
- The workers are local processes (`app.worker_handle.DeviceWorker`) or, with a Ray address, one actor per GPU
  of the cluster (`app.ray_worker.RayWorker`, made by `app.fleet.RayFleet`): the same handle, driven the same way.
- ``fleet: each-model`` is one job per GPU model among the devices the request may use, linked by a group id.
- Cancel (the client went away) drops the cases not yet started; the case being measured finishes and is kept;
  the partial run stays in the store marked incomplete.

Every row is written to the store as soon as it arrives, so nothing measured is lost, whoever listens.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Iterable, Optional

from app.queues import DeviceQueues, Job, Listener, QueueFull, case_label
from app.schemas import BenchmarkRequest
from app.store import Store
from app.worker_handle import DeviceWorker
from app.worker_protocol import WorkerCommandFailed, WorkerDied, WorkerStartFailed, describe_exit
from engine.models import Case, ResultRow, RunHeader, Sweep
from engine.runner import error_row, new_run_id
from engine.summary import summarize

log = logging.getLogger("rmsnorm.jobs")


class Scheduler:
    def __init__(
        self,
        labels: Iterable[str],
        store: Store,
        max_queue: int,
        plugins: tuple[str, ...] = (),
        ceiling_bytes: int | None = None,
        worker_factory=DeviceWorker,
        case_timeout_s: float | None = None,
        self_check: bool = False,
    ) -> None:
        self.books = DeviceQueues(labels, max_queue)
        self.labels = self.books.labels
        self.case_timeout_s = case_timeout_s
        """A case unanswered after this long: its worker is killed and restarted, the case is an error row."""
        self.store = store
        self.workers: dict[str, DeviceWorker] = {
            label: worker_factory(label, plugins=plugins, ceiling_bytes=ceiling_bytes, self_check=self_check)
            for label in self.labels
        }
        self._cond = self.books.cond
        self._threads: dict[str, threading.Thread] = {}
        self._stopping = False
        self.ceilings: dict[str, float | None] = {}

    # -- life cycle -----------------------------------------------------------------------------------------------

    def start(self, warm: bool = True) -> None:
        """Start one dispatcher thread per device (idempotent); ``warm`` also starts the worker processes now."""
        with self._cond:
            if self._threads or self._stopping:
                return
            for label in self.labels:
                thread = threading.Thread(
                    target=self._dispatch, args=(label, warm), name=f"dispatch-{label}", daemon=True
                )
                self._threads[label] = thread
                thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel every job (their partial runs are kept, incomplete), stop the workers, join the threads."""
        with self._cond:
            self._stopping = True
            jobs = {id(job): job for queue in self.books.queues.values() for job in queue}
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
            return run_id in self.books.live

    # -- requests -------------------------------------------------------------------------------------------------

    def traits(self, label: str) -> dict:
        """What a request may name to choose this device: its GPU model, its node (`app.queues.Traits`); a worker
        handle that does not say is known by its label alone."""
        traits = getattr(self.workers[label], "traits", None)
        return traits() if traits is not None else {"model": label.partition(":")[0], "models": [], "nodes": []}

    def candidates(self, request: BenchmarkRequest) -> list[str]:
        """The devices a request may use (raises `UnknownDevice` / `UnknownNode`)."""
        return self.books.devices_for(request.device, getattr(request, "node", None), self.traits)

    def submit(
        self,
        request: BenchmarkRequest,
        sweep: Sweep,
        cases: list[Case],
        listener: Listener | None = None,
        run_id: str | None = None,
    ) -> Job:
        """Queue a job (raises `UnknownDevice`, `QueueFull`). Its first ``queued`` line is emitted before return."""
        return self.submit_group(request, sweep, cases, listener, run_id, each_model=False)[0]

    def submit_group(
        self,
        request: BenchmarkRequest,
        sweep: Sweep,
        cases: list[Case],
        listener: Listener | None = None,
        run_id: str | None = None,
        each_model: bool = True,
    ) -> list[Job]:
        """Queue one job, or with ``each_model`` one per GPU model among the request's devices (linked: each header
        carries the ``group_id`` and every run id of the group). All are queued or none (`QueueFull`)."""
        candidates = self.candidates(request)
        groups = self.books.by_model(candidates, self.traits) if each_model else {None: candidates}
        jobs = [
            (
                Job(run_id if len(groups) == 1 and run_id else new_run_id(), request, sweep, list(cases), listener),
                labels,
            )
            for labels in groups.values()
        ]
        if each_model:
            group_id = "group-" + new_run_id()
            linked = [job.run_id for job, _ in jobs]
            for (job, _), model in zip(jobs, groups):
                job.group = {"group_id": group_id, "linked_runs": linked, "gpu_model": model}
        if not self._threads:
            self.start(warm=False)
        with self._cond:
            if self._stopping:
                raise QueueFull("the service is shutting down")
            admitted: list[Job] = []
            try:
                for job, labels in jobs:
                    self.books.admit(job, labels, broken=lambda label: self.workers[label].start_error is not None)
                    admitted.append(job)
            except QueueFull:
                for job in admitted:  # all or none: a group half queued would be a comparison half made
                    job.cancelled.set()
                    self.books.withdraw(job, keep_active=False)
                    self.books.live.discard(job.run_id)
                raise
        return [job for job, _ in jobs]

    def cancel(self, job: Job) -> None:
        """Drop the job's unstarted cases; it finishes (incomplete) once its in-flight case is back."""
        with self._cond:
            if job.finished.is_set() or job.finishing:
                return
            job.cancelled.set()
            self.books.withdraw(job)
            finish = self.books.claim_finish(job)
            self._cond.notify_all()
        if finish:
            self._finish(job)

    def status(self) -> list[dict]:
        """Per device: label, index, name, uuid, queue_length (jobs running or waiting), busy, ready, restarts."""
        lengths, busy = self.books.lengths()
        out = []
        for label in self.labels:
            entry = self.workers[label].describe()
            entry.update(queue_length=lengths[label], busy=busy[label], ceiling_GBps=self.ceilings.get(label))
            out.append(entry)
        return out

    def gpu_sm_count(self) -> Optional[int]:
        """The SM count the first GPU worker reported, if any did."""
        return next(
            (
                w.info.sm_count
                for w in self.workers.values()
                if w.info is not None and w.info.kind == "cuda" and w.info.sm_count
            ),
            None,
        )

    # -- one device's thread --------------------------------------------------------------------------------------

    def _dispatch(self, label: str, warm: bool) -> None:
        worker = self.workers[label]
        if warm:
            try:
                worker.ensure_ready()
            except (WorkerStartFailed, WorkerDied) as exc:
                log.warning("%s", exc)
        while True:
            job, finish = self.books.next_job(label, lambda: self._stopping)
            if job is None:
                if self._stopping:
                    return
                continue
            if finish:
                self._finish(job)
                continue
            try:
                self._run_on(label, worker, job)
            except Exception as exc:  # a bug here must not kill the device's thread
                log.exception("device %s failed on run %s", label, job.run_id)
                job.last_error = f"{label}: internal error: {type(exc).__name__}: {exc}"
            if self.books.release(label, job):
                self._finish(job)

    def _run_on(self, label: str, worker: DeviceWorker, job: Job) -> None:
        """Measure the job's cases on one device until none is left (or it is cancelled)."""
        if label not in job.headers and not self._begin(label, worker, job):
            return
        try:
            while True:
                if (
                    not worker.in_run(job.run_id)
                    and self._others_on(job, label)
                    and not self._begin(label, worker, job)
                ):
                    return  # this device cannot take the run up again: the others measure the cases left
                with self._cond:
                    if job.cancelled.is_set() or self._stopping or not job.pending:
                        return
                    case = job.pending.popleft()
                self._record_row(job, self._measure(label, worker, job, case))
        finally:
            worker.end()

    def _others_on(self, job: Job, label: str) -> bool:
        """Whether another device is measuring the job, or has it queued (a split job)."""
        with self._cond:
            return any(
                other != label and (other in job.active or job in self.books.queues[other]) for other in job.devices
            )

    def _begin(self, label: str, worker: DeviceWorker, job: Job) -> bool:
        """The engine's run begun in the worker (again, after a restart); its first header is recorded."""
        for attempt in (1, 2):
            try:
                header = worker.begin(job.sweep, job.run_id, job.implementations)
                break
            except WorkerDied as exc:
                job.last_error = f"{exc} while preparing the run"
                if self._stopping:
                    return False
                worker.restart()
            except (WorkerStartFailed, WorkerCommandFailed) as exc:
                job.last_error = f"{label}: could not prepare the run: {str(exc).splitlines()[0]}"
                return False
        else:
            return False
        if label not in job.headers:
            self._record_header(label, job, header)
        return True

    def _measure(self, label: str, worker: DeviceWorker, job: Job, case: Case) -> ResultRow:
        started = time.time()
        if not worker.in_run(job.run_id) and not self._begin(label, worker, job):
            reason = job.last_error or f"{label}: could not prepare the run"
        else:
            try:
                return worker.measure(case, timeout=self.case_timeout_s)
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
        return error_row(case, reason, job.run_id, worker.row_device(), mode=_mode(label), started_at=started)

    # -- the stream and the store ---------------------------------------------------------------------------------

    def _record_header(self, label: str, job: Job, header: RunHeader) -> None:
        placement = {"split": job.request.split, "device": job.request.device}
        for field in ("node", "fleet"):
            if getattr(job.request, field, None) is not None:
                placement[field] = getattr(job.request, field)
        header = header.model_copy(update={"sweep": {**header.sweep, **placement}, **(job.group or {})})
        self.ceilings[label] = header.ceiling_GBps
        with self._cond:
            first = not job.headers
            job.headers[label] = header
        line = header.model_dump(mode="json")
        try:
            if first:
                self.store.begin_run(job.run_id, line)
                job.stored = True
            else:
                self.store.add_header(job.run_id, line)
        except Exception:
            log.exception("could not store the header of %s", job.run_id)
        job.emit({"type": "header", **line})

    def _record_row(self, job: Job, row: ResultRow) -> None:
        with self._cond:
            job.rows.append(row)
        line = row.model_dump(mode="json")
        if job.stored:
            try:
                self.store.add_row(job.run_id, line)
            except Exception:
                log.exception("could not store a row of %s", job.run_id)
        job.emit({"type": "row", **line})

    def _finish(self, job: Job) -> None:
        """Close the job: leftover cases (no device could take them) become error rows, the summary is stored
        and sent, and the run is marked complete or not."""
        with self._cond:
            leftovers = [] if job.cancelled.is_set() else list(job.pending)
            job.pending.clear()
            self.books.withdraw(job, keep_active=False)
        label = job.devices[0] if job.devices else self.labels[0]
        for case in leftovers:
            reason = f"no device could run {case_label(case)}: {job.last_error or 'unknown reason'}"
            self._record_row(
                job, error_row(case, reason, job.run_id, self.workers[label].row_device(), mode=_mode(label))
            )
        complete = not job.cancelled.is_set() and len(job.rows) == len(job.cases) and not leftovers
        job.summary = {
            "run_id": job.run_id,
            **summarize(job.rows, complete=complete, baseline=job.sweep.baseline),
            "planned": len(job.cases),
            "cancelled": job.cancelled.is_set(),
            "devices": list(job.headers),
        }
        if job.stored:
            try:
                self.store.finish_run(job.run_id, job.summary, complete)
            except Exception:
                log.exception("could not store the summary of %s", job.run_id)
        job.emit({"type": "summary", **job.summary})
        job.finished.set()
        with self._cond:
            self.books.live.discard(job.run_id)
            self._cond.notify_all()


def _mode(label: str) -> str:
    return "cpu" if label.startswith("cpu") else "cuda"
