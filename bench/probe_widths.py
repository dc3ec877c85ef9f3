"""Device script (issue 15): the kernels at the hidden sizes of real models, in one call.

For every width of the ``models`` preset (engine/presets.py) at M = 16384 and 65536, bf16, GPU time by
the engine's own timer (engine.timing.measure: events, L2 flush or rotating sets, a GPU spin before
each start event, host time apart):

1. forward: the one-row kernel with the row as power-of-two segments (autotuned) and as one padded block,
   the chunked kernel (autotuned over the chunks that pad the row least), Liger's forward when installed;
2. backward, each dγ strategy called directly: segmented and padded at the tuned tile, and for the persistent
   grid a small grid of tiles (rows × warps × k × stages) on the segmented layout;
3. every variant is first checked on the GPU against the fp64 reference (fresh random inputs, poisoned outputs).

    python3 bench/probe_widths.py [--dry] [--budget-s 420] [--m 16384,65536] [--n 2560,5120]

Writes $OUT/widths.json (every number) and prints one line per measurement, a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if "--dry" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from engine.byte_model import min_bytes  # noqa: E402
from engine.ceiling import measure_copy  # noqa: E402
from engine.presets import get_preset  # noqa: E402
from engine.timing import measure, needs_flush, rotating_sets  # noqa: E402
from rmsnorm_kernels.poison import poisoned_outputs  # noqa: E402
from rmsnorm_kernels.reference import dx_scale, relative_error, rmsnorm_backward_reference, rmsnorm_reference, tolerance_for  # noqa: E402
from rmsnorm_kernels.triton_backward.atomic import atomic_backward  # noqa: E402
from rmsnorm_kernels.triton_backward.dx import backward_tile  # noqa: E402
from rmsnorm_kernels.triton_backward.persistent import persistent_backward  # noqa: E402
from rmsnorm_kernels.triton_backward.workspace import workspace_backward  # noqa: E402
from rmsnorm_kernels.triton_forward import rmsnorm_forward  # noqa: E402

OUT = os.environ.get("OUT", "/tmp/probe-out")
PERSISTENT_GRID = [(1, 4, 2, 3), (1, 8, 1, 3), (1, 8, 2, 3), (1, 16, 1, 3), (2, 8, 1, 3), (2, 16, 1, 3), (1, 16, 1, 1),
                   (4, 16, 1, 3)]


class Calls:
    """A workload for engine.timing.measure: ``fn(k)`` on rotating set k."""

    def __init__(self, fn, sets):
        self.fn, self.sets, self.out = fn, sets, None

    def context(self):
        return torch.no_grad()

    def before(self, i):
        pass

    def call(self, i):
        self.out = self.fn(i % self.sets)

    def check(self):
        pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--budget-s", type=float, default=420)
    parser.add_argument("--m", default="16384,65536")
    parser.add_argument("--n", default="")
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--skip-grid", action="store_true")
    args = parser.parse_args(argv)
    started = time.time()
    os.makedirs(OUT, exist_ok=True)
    device = torch.device("cpu" if args.dry else "cuda")
    props = None if args.dry else torch.cuda.get_device_properties(device)
    l2 = 2**20 if args.dry else props.L2_cache_size
    sms = 4 if args.dry else props.multi_processor_count
    ms = [int(v) for v in args.m.split(",")] if not args.dry else [64]
    ns = [int(v) for v in args.n.split(",")] if args.n else get_preset("models")["N"]
    ceiling = measure_copy(device).GBps
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "ceiling_GBps": ceiling,
              "device": "cpu (dry: timings meaningless)" if args.dry else torch.cuda.get_device_name(),
              "torch": torch.__version__, "git_commit": os.environ.get("GIT_COMMIT"), "rows": [], "errors": []}
    print(f"copy ceiling {ceiling:.0f} GB/s  ({report['device']}, torch {torch.__version__})", flush=True)
    try:
        import liger_kernel.ops.rms_norm as liger_ops  # noqa: F401
        from liger_kernel.transformers.functional import liger_rms_norm
    except Exception as exc:  # noqa: BLE001
        liger_rms_norm = None
        print(f"liger unavailable: {exc}")
    dtype = torch.bfloat16

    def save():
        with open(os.path.join(OUT, "widths.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)

    def check_fwd(fn, n):
        x = torch.randn(37, n, device=device, dtype=dtype) * (1 + torch.rand(37, 1, device=device, dtype=dtype))
        w = (1 + 0.3 * torch.randn(n, device=device)).to(dtype)
        with poisoned_outputs():
            y = fn(x, w)
        return relative_error(y, rmsnorm_reference(x, w)[0]) <= tolerance_for(dtype)

    def check_bwd(strategy, n, **kw):
        x = torch.randn(301, n, device=device, dtype=dtype)
        w = (1 + 0.3 * torch.randn(n, device=device)).to(dtype)
        dy = torch.randn(301, n, device=device, dtype=dtype)
        _, x2d, rstd = rmsnorm_forward(x, w, 1e-6)
        with poisoned_outputs():
            dx, dw = strategy(dy, x2d, w, rstd, **kw)
        dx_ref, dw_ref = rmsnorm_backward_reference(x, w, dy)
        tol = tolerance_for(dtype)
        return relative_error(dx, dx_ref, dx_scale(x, w, dy)) <= tol and relative_error(dw, dw_ref) <= tol

    def record(part, m, n, label, fn_k, sets, nbytes, ok):
        if not ok:
            report["errors"].append(f"{part} {label} {m}x{n}: WRONG vs fp64")
            print(f"WRONG {part} {label} {m}x{n}", flush=True)
            return
        flush = torch.empty(2 * l2 // 4 + 1, dtype=torch.int32, device=device) if needs_flush(sets, nbytes, l2) else None
        stats = measure(Calls(fn_k, sets), args.reps, 5, device, flush)
        gbps = nbytes / (stats.median_us * 1e-6) / 1e9
        row = {"part": part, "M": m, "N": n, "variant": label, "median_us": stats.median_us, "GBps": gbps,
               "pct": 100 * gbps / ceiling, "host_us": stats.host_us}
        report["rows"].append(row)
        print(f"{part} {m}x{n} {label:28s} {stats.median_us:8.1f} us {gbps:6.0f} GB/s {row['pct']:5.1f}%"
              f" host {stats.host_us or 0:.0f} us", flush=True)

    for n in ns:
        for m in ms:
            if time.time() - started > args.budget_s:
                report["errors"].append(f"budget reached before {m}x{n}")
                break
            set_bytes = 3 * m * n * 2
            sets = rotating_sets(set_bytes, l2, max_sets=4)
            xs = [torch.randn(m, n, device=device, dtype=dtype) for _ in range(sets)]
            dys = [torch.randn(m, n, device=device, dtype=dtype) for _ in range(sets)]
            w = (1 + 0.1 * torch.randn(n, device=device)).to(dtype)
            fb, bb = min_bytes("fwd", m, n, "bfloat16"), min_bytes("bwd", m, n, "bfloat16")
            try:
                for label, kw in (("one-row segments", {"kernel": "one-row"}),
                                  ("one-row padded", {"kernel": "one-row", "padded": True}),
                                  ("chunked", {"kernel": "chunked"}), ("auto", {})):
                    fn = lambda x, w_, kw=kw: rmsnorm_forward(x, w_, 1e-6, **kw)[0]  # noqa: E731
                    record("fwd", m, n, label, lambda k, fn=fn: fn(xs[k], w), sets, fb, check_fwd(fn, n))
                if liger_rms_norm is not None:
                    fn = lambda x, w_: liger_rms_norm(x, w_, 1e-6)  # noqa: E731
                    record("fwd", m, n, "liger", lambda k: fn(xs[k], w), sets, fb, check_fwd(fn, n))
                prepared = [rmsnorm_forward(x, w, 1e-6) for x in xs]
                rstds = [p[2] for p in prepared]
                tile = backward_tile(n)
                variants = [("persistent", persistent_backward, {}), ("persistent padded", persistent_backward,
                            {"tile": replace(tile, padded=True)}),
                            ("workspace", workspace_backward, {}), ("workspace padded", workspace_backward,
                            {"tile": replace(tile, padded=True)}),
                            ("atomic", atomic_backward, {}), ("atomic padded", atomic_backward,
                            {"tile": replace(tile, padded=True)})]
                if not args.skip_grid:
                    for rows, warps, k, stages in PERSISTENT_GRID:
                        variants.append((f"persistent r{rows} w{warps} k{k} s{stages}", persistent_backward,
                                         {"tile": replace(tile, rows=rows, num_warps=warps, programs_per_sm=k,
                                                          reload_weight=n > 8192), "stages": stages}))
                for label, strategy, kw in variants:
                    if "sm_count" not in kw and strategy is persistent_backward:
                        kw = {**kw, "sm_count": sms}
                    record("bwd", m, n, label,
                           lambda k, s=strategy, kw=kw: s(dys[k], xs[k], w, rstds[k], **kw), sets, bb,
                           check_bwd(strategy, n, **kw))
            except Exception as exc:  # noqa: BLE001
                report["errors"].append(f"{m}x{n}: {type(exc).__name__}: {exc}"[:400])
                print(f"ERROR {m}x{n}: {exc}"[:400], flush=True)
            del xs, dys
            save()
    save()
    print("\n== best per shape ==")
    by = {}
    for r in report["rows"]:
        by.setdefault((r["part"], r["M"], r["N"]), []).append(r)
    for (part, m, n), rows in sorted(by.items()):
        rows.sort(key=lambda r: -r["GBps"])
        print(f"{part} {m}x{n}: " + "; ".join(f"{r['variant']} {r['pct']:.0f}%" for r in rows[:4]))
    print("errors:", report["errors"] or "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
