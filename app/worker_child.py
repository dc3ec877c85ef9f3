"""The worker process: one per device, a `multiprocessing` *spawn* child that owns one engine `DeviceBench`
(so the copy ceiling is measured once per device) and runs sweeps through the engine's own `iter_run`, the
same path the CLI takes, with the cases fed one at a time by the parent over the pipe (`app.worker_protocol`).

Getting ready loads the registry with the service's plug-ins (`engine.catalog.prepare_process`) and measures
the copy ceiling (or adopts the one a previous worker of this device measured), so that start-up work is paid
in the start-up budget, never inside a case's time limit; with ``self_check``, one small Triton case runs too.

This module imports no web framework: the child process imports it to run `worker_main`.
"""

from __future__ import annotations

import os
import traceback
from typing import Any, Iterator, Optional

from app.worker_protocol import (
    NextCase,
    Ready,
    RunEnded,
    RunFailed,
    StartFailed,
    StartRun,
    Stop,
    tag_device,
    tagged,
    torch_device_of,
)


def worker_main(
    label: str,
    conn,
    plugins: tuple[str, ...],
    ceiling_bytes: int | None,
    known_ceiling: Any = None,
    self_check: bool = False,
) -> None:
    """Entry point of the worker process: get ready, then run what the parent asks until told to stop or
    orphaned."""
    try:
        bench = get_ready(label, plugins, ceiling_bytes, known_ceiling)
        ready = Ready(
            info=_tagged_info(bench, label),
            pid=os.getpid(),
            ceiling=bench.ceiling(),
            self_check=self_check_case(bench) if self_check else None,
        )
    except BaseException:
        conn.send(StartFailed(traceback.format_exc(limit=8)))
        return
    conn.send(ready)
    while True:
        message = _receive(conn)
        if message is None or isinstance(message, Stop):
            return
        if isinstance(message, StartRun) and not run(bench, label, conn, message):
            return
        # anything else (the EndRun of a run that failed) needs no answer


def get_ready(label: str, plugins: tuple[str, ...], ceiling_bytes: int | None, known_ceiling: Any):
    """The `DeviceBench` of a worker (a process here, a Ray actor in `app.ray_actor`): registry, device, ceiling."""
    from engine.catalog import prepare_process

    torch_device = torch_device_of(label)
    # Triton kernels can only run interpreted on the CPU: this precedes the first triton import.
    registry = prepare_process(plugins, interpreter_on_cpu=torch_device == "cpu")
    from engine.runner import DeviceBench

    if torch_device.startswith("cuda"):
        import torch

        # this process's default GPU is its own, so nothing it runs touches (or makes a context on) another one
        torch.cuda.set_device(torch.device(torch_device))
    bench = DeviceBench(device=torch_device, ceiling_bytes=ceiling_bytes, registry=registry)
    if known_ceiling is not None:
        bench.adopt_ceiling(known_ceiling)
    bench.ceiling()  # now, inside the start-up budget
    return bench


def _tagged_info(bench, label: str):
    from engine.models import DeviceInfo

    return DeviceInfo.model_validate(tag_device(bench.info.model_dump(), label))


def _receive(conn) -> Optional[object]:
    """The parent's next message; None when the parent went away."""
    try:
        return conn.recv()
    except (EOFError, OSError, KeyboardInterrupt):
        return None


def run(bench, label: str, conn, start: StartRun) -> bool:
    """One run through `engine.runner.iter_run`: the header, then one row per `NextCase` until `EndRun`.
    Returns False when the parent went away (or said stop) meanwhile."""
    from engine.runner import iter_run

    parent_gone = False

    def cases() -> Iterator:
        nonlocal parent_gone
        while True:
            message = _receive(conn)
            if isinstance(message, NextCase):
                yield message.case
                continue
            parent_gone = message is None or isinstance(message, Stop)
            return

    try:
        for item in iter_run(
            start.sweep,
            device=torch_device_of(label),
            run_id=start.run_id,
            bench=bench,
            registry=bench.registry,
            cases=cases(),
            implementations=start.implementations,
        ):
            conn.send(tagged(item, label))
    except (BrokenPipeError, OSError):
        return False
    except Exception as exc:  # the engine never raises for a kernel's failure; this is anything else
        conn.send(RunFailed(f"{type(exc).__name__}: {exc}"))
        return True
    if parent_gone:
        return False
    conn.send(RunEnded())
    return True


def self_check_case(bench) -> dict:
    """One small Triton forward case through the engine (compile, launch, time): ``{"ok", "detail", versions}``.
    On a GPU it proves the image's torch, Triton and driver work together; it is what /api/health reports."""
    from engine.device import versions
    from engine.models import Case

    found = versions()
    triton_impls = [
        impl
        for impl in bench.registry
        if impl.uses_triton and "fwd" in impl.passes and impl.unavailable_reason() is None
    ]
    if bench.device.type != "cuda":
        return {"ok": False, "detail": "no GPU: this worker runs on the CPU", "versions": found}
    if not triton_impls:
        return {"ok": False, "detail": "no Triton implementation is available here", "versions": found}
    wanted = dict(
        part.split("=", 1) for part in os.environ.get("RMSNORM_EXPECT_VERSIONS", "").split(",") if "=" in part
    )
    off = [
        f"{name} {found.get(name)} (expected {want})"
        for name, want in wanted.items()
        if not str(found.get(name) or "").startswith(want.strip())
    ]
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
