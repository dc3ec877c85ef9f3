"""Launch plans: one call of a forward or backward, recorded once and replayed.

Everything the host does on a call that depends only on the inputs' shapes, strides, dtypes, device and
pointer alignment — validation, the dispatch by width, the autotuner's choice, grids, segment constants,
output sizes, Triton's specialization key — gives the same answer on every later call with the same key.
So the first complete call of a key is *recorded*: each output allocated through `rmsnorm_kernels.poison` and each
kernel launched through `rmsnorm_kernels.fast_launch` is noted, with every tensor argument mapped to a slot (an
input of the call or one of its outputs) and every other argument kept as the constant it was. Later calls
with the same key *replay* the record: allocate the outputs (NaN-filled while poisoning, as the first call
would), call each compiled kernel's launcher with the new tensors, return the outputs. Nothing is chosen
twice; the host cost left is the allocations and one launcher call per kernel. Scratch (a buffer the call fills
and reads itself, such as the dγ partials, or an output its caller drops) is not allocated again: a replay reuses
the one kept for its stream (`_SCRATCH`), except under graph capture or while poisoning.

A call is not recorded (and runs the full path again next time) when something in it was not noted — the
autotuner benchmarking its configs, a launch that could not go direct, an allocation made by PyTorch — so a
replay can never skip work the first call did. Plans are off under Triton's interpreter, with
``RMSNORM_FAST_LAUNCH=0`` and while a Triton launch hook is installed (profilers read the metadata that the
full path builds); misaligned pointers (Triton specializes on 16-byte alignment) take the full path.
"""

from __future__ import annotations

import torch

from rmsnorm_kernels import poison
from rmsnorm_kernels.fast_launch import enabled, hooks_installed, launcher
from rmsnorm_kernels.launch_record import Recorder, Slot, push, pop

STATS = {"recorded": 0, "replayed": 0, "incomplete": 0}
GIVE_UP_AFTER = 3
"""Incomplete recordings of one key after which it stays on the full path (never cached)."""
ENABLED = enabled()
"""Plans are on in this process (off under the interpreter and with ``RMSNORM_FAST_LAUNCH=0``)."""
CALLS_TO_A_REPLAY = 4
"""Calls of one key until one takes the steady-state path when plans are on: the first may run the autotuner
(not recorded), the next is recorded, the third replays (and hands its plans to the native node,
`rmsnorm_kernels.native`), the fourth runs in the native node where it is loaded. The engine's correctness checks
make this many calls on a GPU."""


def calls_to_a_replay(device: torch.device) -> int:
    """How many calls on ``device`` reach the path a training loop takes from then on (1 where plans are off)."""
    return CALLS_TO_A_REPLAY if device.type == "cuda" else 1


def _capturing() -> bool:
    """Whether the current CUDA stream is being captured into a graph (a captured call allocates its scratch afresh).
    Asks only once CUDA is initialised (a replay's inputs are CUDA tensors, so it is); never at import, where
    asking the driver would keep a later ``fork`` from using CUDA."""
    return torch.cuda.is_initialized() and torch._C._cuda_isCurrentStreamCapturing()


SCRATCH_ENTRIES = 8
_SCRATCH: dict = {}
"""Scratch buffers of replays (outputs a call fills and reads itself, or a caller discards), kept for the next
replay on the same stream: (stream, device, output number, shape, dtype, kind) → tensor, at most `SCRATCH_ENTRIES`
(the oldest dropped first). Kernels on one stream run in order, so a buffer is never in use twice at once; a
call on another stream, under graph capture or while poisoning gets its own."""

EMPTY, ZEROS, SCRATCH, ZERO_SCRATCH = 0, 1, 2, 3
"""Output kinds: allocated empty, zero-filled, kept scratch, kept scratch that starts zero and that the call's
kernels leave zero (the atomic backward's accumulator, zeroed by its drain kernel; `poison.new_zeros(kept=True)`)."""


def _scratch(key, shape, dtype, device, zero: bool = False) -> torch.Tensor:
    t = _SCRATCH.get(key)
    if t is None:
        if len(_SCRATCH) >= SCRATCH_ENTRIES:
            del _SCRATCH[next(iter(_SCRATCH))]
        t = _SCRATCH[key] = (torch.zeros if zero else torch.empty)(shape, dtype=dtype, device=device)
    return t


def _kind(zero, returned: bool) -> int:
    if zero == "kept" and not returned:
        return ZERO_SCRATCH
    if zero:
        return ZEROS
    return EMPTY if returned else SCRATCH


def clear_scratch() -> None:
    _SCRATCH.clear()


class Plan:
    __slots__ = ("returned", "outputs", "launches", "device", "index", "n_inputs")

    def __init__(self, rec: Recorder, returned: list, device: torch.device, n_inputs: int = 0):
        self.n_inputs = n_inputs
        self.returned = tuple(returned)
        self.device = device
        self.index = device.index
        kept = {s for s in returned if s is not None}
        self.outputs = tuple(
            (shape, dtype, _kind(zero, n_inputs + j in kept)) for j, (shape, dtype, zero) in enumerate(rec.outputs)
        )
        launches = []
        for compiled, grid, template, tail in rec.launches:
            g = tuple(grid) + (1, 1)
            slots = tuple((i, int(a)) for i, a in enumerate(template) if isinstance(a, Slot))
            launches.append((compiled, launcher(compiled), g[0], g[1], g[2], list(template), slots, tail))
        self.launches = tuple(launches)

    def run(self, inputs: tuple) -> list:
        values = list(inputs)
        device = self.device
        stream = torch._C._cuda_getCurrentRawStream(self.index)
        if poison._depth or _capturing():
            for shape, dtype, kind in self.outputs:
                values.append(
                    torch.zeros(shape, dtype=dtype, device=device)
                    if kind in (ZEROS, ZERO_SCRATCH)
                    else poison.new_output(shape, dtype, device)
                )
        else:
            for j, (shape, dtype, kind) in enumerate(self.outputs):
                if kind == EMPTY:
                    values.append(torch.empty(shape, dtype=dtype, device=device))
                elif kind == ZEROS:
                    values.append(torch.zeros(shape, dtype=dtype, device=device))
                else:
                    # the kind is in the key: a buffer that must start zero is never one another plan scribbled on
                    values.append(
                        _scratch(
                            (stream, self.index, j, shape, dtype, kind), shape, dtype, device, kind == ZERO_SCRATCH
                        )
                    )
        for _, run, g0, g1, g2, args, slots, tail in self.launches:
            args = args.copy()
            for i, slot in slots:
                args[i] = values[slot]
            run(g0, g1, g2, stream, *args, *tail)
        STATS["replayed"] += 1
        return tuple(None if s is None else values[s] for s in self.returned)


class PlanCache:
    """Plans of one entry point, by key. ``call(key, inputs, full, *extra)``: replay the key's plan, or run
    ``full(*inputs, *extra)`` (the complete host path; ``extra``: non-tensor arguments the key fixes) while
    recording it. ``full`` returns a tuple of tensors it
    allocated (scratch buffers it does not return are allocated and launched on in the replay too).
    ``discard``: positions of ``full``'s result the callers never use; a replay writes them into a kept scratch
    buffer and returns None there."""

    __slots__ = ("plans", "misses", "discard")

    def __init__(self, discard: tuple = ()):
        self.plans: dict = {}
        self.misses: dict = {}
        self.discard = frozenset(discard)

    def call(self, key, inputs: tuple, full, *extra):
        plan = self.plans.get(key)
        if plan and not hooks_installed():
            return plan.run(inputs)
        if plan is False or hooks_installed():
            return full(*inputs, *extra)
        rec = Recorder(inputs)
        push(rec)
        try:
            outputs = full(*inputs, *extra)
        finally:
            pop()
        returned = [rec.tensor_slot(t) if isinstance(t, torch.Tensor) else None for t in outputs]
        if rec.complete and rec.launches and all(s is not None and s >= len(inputs) for s in returned):
            returned = [None if i in self.discard else s for i, s in enumerate(returned)]
            self.plans[key] = Plan(rec, returned, inputs[0].device, len(inputs))
            STATS["recorded"] += 1
        else:
            STATS["incomplete"] += 1
            self.misses[key] = self.misses.get(key, 0) + 1
            if self.misses[key] >= GIVE_UP_AFTER:
                self.plans[key] = False
        return outputs

    def clear(self) -> None:
        self.plans.clear()
        self.misses.clear()
        clear_scratch()
