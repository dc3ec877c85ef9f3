"""One benchmark worker process per device.

Each worker is a `multiprocessing` *spawn* child that owns one engine `DeviceBench` (so the copy ceiling is
measured once per device) and measures one case at a time: the parent sends a command over a pipe and waits
for the answer, so timings on one device never overlap. The child loads the implementation registry itself
(`kernels.registry.load_all`, which reads ``RMSNORM_PLUGINS``), so a plugin reaches every worker.

A worker that dies mid-case (a kernel fault, ``os._exit``, the OOM killer) is noticed by the parent (the pipe
closes), reported for the case it was running — ``worker for cpu:1 died (exit code 3) while running …;
restarted`` — and started again before its next command.

Labels: ``cuda:N`` is the GPU torch calls ``cuda:N`` (CUDA_VISIBLE_DEVICES applies); ``cpu:N`` is a fake device
that runs on the CPU (several of them let tests show the multi-device scheduling without GPUs). Rows and headers
are tagged with the label and, for fake CPU devices, the fake index.

This module imports no web framework: the child process imports it to run `worker_main`.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import traceback
from typing import Any

STARTUP_TIMEOUT_S = 900.0
"""How long a worker may take to import torch, Triton and the registry (and to compile nothing yet)."""
POLL_S = 0.2
START_RETRY_S = 30.0
"""After a failed start, commands fail at once with the same reason for this long instead of starting again."""


class WorkerDied(Exception):
    """The worker process ended while it was busy with a command."""

    def __init__(self, label: str, exitcode: int | None) -> None:
        self.label = label
        self.exitcode = exitcode
        super().__init__(f"worker for {label} died ({describe_exit(exitcode)})")


class WorkerStartFailed(Exception):
    """The worker process could not get ready (import error, no such device, …)."""


class WorkerCommandFailed(Exception):
    """The worker is alive but the command raised (reported as the message)."""


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "exit code unknown"
    if exitcode < 0:
        import signal

        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = ", perhaps the out-of-memory killer" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}"
    return f"exit code {exitcode}"


def torch_device_of(label: str) -> str:
    """The device string the engine gets for a worker label: ``cpu:2`` → ``cpu``, ``cuda:1`` → ``cuda:1``."""
    kind, _, _ = label.partition(":")
    return "cpu" if kind == "cpu" else label


def label_index(label: str) -> int:
    return int(label.partition(":")[2] or 0)


def _dump(value: Any) -> Any:
    """A JSON-ready dict from a pydantic model (by alias) or a mapping."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def tag_device(device: dict | None, label: str) -> dict:
    """Mark a row's or header's ``device`` with the worker label; a fake CPU device also gets its own index and
    uuid, so that rows from ``cpu:0`` and ``cpu:1`` fall into different lanes."""
    device = dict(device or {})
    device["label"] = label
    if label.startswith("cpu:"):
        index = label_index(label)
        device["index"] = index
        device["uuid"] = f"cpu-{index}"
    return device


# -- the child -----------------------------------------------------------------------------------------------


def worker_main(label: str, conn, plugins: tuple[str, ...], ceiling_bytes: int | None,
                known_ceiling: dict | None = None, self_check: bool = False) -> None:
    """Entry point of the worker process: get ready, then answer commands until told to stop or orphaned.

    Getting ready includes the copy ceiling (``known_ceiling``, the one a previous worker of this device measured,
    is reused), so that start-up work is paid in the start-up budget, never inside a case's time limit; and, with
    ``self_check``, one small Triton case through the engine (`self_check_case`)."""
    torch_device = torch_device_of(label)
    try:
        if torch_device == "cpu":
            # Triton kernels can only run interpreted on the CPU; this must precede the first triton import.
            os.environ.setdefault("TRITON_INTERPRET", "1")
        else:
            from engine.device import use_triton_interpreter_without_gpu

            use_triton_interpreter_without_gpu()
        from kernels.registry import load_all

        load_all(extra_paths=plugins)
        from engine.runner import DeviceBench

        if torch_device.startswith("cuda"):
            import torch

            # this process's default GPU is its own, so nothing it runs touches (or makes a context on) another one
            torch.cuda.set_device(torch.device(torch_device))
        bench = DeviceBench(device=torch_device, ceiling_bytes=ceiling_bytes)
        info = tag_device(_dump(bench.info), label)
        if known_ceiling:
            from engine.ceiling import Ceiling

            bench.adopt_ceiling(Ceiling(**known_ceiling))
        ceiling = bench.ceiling()
        ceiling_dict = None if ceiling is None else {"GBps": ceiling.GBps, "method": ceiling.method,
                                                     "nbytes": ceiling.nbytes, "median_us": ceiling.median_us}
        checked = self_check_case(bench) if self_check else None
    except BaseException:
        conn.send(("failed", traceback.format_exc(limit=8)))
        return
    conn.send(("ready", {"info": info, "pid": os.getpid(), "ceiling": ceiling_dict, "self_check": checked}))
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return  # the service went away
        if kind == "stop":
            return
        try:
            result = _answer(bench, label, kind, payload)
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        else:
            conn.send(("ok", result))


def _answer(bench, label: str, kind: str, payload: dict) -> dict:
    from engine.models import Case, Sweep

    if kind == "header":
        sweep = Sweep.model_validate(payload["sweep"])
        header = _dump(bench.header(sweep, payload["run_id"], payload["implementations"]))
        header["device"] = tag_device(header.get("device"), label)
        return header
    if kind == "case":
        case = Case.model_validate(payload["case"])
        row = _dump(
            bench.run_case(
                case,
                repetitions=payload["repetitions"],
                warmup=payload["warmup"],
                timing=payload["timing"],
                run_id=payload["run_id"],
                triton_interpreter=payload.get("triton_interpreter", False),
            )
        )
        row["device"] = tag_device(row.get("device"), label)
        return row
    if kind == "ping":
        return {"pid": os.getpid()}
    raise ValueError(f"unknown worker command {kind!r}")


def self_check_case(bench) -> dict:
    """One small Triton forward case through the engine (compile, launch, time): ``{"ok", "detail", versions}``.
    On a GPU it proves the image's torch, Triton and driver work together; it is what /api/health reports."""
    from engine.device import versions
    from engine.runner import runs_triton
    from engine.models import Case

    found = versions()
    triton_impls = [impl for impl in bench.registry if runs_triton(impl) and "fwd" in impl.passes
                    and impl.unavailable_reason() is None]
    if bench.device.type != "cuda":
        return {"ok": False, "detail": "no GPU: this worker runs on the CPU", "versions": found}
    if not triton_impls:
        return {"ok": False, "detail": "no Triton implementation is available here", "versions": found}
    wanted = dict(part.split("=", 1) for part in os.environ.get("RMSNORM_EXPECT_VERSIONS", "").split(",") if "=" in part)
    off = [f"{name} {found.get(name)} (expected {want})" for name, want in wanted.items()
           if not str(found.get(name) or "").startswith(want.strip())]
    if off:
        return {"ok": False, "detail": "versions differ from the measured stack: " + ", ".join(off), "versions": found}
    impl = triton_impls[0].name
    try:
        row = bench.run_case(Case(impl=impl, pass_="fwd", dtype="float32", M=64, N=1024), repetitions=3, warmup=1)
    except Exception as exc:
        return {"ok": False, "detail": f"{impl}: {type(exc).__name__}: {exc}"[:500], "versions": found}
    ok = row.status == "ok"
    detail = f"{impl} fwd float32 64x1024: {row.status}" + (f" ({row.reason})" if row.reason else "")
    return {"ok": ok, "detail": detail[:500], "versions": found}


# -- the parent's handle on one worker ------------------------------------------------------------------------


class DeviceWorker:
    """The service's handle on one worker process. Not thread-safe by design: one dispatcher thread drives it
    (a lock guards against misuse)."""

    def __init__(self, label: str, plugins: tuple[str, ...] = (), ceiling_bytes: int | None = None,
                 self_check: bool = False) -> None:
        self.label = label
        self.kind = label.partition(":")[0]
        self.index = label_index(label)
        self.plugins = tuple(plugins)
        self.ceiling_bytes = ceiling_bytes
        self.self_check = self_check
        self.known_ceiling: dict | None = None
        """The ceiling the first worker process measured; a restarted one reuses it (no copy inside a case)."""
        self.self_check_result: dict | None = None
        self.info: dict | None = None
        self.start_error: str | None = None
        self.restarts = 0
        self.last_death: str | None = None
        self._process = None
        self._conn = None
        self._ready = False
        self._failed_at = 0.0
        self._lock = threading.RLock()
        self._context = multiprocessing.get_context("spawn")

    # state

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def ready(self) -> bool:
        return self._ready and self.alive

    def describe(self) -> dict:
        info = self.info or {}
        return {
            "label": self.label,
            "index": info.get("index", self.index),
            "name": info.get("name", self.label),
            "uuid": info.get("uuid"),
            "ready": self.ready,
            "pid": self.pid,
            "restarts": self.restarts,
            "error": self.start_error,
            "self_check": self.self_check_result,
        }

    # life cycle

    def start(self) -> None:
        """Spawn the process (returns at once; `ensure_ready` waits for it)."""
        with self._lock:
            if self.alive:
                return
            parent_conn, child_conn = self._context.Pipe(duplex=True)
            process = self._context.Process(
                target=worker_main,
                args=(self.label, child_conn, self.plugins, self.ceiling_bytes, self.known_ceiling,
                      self.self_check and self.self_check_result is None),
                name=f"rmsnorm-worker-{self.label}",
                daemon=True,
            )
            process.start()
            child_conn.close()  # so that the child's death closes the pipe for us
            self._process, self._conn, self._ready = process, parent_conn, False

    def ensure_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> dict:
        """Start the process if needed and wait for its hello; returns the device description."""
        with self._lock:
            if self.ready:
                return self.info or {}
            if not self.alive and self.start_error and time.monotonic() - self._failed_at < START_RETRY_S:
                raise WorkerStartFailed(self.start_error)  # it just failed: do not pay the start-up again yet
            if not self.alive:
                self.start()
            message = self._receive(timeout)
            if message[0] == "ready":
                self.info = message[1]["info"]
                self.known_ceiling = self.known_ceiling or message[1].get("ceiling")
                self.self_check_result = self.self_check_result or message[1].get("self_check")
                self._ready = True
                self.start_error = None
                return self.info
            self.start_error = f"worker for {self.label} could not start: {message[1].strip().splitlines()[-1]}"
            self._failed_at = time.monotonic()
            self._reap()
            raise WorkerStartFailed(self.start_error + "\n" + message[1])

    def request(self, kind: str, payload: dict, timeout: float | None = None) -> dict:
        """Send one command and wait for its answer. Raises `WorkerDied` (the process is reaped; the next
        command starts a fresh one), `WorkerCommandFailed` or `WorkerStartFailed`."""
        with self._lock:
            self.ensure_ready()
            try:
                self._conn.send((kind, payload))
            except (BrokenPipeError, OSError):
                raise self._died() from None
            status, result = self._receive(timeout)
            if status == "ok":
                return result
            raise WorkerCommandFailed(result)

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
                try:
                    self._conn.send(("stop", {}))
                except (BrokenPipeError, OSError):
                    pass
                self._process.join(timeout)
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(timeout)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(timeout)
            self._reap()

    # plumbing

    def _receive(self, timeout: float | None) -> tuple[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                if self._conn.poll(POLL_S):
                    return self._conn.recv()
            except (EOFError, OSError):
                raise self._died() from None
            if not self._process.is_alive():
                # the pipe may still hold its last words
                try:
                    if self._conn.poll(0):
                        return self._conn.recv()
                except (EOFError, OSError):
                    pass
                raise self._died()
            if deadline is not None and time.monotonic() > deadline:
                self._process.kill()
                self._process.join(5)
                raise self._died(f"did not answer within {timeout:.0f} s and was killed")

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
        self._process, self._conn, self._ready = None, None, False
