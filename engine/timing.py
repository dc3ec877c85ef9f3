"""How one pass of one implementation is timed, so that the number is the kernel's and not the cache's.

- **Fresh random inputs**: x and dy from ``randn``, γ = 1 + 0.1·randn (never zeros, never constant).
- **Working set larger than L2**: the inputs come in ``sets`` rotating copies, enough that, between two
  uses of one set, at least 2 × the L2 size of other data was touched (H200: 2 × 60 MB). When memory caps
  the number of sets below that, the L2 is flushed (a 2 × L2 buffer is overwritten) before every timed
  repetition, outside the timed region.
- **Warm-up**: ``warmup`` untimed repetitions first (compiles, autotunes, fills allocator caches).
- **Forward** is timed under ``torch.no_grad()``: ``fn(x, weight, eps)``.
- **Backward** is timed the way a training step runs it: for each set a forward is run OUTSIDE the timed
  region with ``requires_grad`` inputs (all sets' forwards in one batch, so no set is still in cache),
  then ``torch.autograd.grad(y, (x, weight), dy)`` alone is timed, once per graph. Not re-running the
  forward, and no ``retain_graph``: torch.compile's backward refuses ``retain_graph=True`` with donated
  buffers, and a training step does not retain either.
- **Clocks**: on CUDA one pair of events per repetition. Before each start event the GPU is given a short
  spin (``torch.cuda._sleep``, no memory traffic, so the L2 is left as it was) lasting about twice the
  host's time to enqueue one call (the median of a few calls first, on an idle GPU): the host then runs ahead
  and the events time the kernels, not Python's launch path. The host's own time in each timed call (the
  call never waits for the GPU: it is still spinning) is reported on its own as ``host_us``, the median over
  the timed repetitions: the launch overhead a caller pays per call; the ``cuda-graph`` mode removes it.
  On CPU ``time.perf_counter`` around each repetition (there host time *is* the time).
  ``cuda-graph`` mode (for small problems, labelled as such in the row) captures one call per set in a
  CUDA graph and times each replay, divided by the calls in it.
- **Statistics**: median, min, max and the quartiles of the per-repetition times.
- **Peak memory** (CUDA events mode): after the timed repetitions, one more call of the pass, between two
  synchronisations: the caching allocator's peak during it less what was allocated when it began (the inputs,
  a backward's saved graph, the previous output), i.e. the outputs and temporaries the pass itself allocates.
  One call apart, so the synchronisation it needs never falls among the timed calls. Null on CPU (no allocator
  counter) and with CUDA graphs (their pool is allocated at capture).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch

EPS = 1e-6
MAX_SETS = 512


@dataclass(frozen=True)
class Stats:
    median_us: float
    min_us: float
    max_us: float
    q1_us: float
    q3_us: float
    repetitions: int
    host_us: Optional[float] = None
    """median host (CPU) time of one timed call on CUDA, the GPU busy meanwhile: the launch overhead, reported
    separately"""
    device_mallocs: Optional[int] = None
    """cudaMalloc calls PyTorch's caching allocator made during the timed repetitions (CUDA only). A timed call
    that makes one waits for it, and for the page mapping of its size, between its events: nonzero marks a
    median that may hold allocation time, not only the kernels'."""
    peak_bytes: Optional[int] = None
    """bytes the pass itself allocates at its peak (outputs and temporaries; inputs not counted), CUDA events
    mode only (see the module's docstring)"""
    set_medians_us: Optional[list[float]] = None
    """median of the repetitions on each rotating input set (CUDA events, two sets or more): a median between a
    fast set and a slow one shows here (H200 2026-12-07: min 128 µs, median 140 µs at one width, not at others)"""


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def device_mallocs(device: torch.device) -> Optional[int]:
    """cudaMalloc calls of the caching allocator on ``device`` so far (None where PyTorch does not count them)."""
    value = torch.cuda.memory_stats(device).get("num_device_alloc")
    return int(value) if value is not None else None


def peak_pass_bytes(workload, i: int, device: torch.device) -> int:
    """The allocator's peak during one call of the pass less what was allocated as it began (see the module's
    docstring)."""
    workload.before(i)
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    workload.call(i)
    torch.cuda.synchronize(device)
    return max(0, torch.cuda.max_memory_allocated(device) - before)


def stats_from_seconds(
    samples: Sequence[float],
    host_us: Optional[float] = None,
    mallocs: Optional[int] = None,
    peak_bytes: Optional[int] = None,
    set_of: Optional[Sequence[int]] = None,
) -> Stats:
    """``set_of``: the rotating input set each sample ran on; with two sets or more the per-set medians come out
    too."""
    if not samples:
        raise ValueError("no timing samples")
    values = sorted(float(s) * 1e6 for s in samples)
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise ValueError(f"non-finite or negative timing samples: {values[:5]}")
    return Stats(
        median_us=_quantile(values, 0.5),
        min_us=values[0],
        max_us=values[-1],
        q1_us=_quantile(values, 0.25),
        q3_us=_quantile(values, 0.75),
        repetitions=len(values),
        host_us=host_us,
        device_mallocs=mallocs,
        peak_bytes=peak_bytes,
        set_medians_us=_set_medians_us(samples, set_of),
    )


def _set_medians_us(samples: Sequence[float], set_of: Optional[Sequence[int]]) -> Optional[list[float]]:
    if set_of is None or len(set(set_of)) < 2:
        return None
    by_set: dict[int, list[float]] = {}
    for sample, k in zip(samples, set_of):
        by_set.setdefault(k, []).append(float(sample) * 1e6)
    return [statistics.median(by_set[k]) for k in sorted(by_set)]


SPIN_CLOCK_HZ = 2.0e9  # H100/H200 boost clock; a slower clock only makes the spin longer, which is harmless
MIN_SPIN_S = 20e-6


def host_enqueue_seconds(workload, start_index: int, calls: int = 5) -> tuple[float, int]:
    """Median host time to enqueue one call (the GPU is synchronised before each, so the queue is empty).
    Returns (seconds, next repetition index)."""
    samples = []
    i = start_index
    for _ in range(calls):
        workload.before(i)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        workload.call(i)
        samples.append(time.perf_counter() - t0)
        i += 1
    torch.cuda.synchronize()
    samples.sort()
    return samples[len(samples) // 2], i


def rotating_sets(set_bytes: int, l2_bytes: int, max_sets: int = MAX_SETS) -> int:
    """Sets needed so that between two uses of one set at least 2·L2 bytes of other sets are touched."""
    if set_bytes <= 0:
        return 1
    return max(1, min(max_sets, math.ceil(2 * l2_bytes / set_bytes) + 1))


def needs_flush(sets: int, set_bytes: int, l2_bytes: int) -> bool:
    return (sets - 1) * set_bytes < 2 * l2_bytes


def random_inputs(M: int, N: int, dtype: torch.dtype, device: torch.device, sets: int, backward: bool, seed: int = 0):
    """``sets`` fresh random x (and dy for the backward), one shared γ. Backward inputs require grad."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    xs = [torch.randn(M, N, dtype=dtype, device=device, generator=gen) for _ in range(sets)]
    weight = (1.0 + 0.1 * torch.randn(N, dtype=torch.float32, device=device, generator=gen)).to(dtype)
    dys = [torch.randn(M, N, dtype=dtype, device=device, generator=gen) for _ in range(sets)] if backward else []
    if backward:
        for x in xs:
            x.requires_grad_(True)
        weight.requires_grad_(True)
    return xs, weight, dys


class ForwardWorkload:
    """``fn(x, weight, eps)`` on rotating sets, under ``torch.no_grad()``."""

    def __init__(self, fn: Callable, xs: list, weight: torch.Tensor, eps: float = EPS):
        self.fn, self.xs, self.weight, self.eps = fn, xs, weight, eps
        self.sets = len(xs)
        self.out: Any = None
        self.calls = 0

    def context(self):
        return torch.no_grad()

    def before(self, i: int) -> None:
        pass

    def call(self, i: int) -> None:
        self.out = self.fn(self.xs[i % self.sets], self.weight, self.eps)
        self.calls += 1

    def check(self) -> None:
        x = self.xs[0]
        y = self.out
        if not isinstance(y, torch.Tensor) or y.shape != x.shape or y.dtype != x.dtype or y.device != x.device:
            raise RuntimeError(
                f"forward returned {_describe(y)}; expected a {x.dtype} tensor of shape {tuple(x.shape)} on {x.device}"
            )

    def capture_calls(self) -> list:
        return [lambda k=k: self.fn(self.xs[k], self.weight, self.eps) for k in range(self.sets)]

    def release(self) -> None:
        self.out = None
        self.xs = []


class BackwardWorkload:
    """``torch.autograd.grad(y, (x, weight), dy)`` on rotating sets; the forwards that build the graphs run
    untimed, one batch over all sets whenever set 0 comes round again."""

    def __init__(self, fn: Callable, xs: list, weight: torch.Tensor, dys: list, eps: float = EPS):
        self.fn, self.xs, self.weight, self.dys, self.eps = fn, xs, weight, dys, eps
        self.sets = len(xs)
        self.ys: list = [None] * self.sets
        self.out: Any = None
        self.forwards = 0
        self.calls = 0

    def context(self):
        return contextlib.nullcontext()

    def _build(self, k: int) -> None:
        with torch.enable_grad():
            y = self.fn(self.xs[k], self.weight, self.eps)
        if not isinstance(y, torch.Tensor) or y.grad_fn is None:
            raise RuntimeError(
                f"forward returned {_describe(y)} without an autograd graph; the backward cannot be timed"
            )
        self.ys[k] = y
        self.forwards += 1

    def before(self, i: int) -> None:
        if i % self.sets == 0:
            for k in range(self.sets):
                if self.ys[k] is None:
                    self._build(k)
        elif self.ys[i % self.sets] is None:  # only if a repetition was skipped; never in normal flow
            self._build(i % self.sets)

    def call(self, i: int) -> None:
        k = i % self.sets
        y, self.ys[k] = self.ys[k], None
        self.out = torch.autograd.grad(y, (self.xs[k], self.weight), self.dys[k])
        self.calls += 1

    def check(self) -> None:
        x, w = self.xs[0], self.weight
        dx, dw = self.out
        if dx is None or dx.shape != x.shape or dx.dtype != x.dtype:
            raise RuntimeError(f"backward returned dx {_describe(dx)}; expected {x.dtype} {tuple(x.shape)}")
        if dw is None or dw.shape != w.shape:
            raise RuntimeError(f"backward returned dweight {_describe(dw)}; expected shape {tuple(w.shape)}")

    def capture_calls(self) -> list:
        for k in range(self.sets):
            if self.ys[k] is None:
                self._build(k)
        return [
            lambda k=k: torch.autograd.grad(self.ys[k], (self.xs[k], self.weight), self.dys[k], retain_graph=True)
            for k in range(self.sets)
        ]

    def release(self) -> None:
        self.out = None
        self.ys = []
        self.xs = []
        self.dys = []


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)} on {value.device}"
    return f"a {type(value).__name__}"


def measure(
    workload,
    repetitions: int,
    warmup: int,
    device: torch.device,
    flush: Optional[torch.Tensor] = None,
) -> Stats:
    """Warm up, check the output once, then time each repetition (CUDA events, or perf_counter on CPU)."""
    cuda = device.type == "cuda"
    with workload.context():
        for i in range(max(warmup, 1)):
            workload.before(i)
            workload.call(i)
        if cuda:
            torch.cuda.synchronize(device)
        workload.check()
        start_index = max(warmup, 1)
        if cuda:
            host_s, start_index = host_enqueue_seconds(workload, start_index)
            spin_cycles = int(max(2 * host_s, MIN_SPIN_S) * SPIN_CLOCK_HZ)
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
            hosts = []
            mallocs_before = device_mallocs(device)
            for r in range(repetitions):
                i = start_index + r
                workload.before(i)
                if flush is not None:
                    flush.zero_()
                torch.cuda._sleep(spin_cycles)  # keeps the GPU busy while the host enqueues the call
                starts[r].record()
                t0 = time.perf_counter()
                workload.call(i)
                hosts.append(time.perf_counter() - t0)
                ends[r].record()
            torch.cuda.synchronize(device)
            mallocs_after = device_mallocs(device)
            samples = [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)]
            mallocs = None if mallocs_before is None or mallocs_after is None else mallocs_after - mallocs_before
            peak = peak_pass_bytes(workload, start_index + repetitions, device)
            return stats_from_seconds(
                samples,
                host_us=statistics.median(hosts) * 1e6,
                mallocs=mallocs,
                peak_bytes=peak,
                set_of=[(start_index + r) % workload.sets for r in range(repetitions)],
            )
        else:
            samples = []
            for r in range(repetitions):
                i = start_index + r
                workload.before(i)
                if flush is not None:
                    flush.zero_()
                t0 = time.perf_counter()
                workload.call(i)
                samples.append(time.perf_counter() - t0)
    return stats_from_seconds(samples)


def measure_cuda_graph(
    workload,
    repetitions: int,
    warmup: int,
    device: torch.device,
    flush: Optional[torch.Tensor] = None,
) -> Stats:
    """Capture one call per set in a CUDA graph; time each replay with events; per-call time = replay / calls."""
    if device.type != "cuda":
        raise RuntimeError("cuda-graph timing needs a CUDA device")
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream), workload.context():
        for i in range(max(warmup, 1)):  # warm-up (and autotune) on the capture stream, as CUDA graphs require
            workload.before(i)
            workload.call(i)
        workload.check()
        calls = workload.capture_calls()  # the backward builds its graphs here, on the capture stream
    torch.cuda.current_stream(device).wait_stream(stream)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with workload.context(), torch.cuda.graph(graph, stream=stream):
        outputs = [call() for call in calls]
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    graph.replay()
    for r in range(repetitions):
        if flush is not None:
            flush.zero_()
        starts[r].record()
        graph.replay()
        ends[r].record()
    torch.cuda.synchronize(device)
    per_call = len(calls)
    samples = [s.elapsed_time(e) * 1e-3 / per_call for s, e in zip(starts, ends)]
    del outputs, graph
    return stats_from_seconds(samples)
