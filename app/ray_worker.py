"""The service's handle on one GPU of a Ray cluster: the second implementation of the worker handle the scheduler
drives (`app.worker_handle.DeviceWorker` is the first, a local process). Same methods, same errors:
``ensure_ready``, ``begin`` (the header), ``measure(case, timeout)`` (the row), ``end``, ``restart``, ``kill``,
``stop``, ``describe``; `WorkerDied` when the actor or its node went away (or a case outran its time limit and the
actor was killed), `WorkerStartFailed` when it could not get ready, `WorkerCommandFailed` when the engine raised.

The actor (`app.ray_actor.GpuActor`) is created on demand with ``num_gpus=1`` on its slot's node (a hard node
affinity: the slot *is* a GPU of that node) and named ``rmsnorm-<label>``, so the dashboard's actors are easy to
find in Ray's own tools. A restarted actor on the same node reuses the ceiling its predecessor measured.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from app.worker_protocol import (
    Ready,
    StartFailed,
    WorkerCommandFailed,
    WorkerDied,
    WorkerStartFailed,
    tag_device,
)
from app.worker_handle import START_RETRY_S, STARTUP_TIMEOUT_S, WorkerHandle
from engine.models import Case, DeviceInfo, RowDevice, Sweep

NAMESPACE = "rmsnorm-dashboard"
"""The Ray namespace of the dashboard's actors (their names are ``rmsnorm-<label>``)."""
POLL_S = 1.0
"""How often a wait for an actor looks whether its node is still in the cluster."""
END_TIMEOUT_S = 30.0


def actor_name(label: str) -> str:
    return f"rmsnorm-{label}"


class RayWorker(WorkerHandle):
    """One GPU slot of the fleet (`app.fleet.Slot`) and the actor that measures on it. One dispatcher thread
    drives it; ``kill`` may come from another (shutdown)."""

    def __init__(
        self,
        label: str,
        slot,
        fleet,
        plugins: tuple[str, ...] = (),
        ceiling_bytes: int | None = None,
        self_check: bool = False,
    ) -> None:
        super().__init__(label, plugins, ceiling_bytes, self_check)
        self.slot = slot
        self.fleet = fleet
        self._actor = None

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._actor is not None

    @property
    def ready(self) -> bool:
        return self._ready and self._actor is not None

    def in_run(self, run_id: str) -> bool:
        return self._run_id == run_id and self.ready

    def traits(self) -> dict:
        """What a request may name to choose this GPU: its model, its node."""
        name = self.info.name if self.info is not None else None
        models = [m for m in (self.slot.model, name) if m]
        return {"model": models[0] if models else "GPU", "models": models, "nodes": self.slot.names()}

    def row_device(self) -> RowDevice:
        info = self.info
        base = (
            {"index": info.index, "name": info.name, "uuid": info.uuid}
            if info is not None
            else {"name": f"{self.slot.model or 'GPU'} on {self.slot.host}"}
        )
        base = tag_device(base, self.label)
        base["host"] = self.slot.host
        return RowDevice.model_validate(base)

    def describe(self) -> dict:
        info = self.info
        return {
            "label": self.label,
            "index": info.index if info is not None and info.index is not None else None,
            "name": info.name if info is not None else (self.slot.model or "GPU"),
            "uuid": info.uuid if info is not None else None,
            "ready": self.ready,
            "pid": None,
            "restarts": self.restarts,
            "error": self.start_error,
            "self_check": self.self_check_result,
            "node": self.slot.node_id,
            "host": self.slot.host,
            "model": self.slot.model,
            "kind": info.kind if info is not None else None,
        }

    # -- life cycle ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Create the actor (returns at once; `ensure_ready` waits for it)."""
        with self._lock:
            if self._actor is not None:
                return
            self._actor = self.fleet.create_actor(
                self.label,
                self.slot,
                self.plugins,
                self.ceiling_bytes,
                self.known_ceiling,
                self.self_check and self.self_check_result is None,
            )
            self._ready, self._run_id = False, None

    def ensure_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> DeviceInfo:
        with self._lock:
            if self.ready:
                return self.info
            if self._actor is None and self.start_error and time.monotonic() - self._failed_at < START_RETRY_S:
                raise WorkerStartFailed(self.start_error)
            if not self.fleet.node_alive(self.slot.node_id):
                self._start_failed(f"node {self.slot.host} ({self.slot.node_id[:12]}) is not in the Ray cluster")
            self.start()
            try:
                hello = self._wait(self._actor.ready.remote(), timeout, starting=True)
            except WorkerDied as exc:
                self._start_failed(f"its Ray actor died while starting ({self.last_death or exc})")
            if isinstance(hello, Ready):
                return self._greeted(hello)
            text = hello.traceback if isinstance(hello, StartFailed) else f"unexpected answer {hello!r}"
            self._start_failed(text.strip().splitlines()[-1], detail=text)

    def _start_failed(self, why: str, detail: str = ""):
        self.start_error = f"worker for {self.label} could not start: {why}"
        self._failed_at = time.monotonic()
        self._drop()
        raise WorkerStartFailed(self.start_error + ("\n" + detail if detail else ""))

    def restart(self) -> None:
        with self._lock:
            self.stop()
            self.restarts += 1
            if self.fleet.node_alive(self.slot.node_id):
                self.start()

    def kill(self) -> None:
        """Kill the actor now (shutdown, or a case past its time limit); lock-free on purpose."""
        actor = self._actor
        if actor is not None:
            self.fleet.kill_actor(actor)

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            self.kill()
            self._drop()

    # -- a run ---------------------------------------------------------------------------------------------------

    # begin / measure: `WorkerHandle`'s, over these two calls on the actor

    def _start_run(self, sweep: Sweep, run_id: str, implementations: list[str]):
        return self._wait(self._actor.begin.remote(sweep, run_id, implementations), None)

    def _next_case(self, case: Case, timeout: float | None):
        return self._wait(
            self._actor.measure.remote(case), timeout, what=f"did not answer within {timeout or 0:.0f} s and was killed"
        )

    def _end_run(self) -> None:
        self._wait(self._actor.end.remote(), END_TIMEOUT_S, what="did not end its run and was killed")

    # -- plumbing ------------------------------------------------------------------------------------------------

    def _wait(self, ref, timeout: float | None, what: Optional[str] = None, starting: bool = False) -> Any:
        """The answer of one actor call. Its node leaving, the actor dying, or the time limit passing (the actor
        is then killed) raise `WorkerDied`; polling lets a node's departure be seen even before Ray declares
        the actor dead."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
            done, _ = ray.wait([ref], timeout=wait)
            if done:
                try:
                    return ray.get(ref)
                except RayActorError as exc:
                    raise self._died(_first_line(exc)) from None
                except RayTaskError as exc:  # raised inside a method: the actor is alive
                    if starting:
                        return StartFailed(str(exc))
                    raise WorkerCommandFailed(_first_line(exc)) from None
                except GetTimeoutError:
                    continue
            if not self.fleet.node_alive(self.slot.node_id):
                raise self._died(f"node {self.slot.host} left the Ray cluster")
            if deadline is not None and time.monotonic() >= deadline:
                self.kill()
                raise self._died(what or f"did not answer within {timeout:.0f} s and was killed")

    def _died(self, how: str) -> WorkerDied:
        self.last_death = how
        self._drop()
        error = WorkerDied(self.label, None)
        error.args = (f"worker for {self.label} died ({how})",)
        return error

    def _drop(self) -> None:
        self._actor, self._ready, self._run_id = None, False, None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return line[:300]
    return type(exc).__name__
