"""GPU check of the kernel breakdown (issue 14): a ``--profile`` sweep of the backward strategies and the peers,
then, per row, whether the profiled kernels account for the row's timed median within 10 %: their GPU span (the
time some kernel ran, overlapping kernels counted once, plus the idle gaps between them: ``busy_us + gap_us``),
which is what the timing's events measure. The plain sum of the kernels' times is printed beside it; it exceeds
the median where kernels overlap (the persistent and workspace backwards' column sum, launched with
programmatic dependent launch, runs while the kernel before it finishes).

    python bench/profile_check.py [--m 16384] [--n 4096,8192] [--dtype bfloat16] [--out results/profile-check.json]

Exit 0 when every profiled row is within the tolerance; 1 otherwise (or when nothing could be profiled)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

IMPLS = ["triton-persistent", "triton-workspace", "triton-atomic", "liger", "torch-compile"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--m", default="16384")
    p.add_argument("--n", default="4096,8192")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--passes", default="bwd,fwd")
    p.add_argument("--tolerance", type=float, default=0.10)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    from engine.runner import run_sweep
    from rmsnorm_kernels.registry import default_registry

    registry = default_registry()
    impls = [i for i in IMPLS if i in registry]
    sweep = {
        "implementations": impls,
        "passes": args.passes.split(","),
        "dtypes": [args.dtype],
        "M": [int(v) for v in args.m.split(",")],
        "N": [int(v) for v in args.n.split(",")],
        "profile": True,
        "device": "cuda",
    }
    run = run_sweep(sweep, registry=registry)
    bad = 0
    checked = 0
    for r in run.rows:
        label = f"{r.impl:<18} {r.pass_} {r.dtype} {r.M}x{r.N}"
        if r.status not in ("ok", "wrong") or not r.profile:
            print(f"{label}  {r.status}: {r.reason or getattr(r, 'profile_error', 'no profile')}")
            continue
        prof = r.profile
        span = prof["busy_us"] + prof["gap_us"]
        ratio = span / r.median_us
        ok = abs(ratio - 1) <= args.tolerance
        checked += 1
        bad += not ok
        kernels = "; ".join(f"{k['name'][:60]} {k['median_us']:.1f}us x{k['calls']}" for k in prof["kernels"][:6])
        print(
            f"{label}  median {r.median_us:.1f}us  span {span:.1f}us ({ratio:.2f}x; busy {prof['busy_us']:.1f} + gap "
            f"{prof['gap_us']:.1f})  kernels summed {prof['kernel_us']:.1f}us ({prof['kernel_us'] / r.median_us:.2f}x)  "
            f"host {prof['host_us']:.1f}us  {'OK' if ok else 'OFF'}  [{kernels}]"
        )
    if args.out:
        args.out.write_text(run.model_dump_json(indent=1))
    print(f"{checked} rows profiled, {bad} outside ±{args.tolerance:.0%}")
    return 0 if checked and not bad else 1


if __name__ == "__main__":
    raise SystemExit(main())
