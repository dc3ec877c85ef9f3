"""The service's handle on one worker process (`app.worker_child`): start it, wait until it is ready, feed it a
run's cases one at a time with a time limit per case, and restart it when it died or hung.

A worker that dies mid-case (a kernel fault, ``os._exit``, the OOM killer) is noticed here (the pipe closes) and
reported as `WorkerDied`; one that does not answer a case within its limit is killed and reported the same way
(``did not answer within 8 s and was killed``). The next `begin` starts a fresh process, which reuses the
ceiling its predecessor measured, so no case ever pays for it.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any, Optional

from app.worker_child import worker_main
from app.worker_protocol import (
    EndRun,
    NextCase,
    Ready,
    RunEnded,
    RunFailed,
    StartFailed,
    StartRun,
    Stop,
    WorkerCommandFailed,
    WorkerDied,
    WorkerStartFailed,
    describe_exit,
    label_index,
    row_device,
)
from engine.models import Case, DeviceInfo, ResultRow, RowDevice, RunHeader, Sweep

STARTUP_TIMEOUT_S = 900.0
"""How long a worker may take to import torch, Triton and the registry and to measure the copy ceiling."""
POLL_S = 0.2
START_RETRY_S = 30.0
"""After a failed start, commands fail at once with the same reason for this long instead of starting again."""
END_TIMEOUT_S = 30.0


class WorkerHandle:
    """What every worker handle the scheduler drives keeps and reports, whatever runs the engine: a local process
    (`DeviceWorker`) or a Ray actor on a GPU of a cluster (`app.ray_worker.RayWorker`)."""

    def __init__(
        self, label: str, plugins: tuple[str, ...] = (), ceiling_bytes: int | None = None, self_check: bool = False
    ) -> None:
        self.label = label
        self.kind = label.partition(":")[0]
        self.index = label_index(label)
        self.plugins = tuple(plugins)
        self.ceiling_bytes = ceiling_bytes
        self.self_check = self_check
        self.known_ceiling: Any = None
        """The `Ceiling` the first worker process measured; a restarted one reuses it (no copy inside a case)."""
        self.self_check_result: dict | None = None
        self.info: DeviceInfo | None = None
        self.start_error: str | None = None
        self.restarts = 0
        self.last_death: str | None = None
        self._ready = False
        self._run_id: str | None = None
        self._failed_at = 0.0
        self._lock = threading.RLock()

    # -- a run: the protocol is the same for every handle, only the way a message travels differs ---------------

    def begin(self, sweep: Sweep, run_id: str, implementations: list[str]) -> RunHeader:
        """Start the engine's run in the worker (starting the worker first if needed); returns its header.
        Raises `WorkerDied`, `WorkerStartFailed` or `WorkerCommandFailed`."""
        with self._lock:
            self.ensure_ready()
            if self._run_id is not None:
                self.end()
            answer = self._start_run(sweep, run_id, list(implementations))
            if isinstance(answer, RunHeader):
                self._run_id = run_id
                return answer
            raise WorkerCommandFailed(answer.message if isinstance(answer, RunFailed) else repr(answer))

    def measure(self, case: Case, timeout: float | None = None) -> ResultRow:
        """The row of one case of the current run; after ``timeout`` seconds the worker is killed (`WorkerDied`)."""
        with self._lock:
            if self._run_id is None or not self.ready:
                raise WorkerCommandFailed("no run was begun in this worker")
            answer = self._next_case(case, timeout)
            if isinstance(answer, ResultRow):
                return answer
            self._run_id = None  # the engine's run ended with the failure
            raise WorkerCommandFailed(answer.message if isinstance(answer, RunFailed) else repr(answer))

    def end(self) -> None:
        """End the current run (the worker waits for the next one); quiet when there is none or the worker is gone."""
        with self._lock:
            if self._run_id is None:
                return
            self._run_id = None
            if not self.ready:
                return
            try:
                self._end_run()
            except WorkerDied:
                return

    def _greeted(self, message: Ready) -> DeviceInfo:
        """The worker said it is ready: its device, the ceiling it measured (kept for a restart), its self-check."""
        self.info = message.info
        self.known_ceiling = self.known_ceiling or message.ceiling
        self.self_check_result = self.self_check_result or message.self_check
        self._ready = True
        self.start_error = None
        return self.info


class DeviceWorker(WorkerHandle):
    """One worker process. Not thread-safe by design: one dispatcher thread drives it (a lock guards against
    misuse)."""

    def __init__(
        self, label: str, plugins: tuple[str, ...] = (), ceiling_bytes: int | None = None, self_check: bool = False
    ) -> None:
        super().__init__(label, plugins, ceiling_bytes, self_check)
        self._process = None
        self._conn = None
        self._context = multiprocessing.get_context("spawn")

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def ready(self) -> bool:
        return self._ready and self.alive

    def in_run(self, run_id: str) -> bool:
        """Whether this process is inside the engine's run of ``run_id`` (waiting for its next case)."""
        return self._run_id == run_id and self.ready

    def row_device(self) -> RowDevice:
        return row_device(self.info, self.label)

    def traits(self) -> dict:
        """What a request may name to choose this device: its model (the device's name, once known), this host."""
        import socket

        name = self.info.name if self.info is not None else None
        return {"model": name or self.kind, "models": [name] if name else [], "nodes": [socket.gethostname()]}

    def describe(self) -> dict:
        info = self.info
        return {
            "label": self.label,
            "index": info.index if info is not None and info.index is not None else self.index,
            "name": info.name if info is not None else self.label,
            "uuid": info.uuid if info is not None else None,
            "ready": self.ready,
            "pid": self.pid,
            "restarts": self.restarts,
            "error": self.start_error,
            "self_check": self.self_check_result,
        }

    # -- life cycle ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Spawn the process (returns at once; `ensure_ready` waits for it)."""
        with self._lock:
            if self.alive:
                return
            parent_conn, child_conn = self._context.Pipe(duplex=True)
            process = self._context.Process(
                target=worker_main,
                args=(
                    self.label,
                    child_conn,
                    self.plugins,
                    self.ceiling_bytes,
                    self.known_ceiling,
                    self.self_check and self.self_check_result is None,
                ),
                name=f"rmsnorm-worker-{self.label}",
                daemon=True,
            )
            process.start()
            child_conn.close()  # so that the child's death closes the pipe for us
            self._process, self._conn, self._ready, self._run_id = process, parent_conn, False, None

    def ensure_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> DeviceInfo:
        """Start the process if needed and wait for its hello; returns the device description."""
        with self._lock:
            if self.ready:
                return self.info
            if not self.alive and self.start_error and time.monotonic() - self._failed_at < START_RETRY_S:
                raise WorkerStartFailed(self.start_error)  # it just failed: do not pay the start-up again yet
            if not self.alive:
                self.start()
            message = self._receive(timeout)
            if isinstance(message, Ready):
                return self._greeted(message)
            text = message.traceback if isinstance(message, StartFailed) else f"unexpected answer {message!r}"
            self.start_error = f"worker for {self.label} could not start: {text.strip().splitlines()[-1]}"
            self._failed_at = time.monotonic()
            self._reap()
            raise WorkerStartFailed(self.start_error + "\n" + text)

    def restart(self) -> None:
        with self._lock:
            self.stop()
            self.restarts += 1
            self.start()

    def kill(self) -> None:
        """Kill the process now, without waiting for the command in progress (shutdown); lock-free on purpose."""
        process = self._process
        if process is not None:
            try:
                process.kill()
            except (ValueError, AttributeError, OSError):
                pass

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            if self._process is None:
                return
            if self.alive:
                self._send_quietly(Stop())
                self._process.join(timeout)
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(timeout)
            self._reap()

    # -- a run ---------------------------------------------------------------------------------------------------

    def _start_run(self, sweep: Sweep, run_id: str, implementations: list[str]):
        self._send(StartRun(sweep=sweep, run_id=run_id, implementations=implementations))
        return self._receive(None)

    def _next_case(self, case: Case, timeout: float | None):
        self._send(NextCase(case=case))
        return self._receive(timeout, what=f"did not answer within {timeout or 0:.0f} s and was killed")

    def _end_run(self) -> None:
        self._send(EndRun())
        answer = self._receive(END_TIMEOUT_S, what="did not end its run and was killed")
        if not isinstance(answer, RunEnded):
            self._send_quietly(Stop())

    # -- plumbing ------------------------------------------------------------------------------------------------

    def _send(self, message: object) -> None:
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError, AttributeError):
            raise self._died() from None

    def _send_quietly(self, message: object) -> None:
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError, AttributeError):
            pass

    def _receive(self, timeout: float | None, what: Optional[str] = None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                if self._conn.poll(POLL_S):
                    return self._conn.recv()
            except (EOFError, OSError):
                raise self._died() from None
            if not self._process.is_alive():
                try:  # the pipe may still hold its last words
                    if self._conn.poll(0):
                        return self._conn.recv()
                except (EOFError, OSError):
                    pass
                raise self._died()
            if deadline is not None and time.monotonic() > deadline:
                self._process.kill()
                self._process.join(5)
                raise self._died(what or f"did not answer within {timeout:.0f} s and was killed")

    def _died(self, how: str | None = None) -> WorkerDied:
        process = self._process
        if process is not None:
            process.join(5)
        exitcode = process.exitcode if process is not None else None
        self.last_death = how or describe_exit(exitcode)
        self._reap()
        return WorkerDied(self.label, exitcode)

    def _reap(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
        if self._process is not None:
            self._process.join(5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(5)
            try:
                self._process.close()
            except ValueError:
                pass
        self._process, self._conn, self._ready, self._run_id = None, None, False, None
