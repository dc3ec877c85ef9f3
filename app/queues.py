"""Jobs and the per-device queues: who is where, who runs next, one job at a time per device.

- A job is one `POST /benchmark`: its validated request and engine `Sweep`, its planned cases, and a listener
  that receives the stream lines (``queued``, ``header``, ``row``, ``summary``; docs/ARCHITECTURE.md).
- Each device has a queue: the job at its head runs (position 0), the others wait and are told their position
  whenever it changes.
- A job goes to the device it pins (``cuda:3``, ``cpu:1``), or to the least busy device of the requested kind, GPU
  model (``H100``: any device whose model or name contains it) or node (``node``: a host name, address or node id).
  A *split* job is queued on every device: each device, when the job reaches its head, takes the next
  unmeasured case, so the cases go to whichever worker is free.

`DeviceQueues` only keeps the books, under its condition variable; `app.dispatch` drives the devices.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Callable, Iterable, Optional

from app.schemas import BenchmarkRequest
from engine.models import Case, ResultRow, RunHeader, Sweep

log = logging.getLogger("rmsnorm.jobs")

Listener = Callable[[dict], None]


class QueueFull(Exception):
    """No device the request may use has room in its queue (answered 429)."""


class UnknownDevice(ValueError):
    """The request names a device this service has no worker for (answered 422)."""

    field = "device"


class UnknownNode(UnknownDevice):
    """The request names a node none of this service's devices is on (answered 422 naming ``node``)."""

    field = "node"


Traits = Callable[[str], dict]
"""A device label → ``{"model": key, "models": [names it answers to], "nodes": [names of its node]}``."""


def case_label(case: Case) -> str:
    return f"{case.impl} {case.pass_} {case.dtype} M={case.M} N={case.N}"


class Job:
    """One benchmark request on its way through the queues."""

    def __init__(
        self, run_id: str, request: BenchmarkRequest, sweep: Sweep, cases: list[Case], listener: Listener | None = None
    ) -> None:
        self.run_id = run_id
        self.request = request
        """The request as the client sent it (validated); its ``device`` and ``split`` go into the header."""
        self.sweep = sweep
        """The engine `Sweep` every worker runs (validated once, at the edge)."""
        self.cases = cases
        self.split = request.split
        self.pending: deque[Case] = deque(cases)
        self.implementations = list(dict.fromkeys(case.impl for case in cases))
        self.devices: list[str] = []
        self.active: set[str] = set()
        self.headers: dict[str, RunHeader] = {}
        self.rows: list[ResultRow] = []
        self.cancelled = threading.Event()
        self.finished = threading.Event()
        self.finishing = False
        self.stored = False
        self.summary: dict | None = None
        self.last_error: str | None = None
        self.position: tuple[int, str] | None = None
        self.group: dict | None = None
        """``fleet: each-model``: ``{"group_id", "linked_runs", "model"}`` (one run per GPU model, linked)."""
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
        headers = [header.model_dump(mode="json") for header in self.headers.values()]
        document = {
            "run": headers[0] if headers else None,
            "rows": [row.model_dump(mode="json") for row in self.rows],
            "summary": self.summary,
        }
        if len(headers) > 1:
            document["headers"] = headers
        return document


class DeviceQueues:
    """One queue per device label, behind one condition variable (``cond``). Methods marked *(lock held)* expect
    the caller to hold it."""

    def __init__(self, labels: Iterable[str], max_queue: int) -> None:
        self.labels = list(labels)
        if not self.labels:
            raise ValueError("the scheduler needs at least one device")
        self.max_queue = max_queue
        self.queues: dict[str, list[Job]] = {label: [] for label in self.labels}
        self.cond = threading.Condition()
        self.live: set[str] = set()
        """Run ids queued or being measured (their runs may not be deleted yet)."""

    def devices_for(self, device: str | None, node: str | None = None, traits: Traits | None = None) -> list[str]:
        """The labels a request may use: ``auto``/None → all; ``cpu``/``cuda`` → those of that kind; a label → it;
        anything else → the devices whose GPU model or name contains it (``H100``); then only those on ``node``."""
        spec = (device or "auto").strip().lower()
        if spec == "auto":
            found = list(self.labels)
        elif spec in ("cpu", "cuda"):
            found = [label for label in self.labels if label.startswith(spec + ":")]
        elif spec in self.labels or traits is None:
            found = [label for label in self.labels if label == spec]
        else:
            found = [label for label in self.labels if any(spec in name.lower() for name in traits(label)["models"])]
        if not found:
            models = sorted({traits(label)["model"] for label in self.labels}) if traits is not None else []
            raise UnknownDevice(
                f"no worker for device {device!r}; this service has: {', '.join(self.labels)}"
                + (f" (models: {', '.join(models)})" if models else "")
            )
        if node:
            wanted = node.strip().lower()
            on_node = [
                label
                for label in found
                if traits is not None and any(wanted == name.lower() for name in traits(label)["nodes"])
            ]
            if not on_node:
                nodes = sorted({n for label in self.labels for n in (traits(label)["nodes"][:1] if traits else [])})
                raise UnknownNode(f"no device for {device!r} on node {node!r}; the nodes are: {', '.join(nodes)}")
            found = on_node
        return found

    def by_model(self, labels: list[str], traits: Traits) -> dict[str, list[str]]:
        """The labels grouped by GPU model, in the order each model first appears (``fleet: each-model``)."""
        groups: dict[str, list[str]] = {}
        for label in labels:
            groups.setdefault(traits(label)["model"], []).append(label)
        return groups

    def admit(self, job: Job, candidates: list[str], broken: Callable[[str], bool]) -> None:
        """(lock held) Queue the job on the least busy candidate (every one, when split); raises `QueueFull`."""
        roomy = [label for label in candidates if len(self.queues[label]) <= self.max_queue]
        if not roomy:
            waiting = {label: max(len(self.queues[label]) - 1, 0) for label in candidates}
            raise QueueFull(
                "queue full: "
                + ", ".join(f"{label} has {n} job(s) waiting" for label, n in waiting.items())
                + f" (at most {self.max_queue} may wait per device); try again later"
            )
        chosen = roomy if job.split else [min(roomy, key=lambda label: self._load(label, broken(label)))]
        job.devices = chosen
        self.live.add(job.run_id)
        for label in chosen:
            self.queues[label].append(job)
        self.report_positions()
        self.cond.notify_all()

    def _load(self, label: str, broken: bool) -> tuple:
        """Sort key of the least busy device: one whose worker failed to start comes last, then fewer jobs, fewer
        cases left, lower index."""
        queue = self.queues[label]
        return (broken, len(queue), sum(len(job.pending) for job in queue), self.labels.index(label))

    def withdraw(self, job: Job, keep_active: bool = True) -> None:
        """(lock held) Take the job out of the queues (not those of devices measuring it, with ``keep_active``)."""
        for label, queue in self.queues.items():
            if job in queue and not (keep_active and label in job.active):
                queue.remove(job)
        self.report_positions()

    def report_positions(self) -> None:
        """(lock held) Tell every queued job its position, when it changed."""
        seen: set[int] = set()
        for queue in self.queues.values():
            for job in queue:
                if id(job) in seen:
                    continue
                seen.add(id(job))
                where = [(q.index(job), label) for label, q in self.queues.items() if job in q]
                position = min(where)
                if position != job.position:
                    job.position = position
                    line = {"type": "queued", "run_id": job.run_id, "position": position[0], "device": position[1]}
                    if job.split:
                        line["devices"] = [label for _, label in sorted(where)]
                    job.emit(line)

    def claim_finish(self, job: Job) -> bool:
        """(lock held) True, once, when the job has nothing left that any device will do."""
        if job.finishing or job.active:
            return False
        queued = any(job in queue for queue in self.queues.values())
        if job.cancelled.is_set() or not job.pending or not queued:
            job.finishing = True
            return True
        return False

    def next_job(self, label: str, stopping: Callable[[], bool]) -> tuple[Optional[Job], bool]:
        """Wait for the head of ``label``'s queue: ``(job, False)`` to run it (marked active), ``(job, True)`` to
        finish it (dropped, nothing left), ``(None, False)`` when a dropped job needs nothing or on stop."""
        with self.cond:
            while not stopping() and not self.queues[label]:
                self.cond.wait()
            if stopping():
                return None, False
            job = self.queues[label][0]
            if job.cancelled.is_set() or not job.pending:
                self.queues[label].pop(0)
                self.report_positions()
                return (job, True) if self.claim_finish(job) else (None, False)
            job.active.add(label)
            return job, False

    def release(self, label: str, job: Job) -> bool:
        """After a device is done with the job: off its queue; True when the job is now to be finished."""
        with self.cond:
            job.active.discard(label)
            if job in self.queues[label]:
                self.queues[label].remove(job)
            self.report_positions()
            finish = self.claim_finish(job)
            self.cond.notify_all()
        return finish

    def lengths(self) -> tuple[dict[str, int], dict[str, bool]]:
        with self.cond:
            return (
                {label: len(queue) for label, queue in self.queues.items()},
                {label: any(label in job.active for job in queue) for label, queue in self.queues.items()},
            )
