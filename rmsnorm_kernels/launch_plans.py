"""Launch plans: one call of a forward or backward, recorded once and replayed.

Everything the host does on a call that depends only on the inputs' shapes, strides, dtypes, device and
pointer alignment — validation, the dispatch by width, the autotuner's choice, grids, segment constants,
output sizes, Triton's specialization key — gives the same answer on every later call with the same key.
So the first complete call of a key is *recorded*: each output allocated through `rmsnorm_kernels.poison` and each
kernel launched through `rmsnorm_kernels.fast_launch` is noted, with every tensor argument mapped to a slot (an
input of the call or one of its outputs) and every other argument kept as the constant it was. Later calls
with the same key *replay* the record: allocate the outputs (NaN-filled while poisoning, as the first call
would), call each compiled kernel's launcher with the new tensors, return the outputs. Nothing is chosen
twice; the host cost left is the allocations and one launcher call per kernel.

A call is not recorded (and runs the full path again next time) when something in it was not noted — the
autotuner benchmarking its configs, a launch that could not go direct, an allocation made by PyTorch — so a
replay can never skip work the first call did. Plans are off under Triton's interpreter, with
``RMSNORM_FAST_LAUNCH=0`` and while a Triton launch hook is installed (profilers read the metadata that the
full path builds); misaligned pointers (Triton specializes on 16-byte alignment) take the full path.
"""

from __future__ import annotations

import torch

from rmsnorm_kernels import poison
from rmsnorm_kernels.fast_launch import enabled, hooks_installed
from rmsnorm_kernels.launch_record import Recorder, Slot, push, pop

STATS = {"recorded": 0, "replayed": 0, "incomplete": 0}
GIVE_UP_AFTER = 3
"""Incomplete recordings of one key after which it stays on the full path (never cached)."""
ENABLED = enabled()
"""Plans are on in this process (off under the interpreter and with ``RMSNORM_FAST_LAUNCH=0``)."""
CALLS_TO_A_REPLAY = 3
"""Calls of one key until one is a replay when plans are on: the first may run the autotuner (not recorded),
the next is recorded, the third replays. The engine's correctness checks make this many calls on a GPU."""


def calls_to_a_replay(device: torch.device) -> int:
    """How many calls on ``device`` reach the path a training loop takes from then on (1 where plans are off)."""
    return CALLS_TO_A_REPLAY if device.type == "cuda" else 1


class Plan:
    __slots__ = ("returned", "outputs", "launches", "device", "index")

    def __init__(self, rec: Recorder, returned: list, device: torch.device):
        self.returned = tuple(returned)
        self.outputs = tuple(rec.outputs)
        self.device = device
        self.index = device.index
        launches = []
        for compiled, grid, template, tail in rec.launches:
            g = tuple(grid) + (1, 1)
            slots = tuple((i, int(a)) for i, a in enumerate(template) if isinstance(a, Slot))
            launches.append((compiled, g[0], g[1], g[2], list(template), slots, tail))
        self.launches = tuple(launches)

    def run(self, inputs: tuple) -> list:
        values = list(inputs)
        device = self.device
        for shape, dtype, zero in self.outputs:
            values.append(torch.zeros(shape, dtype=dtype, device=device) if zero
                          else poison.new_output(shape, dtype, device))
        stream = torch._C._cuda_getCurrentRawStream(self.index)
        for compiled, g0, g1, g2, args, slots, tail in self.launches:
            args = args.copy()
            for i, slot in slots:
                args[i] = values[slot]
            compiled.run(g0, g1, g2, stream, compiled.function, compiled.packed_metadata, None, None, None,
                         *args, *tail)
        STATS["replayed"] += 1
        return tuple(values[s] for s in self.returned)


class PlanCache:
    """Plans of one entry point, by key. ``call(key, inputs, full, *extra)``: replay the key's plan, or run
    ``full(*inputs, *extra)`` (the complete host path; ``extra``: non-tensor arguments the key fixes) while
    recording it. ``full`` returns a tuple of tensors it
    allocated (scratch buffers it does not return are allocated and launched on in the replay too)."""

    __slots__ = ("plans", "misses")

    def __init__(self):
        self.plans: dict = {}
        self.misses: dict = {}

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
            self.plans[key] = Plan(rec, returned, inputs[0].device)
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
