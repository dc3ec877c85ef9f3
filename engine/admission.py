"""Whether a case may run here, and with how many rotating input sets: decided BEFORE anything of the case
is allocated (the reasons become ``skipped`` rows; see engine.runner)."""

from __future__ import annotations

import os
from typing import Optional

from engine import memory
from engine.timing import needs_flush, rotating_sets
from rmsnorm_kernels.registry import Implementation

ENGINE_DTYPES = ("bfloat16", "float16", "float32")


def refusal(
    impl: Implementation,
    pass_: str,
    dtype: str,
    cpu: bool,
    timing: str,
    triton_interpreter: bool,
    M: Optional[int] = None,
    N: Optional[int] = None,
) -> Optional[str]:
    """Why this implementation cannot run this pass here, at [M, N] when given (None when it can)."""
    if pass_ not in impl.passes:
        return f"{impl.name} does not provide the {pass_} pass (it provides {', '.join(impl.passes)})"
    reason = impl.unavailable_reason()
    if reason:
        return f"{impl.name} is not available here: {reason}"
    if dtype not in ENGINE_DTYPES:
        return f"dtype {dtype!r} is not supported by the engine"
    if M is not None and N is not None:
        shape = impl.shape_refusal(M, N, dtype)
        if shape:
            return f"{impl.name} does not take this shape: {shape}"
    if cpu and impl.uses_triton:
        if not triton_interpreter:
            return (
                "Triton kernel on CPU: runs only under the Triton interpreter; ask for it with "
                "triton_interpreter: true (CLI: --interpreter); its timings are interpreter timings"
            )
        if os.environ.get("TRITON_INTERPRET") != "1":
            return (
                "Triton interpreter asked for, but TRITON_INTERPRET=1 was not set before Triton was imported "
                "in this process (set it in the environment, or start through rmsnorm-dash)"
            )
    if timing == "cuda-graph" and cpu:
        return "cuda-graph timing needs a CUDA device"
    return None


def size_sets(
    fp: memory.Footprint, set_bytes: int, l2_bytes: int, repetitions: int, warmup: int, budget: int
) -> tuple[int, int]:
    """(rotating sets, L2 flush buffer bytes) that fit ``budget``; sets 0 when not even one fits."""
    # more sets than timed + warm-up repetitions would never be used
    wanted = min(rotating_sets(set_bytes, l2_bytes), max(1, repetitions + max(warmup, 1)))
    sets = memory.fit_sets(fp, wanted, budget)
    flush_bytes = 0
    if sets and needs_flush(sets, set_bytes, l2_bytes):
        with_flush = memory.fit_sets(fp, wanted, budget, 2 * l2_bytes)
        if with_flush:  # else: no room for a flush buffer; measured with the sets that fit (row says so)
            sets, flush_bytes = with_flush, 2 * l2_bytes
    return sets, flush_bytes
