"""The ceiling every result is a fraction of: the device's own copy bandwidth, measured in the same run.

A device-to-device copy ``dst.copy_(src)`` of ``nbytes`` (default 2 GiB on a GPU, 1 GiB on CPU; at least
1 GiB unless asked otherwise through ``nbytes`` or env ``RMSNORM_CEILING_BYTES``, which tests use to stay
fast) moves ``2 · nbytes`` (read + written). Ceiling = 2·nbytes / median time of ``repetitions`` copies,
timed with CUDA events (``time.perf_counter`` on CPU, where it is a memcpy of large tensors). The source
is filled with a non-zero pattern so no page is the shared zero page. If free memory cannot hold both
buffers the size is reduced, and the method string says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import torch

from engine.device import free_memory_bytes
from engine.timing import stats_from_seconds

CEILING_BYTES_ENV = "RMSNORM_CEILING_BYTES"
GIB = 1 << 30
DEFAULT_BYTES = {"cuda": 2 * GIB, "cpu": 1 * GIB}
DEFAULT_REPETITIONS = {"cuda": 20, "cpu": 5}


@dataclass(frozen=True)
class Ceiling:
    GBps: float
    method: str
    nbytes: int
    median_us: float


def _human(nbytes: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def requested_bytes(device: torch.device, nbytes: Optional[int] = None) -> int:
    if nbytes is None:
        env = os.environ.get(CEILING_BYTES_ENV)
        nbytes = int(env) if env else DEFAULT_BYTES["cuda" if device.type == "cuda" else "cpu"]
    if nbytes < 1:
        raise ValueError(f"ceiling buffer size must be positive, got {nbytes}")
    return int(nbytes)


def measure_copy(device: torch.device, nbytes: Optional[int] = None, repetitions: Optional[int] = None) -> Ceiling:
    kind = "cuda" if device.type == "cuda" else "cpu"
    want = requested_bytes(device, nbytes)
    repetitions = repetitions or DEFAULT_REPETITIONS[kind]
    fits = int(free_memory_bytes(device) * (0.8 if kind == "cuda" else 0.4)) // 2
    size = min(want, max(fits, 1 << 20))
    size -= size % 16
    note = "" if size == want else f" (reduced from {_human(want)} to fit free memory)"

    src = torch.empty(size, dtype=torch.uint8, device=device).fill_(0x5A)
    dst = torch.empty(size, dtype=torch.uint8, device=device).fill_(0x33)
    try:
        for _ in range(2):
            dst.copy_(src)
        if kind == "cuda":
            torch.cuda.synchronize(device)
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
            for start, end in zip(starts, ends):
                start.record()
                dst.copy_(src)
                end.record()
            torch.cuda.synchronize(device)
            samples = [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)]
            clock = "CUDA events"
            what = "device-to-device copy"
        else:
            import time

            samples = []
            for _ in range(repetitions):
                t0 = time.perf_counter()
                dst.copy_(src)
                samples.append(time.perf_counter() - t0)
            clock = "perf_counter"
            what = "CPU memcpy"
    finally:
        del src, dst
        if kind == "cuda":
            torch.cuda.empty_cache()
    stats = stats_from_seconds(samples)
    gbps = 2 * size / (stats.median_us * 1e-6) / 1e9
    method = f"{what}, {_human(size)}{note}, read+write bytes, median of {repetitions} ({clock})"
    return Ceiling(GBps=gbps, method=method, nbytes=size, median_us=stats.median_us)
