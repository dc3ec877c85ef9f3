"""The recorder half of `rmsnorm_kernels.launch_plans`: while a call is being recorded, the allocations of
`rmsnorm_kernels.poison` and the launches of `rmsnorm_kernels.fast_launch` note themselves here. Imports only torch, so the
allocation and launch modules can report to it without importing the plans."""

from __future__ import annotations

import torch

_recorders: list = []


class Slot(int):
    """Marks a launch argument that is the call's tensor number ``int(self)`` (inputs first, then outputs)."""


class Recorder:
    __slots__ = ("slots", "outputs", "launches", "complete", "alive")

    def __init__(self, inputs):
        self.alive = list(inputs)  # held until the recording ends, so no tensor's id is reused meanwhile
        self.slots = {id(t): i for i, t in enumerate(inputs)}
        self.outputs: list = []
        self.launches: list = []
        self.complete = True

    def tensor_slot(self, t):
        return self.slots.get(id(t))


def push(rec: Recorder) -> None:
    _recorders.append(rec)


def pop() -> None:
    _recorders.pop()


def recorder():
    """The recorder of the call being recorded, or None (the common case: one list lookup)."""
    return _recorders[-1] if _recorders else None


def note_output(t: torch.Tensor, zero) -> None:
    """An output of the call: ``zero`` False (uninitialised), True (zero-filled) or "kept" (zero-filled, and left
    zero by the call's kernels: a plan may keep it as scratch)."""
    rec = recorder()
    if rec is not None:
        rec.slots[id(t)] = len(rec.slots)
        rec.alive.append(t)
        rec.outputs.append((tuple(t.shape), t.dtype, zero))


def note_launch(compiled, grid, args, tail) -> None:
    """A direct-launchable kernel launch (`rmsnorm_kernels.fast_launch`): its compiled kernel, grid, positional args
    and the constexpr / option tail its launcher takes after them."""
    rec = recorder()
    if rec is None:
        return
    template = []
    for a in args:
        if isinstance(a, torch.Tensor):
            slot = rec.tensor_slot(a)
            if slot is None:  # a tensor this call neither got nor allocated through `poison`: not replayable
                rec.complete = False
                return
            template.append(Slot(slot))
        else:
            template.append(a)
    rec.launches.append((compiled, grid, tuple(template), tuple(tail)))


def note_unrecordable() -> None:
    """Something in the call cannot be replayed (an autotuner run, a launch through Triton's full path)."""
    rec = recorder()
    if rec is not None:
        rec.complete = False
