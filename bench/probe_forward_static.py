"""Device probe (issue 15): the forward at wide rows with the row width as a compile-time constant.

torch.compile's forward is 1–4 % ahead of ours at N ≥ 6144 (bench/NOTES.md). Its kernel is a two-pass loop
over the row like our chunked kernel, but specialised to the exact width: the loop bounds are constants and,
where the chunk divides the row, there are no masks. This probe times, per shape, our current dispatch,
torch.compile (the registry's), and the chunked kernel with ``N: tl.constexpr`` at a few chunk × warp configs,
each checked against fp64 first; every candidate of one shape measured in ``--rounds`` interleaved rounds by the
engine's timer (median of the rounds' medians; the spread printed).

The committed probe files of 2026-12-04 (results/checks/probe-forward-static*) were made by this script at
c348564, before the chunked kernel itself took N as a constexpr: its own copy of the kernel then, looped
(``tl.range``) and fully unrolled (``tl.static_range``; equal within 0.3 %), 4 and 8 warps.

    python3 bench/probe_forward_static.py [--m 4096,16384,65536] [--n 6144,8192,12288,16384] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402

from bench.tune_common import bench_fwd, copy_ceiling_GBps, fwd_bytes, make_inputs, rotating_sets  # noqa: E402
from rmsnorm_kernels.reference import relative_error, rmsnorm_reference, tolerance_for  # noqa: E402
from rmsnorm_kernels.registry import default_registry  # noqa: E402
from rmsnorm_kernels.triton_forward import rmsnorm_fwd_chunked_kernel, size_class  # noqa: E402


def static_forward(chunk, warps):
    """The chunked kernel (`rmsnorm_kernels.triton_forward`, N a constexpr since 06d0d80) at one config."""

    def run(x, w):
        m, n = x.shape
        y = torch.empty_like(x)
        rstd = torch.empty(m, device=x.device, dtype=torch.float32)
        rmsnorm_fwd_chunked_kernel[(m,)](x, w, y, rstd, x.stride(0), y.stride(0), n, 1e-6, size_class(m),
                                         CHUNK=chunk, num_warps=warps)
        return y

    return run


VARIANTS = [(c, w) for c in (1024, 2048) for w in (4, 8, 16)]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--m", default="4096,16384,65536")
    p.add_argument("--n", default="6144,8192,12288,16384")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bench/logs"))
    args = p.parse_args()
    dev = torch.device("cuda")
    reg = default_registry()
    ours, compiled = reg.get("triton").fn, reg.get("torch-compile").fn  # looked up once, not inside the timed calls
    ceiling = copy_ceiling_GBps(dev, False)
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "triton": triton.__version__, "ceiling_GBps": ceiling, "dtype": "bfloat16",
              "rounds": args.rounds, "rows": []}
    print(f"ceiling {ceiling:.0f} GB/s")
    for n in [int(v) for v in args.n.split(",")]:
        for m in [int(v) for v in args.m.split(",")]:
            sets, w = make_inputs(m, n, torch.bfloat16, dev, rotating_sets(m, n, 2, 2))
            cands = {"ours (dispatch)": lambda x, w_: ours(x, w_, 1e-6),
                     "torch-compile": lambda x, w_: compiled(x, w_, 1e-6)}
            for c, wp in VARIANTS:
                if c < n:
                    cands[f"static loop chunk {c} w{wp}"] = static_forward(c, wp)
            x0 = sets[0][0]
            ok = {}
            for name, fn in cands.items():
                try:
                    with torch.no_grad():
                        y = fn(x0, w)
                    err = relative_error(y, rmsnorm_reference(x0, w, 1e-6)[0])
                    ok[name] = err <= tolerance_for(torch.bfloat16)
                    if not ok[name]:
                        print(f"{m}x{n} {name}: WRONG rel err {err:.2e}")
                except Exception as exc:
                    ok[name] = False
                    print(f"{m}x{n} {name}: FAILED {exc!r}"[:300])
            times = {name: [] for name in cands if ok[name]}
            for _ in range(args.rounds):
                for name in times:
                    times[name].append(bench_fwd(cands[name], sets, w, False))
            nbytes = fwd_bytes(m, n, 2)
            row = {"M": m, "N": n, "GBps": {}, "spread": {}}
            for name, ts in times.items():
                med = statistics.median(ts)
                row["GBps"][name] = nbytes / (med * 1e-3) / 1e9
                row["spread"][name] = (max(ts) - min(ts)) / med
            report["rows"].append(row)
            best = max(row["GBps"].items(), key=lambda kv: kv[1])
            print(f"{m}x{n}: " + "; ".join(f"{k} {v:.0f} ({100 * v / ceiling:.1f}%, ±{100 * row['spread'][k]:.1f}%)"
                                           for k, v in sorted(row["GBps"].items(), key=lambda kv: -kv[1])))
            print(f"   best {best[0]}")
            del sets
            torch.cuda.empty_cache()
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "probe-forward-static.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
