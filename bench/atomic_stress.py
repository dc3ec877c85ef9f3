"""GPU check of the atomic backward on its kept accumulator (issue 16): call after call on the steady-state path.

    python bench/atomic_stress.py [--calls 40] [--out DIR]        (default DIR: $OUT, else bench/logs)

The atomic backward adds every program's dγ into one fp32 accumulator; a drain kernel writes dγ and leaves the
accumulator zero, and launch plans (Python replay, then the native node) keep it for the stream's next call. A
drain that missed some adds, or an accumulator left non-zero, shows up as a wrong dγ on some later call. So each
shape is called ``--calls`` times through ``rms_norm(backward="atomic")`` (the path a training loop takes: the first
calls record, the rest replay), each call on fresh random inputs and checked against the fp64 reference. Shapes
from one row per program (65536 programs at 65536 × 4096) to tiles of rows (N = 512), odd widths and odd M.
Writes ``atomic-stress.json``; exit status 1 when any call is off the reference.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from rmsnorm_kernels import native  # noqa: E402
from rmsnorm_kernels.ops import rms_norm  # noqa: E402
from rmsnorm_kernels.reference import dx_scale, relative_error, rmsnorm_backward_reference, tolerance_for  # noqa: E402

SHAPES = ((65536, 4096), (16384, 2560), (4099, 5000), (300, 12289), (4096, 512), (7, 16384), (1, 2048))


def one_call(m: int, n: int, dtype: torch.dtype, gen: torch.Generator) -> tuple[float, float]:
    x = torch.randn(m, n, device="cuda", dtype=dtype, generator=gen).requires_grad_(True)
    w = (1 + 0.1 * torch.randn(n, device="cuda", generator=gen)).to(dtype).requires_grad_(True)
    dy = torch.randn(m, n, device="cuda", dtype=dtype, generator=gen)
    dx, dw = torch.autograd.grad(rms_norm(x, w, 1e-6, backward="atomic"), (x, w), dy)
    ref_dx, ref_dw = rmsnorm_backward_reference(x.detach(), w.detach(), dy)
    return (
        relative_error(dx, ref_dx, dx_scale(x.detach(), w.detach(), dy), on_host=False),
        relative_error(dw, ref_dw, on_host=False),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/logs"))
    args = ap.parse_args()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(int(time.time()))
    native.ensure()
    rows, bad = [], 0
    for dtype in (torch.bfloat16, torch.float32):
        tol = tolerance_for(dtype)
        for m, n in SHAPES:
            errs = [one_call(m, n, dtype, gen) for _ in range(args.calls)]
            worst_dx, worst_dw = max(e[0] for e in errs), max(e[1] for e in errs)
            wrong = sum(1 for e in errs if max(e) > tol)
            bad += wrong
            rows.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "M": m,
                    "N": n,
                    "calls": args.calls,
                    "wrong": wrong,
                    "max_rel_err_dx": worst_dx,
                    "max_rel_err_dw": worst_dw,
                    "tolerance": tol,
                }
            )
            print(
                f"{rows[-1]['dtype']:9} {m:>6}×{n:<6} {args.calls} calls: {wrong} wrong, max rel err dx "
                f"{worst_dx:.2e} dγ {worst_dw:.2e} (tol {tol:.0e})",
                flush=True,
            )
    stats = native.module().stats() if native.module() else None
    doc = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "native": stats,
        "rows": rows,
        "wrong_calls": bad,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "atomic-stress.json").write_text(json.dumps(doc, indent=1))
    print(f"native node: {stats}; {bad} wrong call(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
