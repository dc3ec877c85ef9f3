"""Device script (issue 16): where the host time of one call of ours goes, on the GPU host.

For each Triton implementation, bf16, one shape: the median host µs of a forward (no grad) and of a backward
(``torch.autograd.grad``) with the GPU kept busy (the calls only enqueue), the fast-launch counters (direct vs
through ``kernel[grid]``) and the launch-plan counters (replayed / recorded), and a cProfile of 300 calls of each (top functions by own time). Beside them the
floor: two ``torch.empty``, ``F.rms_norm``.

    python3 bench/host_profile.py [--m 4096] [--n 4096] [--out DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from rmsnorm_kernels import fast_launch, launch_plans  # noqa: E402
from rmsnorm_kernels.module import RMSNorm  # noqa: E402


def host_us(call, calls=50):
    samples = []
    for _ in range(calls):
        torch.cuda.synchronize()
        torch.cuda._sleep(2_000_000)
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def profile(call, calls=300, top=25):
    prof = cProfile.Profile()
    for _ in range(calls):
        torch.cuda._sleep(200_000)
        prof.enable()
        call()
        prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bench/logs"))
    args = p.parse_args()
    m, n = args.m, args.n
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(torch.ones(n, device="cuda", dtype=torch.bfloat16))
    dy = torch.randn_like(x)
    report = {"M": m, "N": n, "floor": {}, "impls": {}}
    report["floor"]["torch.empty x2"] = host_us(
        lambda: (torch.empty(m, n, device="cuda", dtype=torch.bfloat16), torch.empty(m, device="cuda"))
    )
    with torch.no_grad():
        report["floor"]["F.rms_norm fwd"] = host_us(lambda: F.rms_norm(x, (n,), w, 1e-6))
    y = F.rms_norm(x, (n,), w, 1e-6)
    report["floor"]["F.rms_norm bwd"] = host_us(lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True))
    for impl in ("triton-persistent", "triton-workspace", "triton-atomic"):
        mod = RMSNorm(n, impl=impl, device="cuda", dtype=torch.bfloat16)
        mod.weight = w
        with torch.no_grad():
            for _ in range(3):
                mod(x)
            fast_launch.STATS.update(jit=0, direct=0)
            launch_plans.STATS.update(recorded=0, replayed=0, incomplete=0)
            fwd = host_us(lambda: mod(x))
            fwd_stats = {**fast_launch.STATS, **launch_plans.STATS}
            fwd_prof = profile(lambda: mod(x))
        y = mod(x)
        for _ in range(3):
            torch.autograd.grad(y, (x, w), dy, retain_graph=True)
        fast_launch.STATS.update(jit=0, direct=0)
        launch_plans.STATS.update(recorded=0, replayed=0, incomplete=0)
        bwd = host_us(lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True))
        bwd_stats = {**fast_launch.STATS, **launch_plans.STATS}
        bwd_prof = profile(lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True))
        report["impls"][impl] = {
            "fwd_host_us": fwd,
            "bwd_host_us": bwd,
            "fwd_launches": fwd_stats,
            "bwd_launches": bwd_stats,
            "fwd_profile": fwd_prof,
            "bwd_profile": bwd_prof,
        }
        print(f"{impl:18s} fwd {fwd:7.1f} µs {fwd_stats}  bwd {bwd:7.1f} µs {bwd_stats}")
    print(json.dumps(report["floor"], indent=1))
    for impl, r in report["impls"].items():
        print(
            f"===== {impl} fwd profile\n{r['fwd_profile'][:3500]}\n===== {impl} bwd profile\n{r['bwd_profile'][:5000]}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "host-profile.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
