"""Poisoned outputs: inside ``poisoned_outputs()`` every output and scratch buffer the Triton
implementations allocate starts as NaN, so an element a kernel fails to write stays NaN and fails every
comparison (a zero-filled or recycled buffer could pass by luck). `poison_allocator` does the same,
best effort, for implementations that allocate through PyTorch: it fills and frees a block of the CUDA
caching allocator, which the next allocations reuse."""

from __future__ import annotations

import contextlib

import torch

from rmsnorm_kernels.launch_record import note_output

_depth = 0
_listeners: list = []


def add_listener(fn) -> None:
    """``fn(depth)`` is called whenever the poisoning depth changes (the native node keeps its own copy)."""
    _listeners.append(fn)


def _set_depth(depth: int) -> None:
    global _depth
    _depth = depth
    for fn in _listeners:
        fn(depth)


@contextlib.contextmanager
def poisoned_outputs():
    _set_depth(_depth + 1)
    try:
        yield
    finally:
        _set_depth(_depth - 1)


def poisoning() -> bool:
    return _depth > 0


def new_output(shape, dtype: torch.dtype, device) -> torch.Tensor:
    """``torch.empty``, or a NaN-filled tensor while poisoning."""
    if _depth:
        out = torch.full(shape, float("nan"), dtype=dtype, device=device)
    else:
        out = torch.empty(shape, dtype=dtype, device=device)
    note_output(out, False)
    return out


def new_zeros(shape, dtype: torch.dtype, device, *, kept: bool = False) -> torch.Tensor:
    """A zero-filled output or accumulator (never poisoned: the kernel adds into it). ``kept``: an accumulator the
    call's kernels leave zero again when they are done, so a launch plan may keep it for its stream's next call."""
    out = torch.zeros(shape, dtype=dtype, device=device)
    note_output(out, "kept" if kept else True)
    return out


def poison_allocator(device, nbytes: int) -> None:
    """Leave ``nbytes`` of NaN in the CUDA caching allocator's free blocks (no-op on CPU, whose allocator
    returns large blocks to the system)."""
    device = torch.device(device)
    if device.type != "cuda" or nbytes <= 0:
        return
    block = torch.full((nbytes // 4 + 1,), float("nan"), dtype=torch.float32, device=device)
    del block
