"""What the service and its worker processes say to each other over the pipe, and the worker labels.

Every message is a typed object, pickled as it is (dataclasses here; the engine's own pydantic models for the
sweep, the cases, the header and the rows): nothing is turned into a dict on the way.

    parent → child    StartRun(sweep, run_id, implementations), then NextCase(case) … EndRun(); Stop()
    child → parent    Ready(...) or StartFailed(traceback) once; per run: the RunHeader, one ResultRow per
                      NextCase, RunEnded() after EndRun; RunFailed(message) if the engine raised

The child runs the engine's `iter_run` with the cases the parent feeds it (`app.worker_child`), so after a
worker is killed (a hung case) the parent starts a new one and feeds it the cases that are left.

Labels: ``cuda:N`` is the GPU torch calls ``cuda:N`` (CUDA_VISIBLE_DEVICES applies); ``cpu:N`` is a fake device
that runs on the CPU (several of them let tests show the multi-device scheduling without GPUs). Rows and headers
are tagged with the label and, for fake CPU devices, the fake index.

This module imports no torch and no web framework.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, TypeVar

from engine.models import Case, DeviceInfo, ResultRow, RowDevice, RunHeader, Sweep


@dataclasses.dataclass(frozen=True)
class Ready:
    info: DeviceInfo
    """The device, tagged with the label."""
    pid: int
    ceiling: Any = None
    """The `engine.ceiling.Ceiling` measured while getting ready (None: could not be measured)."""
    self_check: Optional[dict] = None


@dataclasses.dataclass(frozen=True)
class StartFailed:
    traceback: str


@dataclasses.dataclass(frozen=True)
class StartRun:
    sweep: Sweep
    run_id: str
    implementations: list[str]


@dataclasses.dataclass(frozen=True)
class NextCase:
    case: Case


@dataclasses.dataclass(frozen=True)
class EndRun:
    pass


@dataclasses.dataclass(frozen=True)
class RunEnded:
    pass


@dataclasses.dataclass(frozen=True)
class RunFailed:
    message: str


@dataclasses.dataclass(frozen=True)
class Stop:
    pass


class WorkerDied(Exception):
    """The worker process ended while it was busy with a command."""

    def __init__(self, label: str, exitcode: int | None) -> None:
        self.label = label
        self.exitcode = exitcode
        super().__init__(f"worker for {label} died ({describe_exit(exitcode)})")


class WorkerStartFailed(Exception):
    """The worker process could not get ready (import error, no such device, …)."""


class WorkerCommandFailed(Exception):
    """The worker is alive but the engine raised (reported as the message)."""


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


Tagged = TypeVar("Tagged", RunHeader, ResultRow)


def tagged(item: Tagged, label: str) -> Tagged:
    """A header or row whose ``device`` carries the worker label (`tag_device`)."""
    device = type(item.device).model_validate(tag_device(item.device.model_dump(), label))
    return item.model_copy(update={"device": device})


def row_device(info: DeviceInfo | None, label: str) -> RowDevice:
    """The ``device`` of a row the parent writes itself (an error row): the worker's, else just the label."""
    base = {"index": info.index, "name": info.name, "uuid": info.uuid} if info is not None else {"name": label}
    return RowDevice.model_validate(tag_device(base, label))
