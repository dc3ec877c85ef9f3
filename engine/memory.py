"""Will a case fit? The memory estimate that is checked BEFORE anything of the case is allocated.

Held for the whole case:
- per rotating set: x (M·N·s); the backward adds dy (M·N·s), the graph's output y (M·N·s) and what the
  forward saved for the backward (rstd for fused kernels — those whose registry entry says ``fused``;
  an allowance of 2·M·N·4 fp32 intermediates for the others, whose autograd saves up-cast copies);
- shared: γ, and the L2 flush buffer when one is used.
Transient, per call: the outputs (two live at once: the new one and the previous), the fp32 dγ partials
(the ``partial_bytes`` its launch declares through its dγ family, `rmsnorm_kernels.families`) and an allowance of 3·M·N·4 for the fp32 temporaries an unfused implementation makes.

The budget is the free device memory (``torch.cuda.mem_get_info`` plus the caching allocator's unused
blocks) × 0.9 on a GPU, and ``MemAvailable`` × 0.5 on CPU (the machine is shared with everything else).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rmsnorm_kernels.families import partial_bytes

GPU_SAFETY = 0.9
CPU_SAFETY = 0.5
FIXED_OVERHEAD = 64 << 20


@dataclass(frozen=True)
class Footprint:
    per_set: int
    shared: int
    transient: int

    def total(self, sets: int) -> int:
        return self.shared + self.transient + sets * self.per_set + FIXED_OVERHEAD


def footprint(pass_: str, M: int, N: int, elem: int, fused: bool, launch: Optional[dict]) -> Footprint:
    """``fused``: the implementation's autograd saves only rstd (no fp32 copies, no unfused temporaries);
    ``launch``: its ``launch()`` dict (``partial_bytes``, or ``partial_rows``), or None."""
    if not isinstance(fused, bool):
        raise TypeError(f"fused must be a bool (the implementation's `fused`), got {fused!r}")
    mn = M * N
    saved = M * 4 if fused else 2 * mn * 4 + M * 4
    temporaries = 0 if fused else 3 * mn * 4
    partials = partial_bytes(launch, N)
    if pass_ == "fwd":
        per_set = mn * elem
        transient = 2 * (mn * elem + M * 4) + temporaries
    else:
        per_set = 3 * mn * elem + saved
        transient = 2 * (mn * elem + N * elem) + partials + temporaries
    return Footprint(per_set=per_set, shared=N * 4 * 2, transient=transient)


def budget(free_bytes: int, device_type: str) -> int:
    return int(free_bytes * (GPU_SAFETY if device_type == "cuda" else CPU_SAFETY))


def fit_sets(fp: Footprint, wanted_sets: int, budget_bytes: int, flush_bytes: int = 0) -> int:
    """How many rotating sets fit (≤ ``wanted_sets``); 0 when not even one does."""
    room = budget_bytes - flush_bytes - fp.total(0)
    if room < fp.per_set:
        return 0
    return max(1, min(wanted_sets, room // max(fp.per_set, 1)))


def human(nbytes: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{int(nbytes)} B"
