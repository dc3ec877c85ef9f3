"""The kernel breakdown of one case (``"profile": true`` in a sweep, ``--profile`` on the CLI).

After a case is timed, ``PROFILE_CALLS`` more calls of its pass are run, each alone under ``torch.profiler``
(the backward's graph-building forwards run before the profiler starts, so only the pass itself is seen).
Per call, every GPU activity the profiler records — kernels, memsets, copies — is summed by name; the row's
``profile`` is::

    {"source": "cuda", "kernels": [{"name", "median_us", "calls"}], "kernel_us", "busy_us", "host_us", "gap_us",
     "samples"}

- ``median_us``: the median over the profiled calls of that name's total GPU time in one call (all its
  launches); ``calls``: its launches per call. ``kernel_us`` is the sum of the ``median_us``.
- ``host_us``: the median host time of one call (Python + launches, no synchronisation).
- ``busy_us``: the median time inside one call that some kernel was running. Kernels that overlap (the column
  sum launched with programmatic dependent launch is queued while the kernel before it still runs) count once
  here, so ``busy_us`` can be less than ``kernel_us``.
- ``gap_us``: the median GPU idle time inside one call: from the first kernel's start to the last one's end,
  less the time some kernel was running (the launch gaps between the pass's kernels). ``busy_us + gap_us`` is
  the call's GPU span, what the timing's events measure. As in the timing, the GPU is kept busy (a spin,
  left out of the profile) while the call is enqueued, so these gaps are the GPU's, not the host's.

On CPU (no GPU kernels) ``source`` is ``"cpu"``: the entries are the top-level CPU operators of the call
(``aten::…``; autograd's ``autograd::engine::evaluate_function: MulBackward0`` is named ``MulBackward0``, see
`cpu_op_name`) with their inclusive CPU times, ``busy_us`` the host time they cover
and ``gap_us`` the part of the host time no operator covers (Python around them). Profiling costs time, so it is off by default, and its
numbers are a breakdown, not the measurement: the row's ``median_us`` stays the timed one.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Optional

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from engine.timing import SPIN_CLOCK_HZ

PROFILE_CALLS = 10
MAX_KERNELS = 24
"""Entries kept per row (the slowest ones); the rest are summed into one ``"(other)"`` entry."""
FIRST_SPIN_S = 0.02
"""The GPU spin before the first profiled call; each later one spins twice the previous call's host time
(the profiler's: 2–4 ms measured on the H200 host), at least 1 ms, so the host never waits for an idle GPU."""
SPIN_KERNEL = "spin_kernel"
"""The name of ``torch.cuda._sleep``'s kernel, left out of the profile."""


def _busy_and_span(intervals: list[tuple[float, float]]) -> tuple[float, float]:
    """(time covered by at least one interval, first start to last end)."""
    if not intervals:
        return 0.0, 0.0
    intervals.sort()
    busy, (cur_s, cur_e) = 0.0, intervals[0]
    for s, e in intervals[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    return busy, intervals[-1][1] - intervals[0][0]


AUTOGRAD_PREFIXES = ("autograd::engine::evaluate_function: ", "torch::autograd::")


def cpu_op_name(name: str) -> str:
    """A CPU operator's readable name: autograd's wrapper prefixes dropped (``MulBackward0``, ``AccumulateGrad``),
    ``aten::mul`` kept as it is."""
    for prefix in AUTOGRAD_PREFIXES:
        while name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def _one_call(
    workload, i: int, cuda: bool, spin_s: float = FIRST_SPIN_S
) -> tuple[dict[str, list[float]], float, float, float]:
    """Profile call ``i`` alone, the GPU spinning ``spin_s`` first: ({name: [durations_us]}, host_us, busy_us,
    gap_us)."""
    workload.before(i)  # outside the profiler: the backward's forwards are not part of the pass
    if cuda:
        torch.cuda.synchronize()
        # as in the timing: the GPU spins while the host (slowed by the profiler) enqueues the call, so the
        # pass's kernels run back to back and the launch gaps seen are the GPU's, not the profiler's
        torch.cuda._sleep(int(spin_s * SPIN_CLOCK_HZ))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        workload.call(i)
        host_us = (time.perf_counter() - t0) * 1e6
        if cuda:
            torch.cuda.synchronize()
    durations: dict[str, list[float]] = {}
    intervals: list[tuple[float, float]] = []
    for evt in prof.events():
        if cuda:
            if evt.device_type != DeviceType.CUDA or SPIN_KERNEL in evt.name:
                continue
        elif evt.device_type != DeviceType.CPU or evt.cpu_parent is not None or evt.is_async:
            continue
        start, end = evt.time_range.start, evt.time_range.end
        durations.setdefault(evt.name if cuda else cpu_op_name(evt.name), []).append(end - start)
        intervals.append((start, end))
    busy, span = _busy_and_span(intervals)
    gap_us = span - busy if cuda else max(0.0, host_us - busy)
    return durations, host_us, busy, gap_us


def profile_workload(workload, device: torch.device, calls: int = PROFILE_CALLS) -> dict[str, Any]:
    """The ``profile`` dict of a row (see the module docstring), from ``calls`` profiled calls."""
    cuda = device.type == "cuda"
    base = workload.sets * 1_000_003  # a fresh index that is a multiple of the set count
    per_call: list[dict[str, list[float]]] = []
    hosts: list[float] = []
    busies: list[float] = []
    gaps: list[float] = []
    spin_s = FIRST_SPIN_S
    with workload.context():
        for j in range(max(1, calls)):
            durations, host_us, busy_us, gap_us = _one_call(workload, base + j, cuda, spin_s)
            spin_s = min(FIRST_SPIN_S, max(1e-3, 2e-6 * host_us))
            per_call.append(durations)
            hosts.append(host_us)
            busies.append(busy_us)
            gaps.append(gap_us)
    names = list(dict.fromkeys(name for d in per_call for name in d))
    kernels = []
    for name in names:
        totals = [sum(d.get(name, ())) for d in per_call]
        counts = [len(d.get(name, ())) for d in per_call]
        kernels.append(
            {"name": name, "median_us": statistics.median(totals), "calls": int(round(statistics.median(counts)))}
        )
    kernels.sort(key=lambda k: -k["median_us"])
    if len(kernels) > MAX_KERNELS:
        rest = kernels[MAX_KERNELS - 1 :]
        kernels = kernels[: MAX_KERNELS - 1] + [
            {
                "name": f"(other: {len(rest)} names)",
                "median_us": sum(k["median_us"] for k in rest),
                "calls": sum(k["calls"] for k in rest),
            }
        ]
    return {
        "source": "cuda" if cuda else "cpu",
        "kernels": kernels,
        "kernel_us": sum(k["median_us"] for k in kernels),
        "busy_us": statistics.median(busies),
        "host_us": statistics.median(hosts),
        "gap_us": statistics.median(gaps),
        "samples": len(per_call),
    }


def profile_error(exc: BaseException) -> Optional[dict[str, Any]]:
    """What a row says when profiling itself failed (the timing still stands)."""
    return {
        "source": "error",
        "kernels": [],
        "kernel_us": None,
        "busy_us": None,
        "host_us": None,
        "gap_us": None,
        "error": f"{type(exc).__name__}: {exc}"[:300],
    }
