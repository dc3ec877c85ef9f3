"""Device script for issue 7: check the kernels on the GPU, then time them against the peers and the copy
ceiling, and grid-search the backward launch parameters. One call does all of it; the table is printed
last and everything is written to $OUT/tune.json.

    python3 bench/tune_kernels.py [--check] [--peers] [--grid] [--shapes 16384x4096,...] [--dtype bfloat16]

Bytes (minimum, each tensor read or written once): fwd reads x, γ and writes y, rstd (fp32);
bwd reads x, dy, γ, rstd and writes dx, dγ. GB/s = bytes / median time; % of the measured copy ceiling
(device-to-device copy of 1 GiB, counting bytes read + written). Timed by the engine's own timer and rules
(bench/tune_common.py: engine.timing). On CPU (--dry) it only exercises the script on tiny shapes through
the interpreter; those timings mean nothing and are labelled so."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if "--dry" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import triton  # noqa: E402

from rmsnorm_kernels.registry import REGISTRY, load_all  # noqa: E402
from rmsnorm_kernels.triton_backward import persistent, workspace  # noqa: E402
from rmsnorm_kernels.triton_backward.dx import BackwardTile, backward_tile  # noqa: E402
from rmsnorm_kernels.triton_forward import rmsnorm_forward  # noqa: E402
from tune_common import (  # noqa: E402,F401  (probe_tiles.py reaches these as tune_kernels.*)
    HOST_US, Calls, bench_bwd_autograd, bench_bwd_direct, bench_fwd, bwd_bytes, copy_ceiling_GBps, cycle, fwd_bytes,
    kernel_reports, make_inputs, rotating_sets, time_ms, timed_ms, verify,
)

ISSUE_SHAPES = [(16384, 1024), (32768, 2048), (16384, 4096), (65536, 4096), (16384, 8192), (4096, 16384)]
SHORT_SHAPES = [(262144, 128), (131072, 256), (65536, 512), (4096, 4096), (1024, 1024)]
OUT = os.environ.get("OUT", "/tmp/tune-out")


def persistent_grid(n, dtype_size):
    """Candidate (tile, k, stages) for the persistent backward at row width n."""
    block = max(16, triton.next_power_of_2(n))
    candidates = []
    for rows in (1, 2, 4, 8, 16, 32, 64):
        elements = rows * block
        if elements > 16384 or (block >= 1024 and rows > 4) or (elements < 2048 and rows < 64 and block < 1024):
            continue
        for warps in (4, 8, 16, 32):
            if elements // (32 * warps) < 4 or (warps == 32 and block < 16384):
                continue
            for k in (1, 2, 4):
                if k * warps > 64:
                    continue
                for stages in ((1, 2, 3) if block >= 16384 else (2, 3)):
                    candidates.append((BackwardTile(rows=rows, block=block, num_warps=warps), k, stages))
    return candidates


def forward_grid(n):
    """Candidate persistent-forward plans (rows, num_warps, k, stages) at row width n."""
    block = triton.next_power_of_2(n)
    base = max(1, 2048 // block)
    plans = []
    for rows in sorted({base, 2 * base, 4 * base}):
        if rows * block > 16384 and rows > 1:
            continue
        for warps in (4, 8, 16, 32):
            if rows * block // (32 * warps) < 8 or (warps == 32 and block < 16384):
                continue
            for k in (1, 2, 4):
                if k * warps > 64:
                    continue
                for stages in ((1, 3) if block >= 16384 else (3,)):
                    plans.append((rows, warps, k, stages))
    return plans


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true", help="CPU/interpreter smoke run (tiny shapes)")
    parser.add_argument("--check", action="store_true", help="run the correctness sweep (Triton impls) first")
    parser.add_argument("--peers", action="store_true", help="time liger and quack too, where importable")
    parser.add_argument("--grid", default="", help="comma list of: fwd, bwd, ws")
    parser.add_argument("--fwd-grid-shapes", default="")
    parser.add_argument("--bwd-grid-shapes", default="")
    parser.add_argument("--shapes", default="", help="MxN,MxN (default: issue shapes + short rows)")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--budget-s", type=float, default=480, help="stop starting new work after this")
    parser.add_argument("--final", action="store_true", help="short confirmation run of the tuned defaults")
    args = parser.parse_args(argv)
    if args.final:
        return final(args)
    started = time.time()
    os.makedirs(OUT, exist_ok=True)
    device = torch.device("cpu" if args.dry else "cuda")
    dtype = getattr(torch, args.dtype)
    s = torch.empty((), dtype=dtype).element_size()
    parse = lambda text: [tuple(int(v) for v in p.lower().split("x")) for p in text.split(",") if p]  # noqa: E731
    shapes = parse(args.shapes) or (ISSUE_SHAPES + SHORT_SHAPES if not args.dry else [(64, 1024), (16, 4096)])
    grids = set(filter(None, args.grid.split(",")))
    load_all()
    result = {"device": torch.cuda.get_device_name() if not args.dry else "cpu (interpreter; timings meaningless)",
              "torch": torch.__version__, "triton": triton.__version__, "dtype": args.dtype,
              "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "rows": [], "grid": [], "check": None}
    log = open(os.path.join(OUT, "tune.log"), "w")

    def say(text):
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    def over_budget():
        return time.time() - started > args.budget_s

    if args.check:
        from engine.check import format_check_table, run_check

        names = ["triton", "triton-atomic", "triton-workspace", "triton-persistent"]
        rows = run_check(names, device=device) if not args.dry else run_check(["triton", "triton-persistent"])
        result["check"] = rows
        table = format_check_table(rows)
        say("\n".join(line for line in table.splitlines() if not line.endswith("  ok")))
        say(f"check done at {time.time() - started:.0f}s")

    ceiling = copy_ceiling_GBps(device, args.dry)
    result["ceiling_GBps"] = ceiling
    say(f"copy ceiling: {ceiling:.0f} GB/s  ({result['device']}, {args.dtype})")

    fwd_impls = ["triton", "torch-native"] + (["liger", "quack"] if args.peers else [])
    bwd_impls = ["triton-persistent", "triton-workspace", "triton-atomic", "torch-native"] + (
        ["liger", "quack"] if args.peers else [])
    for m, n in shapes:
        if over_budget():
            say(f"budget reached; skipping {m}x{n} and later")
            break
        sets, w = make_inputs(m, n, dtype, device, rotating_sets(m, n, s, 2))
        row = {"M": m, "N": n}
        for name in fwd_impls:
            if REGISTRY.get(name).unavailable_reason():
                continue
            try:
                ms = bench_fwd(REGISTRY.get(name).fn, sets, w, args.dry, label=f"fwd:{name}:{m}x{n}")
                row[f"fwd:{name}"] = fwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
            except Exception as exc:
                say(f"fwd {name} {m}x{n} failed: {exc!r}"[:300])
        for variant in ("one-row", "multi-row", "persistent"):
            try:
                ms = bench_fwd(lambda x, w: rmsnorm_forward(x, w, 1e-6, kernel=variant), sets, w, args.dry)
                row[f"fwd:triton[{variant}]"] = fwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
            except Exception as exc:
                say(f"fwd {variant} {m}x{n} failed: {exc!r}"[:300])
        for name in bwd_impls:
            if REGISTRY.get(name).unavailable_reason():
                continue
            try:
                ms = bench_bwd_autograd(REGISTRY.get(name).fn, sets, w, args.dry, label=f"bwd:{name}:{m}x{n}")
                row[f"bwd:{name}"] = bwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
            except Exception as exc:
                say(f"bwd {name} {m}x{n} failed: {exc!r}"[:300])
        row["host_us"] = {k.split(":")[1]: round(v, 1) for k, v in HOST_US.items() if k.endswith(f":{m}x{n}")}
        result["rows"].append(row)
        say(json.dumps({k: (round(v) if isinstance(v, float) else v) for k, v in row.items()}))
        del sets
        torch.cuda.empty_cache() if not args.dry else None

    def run_grid(kind, grid_shapes, candidates_for, bench_one, verify_one):
        for m, n in grid_shapes:
            if over_budget():
                say(f"budget reached; {kind} grid skips {m}x{n} and later")
                return
            sets, w = make_inputs(m, n, dtype, device, rotating_sets(m, n, s, 2))
            best = None
            for cand in candidates_for(n):
                if over_budget():
                    break
                try:
                    ms = bench_one(sets, w, cand)
                except Exception as exc:
                    say(f"{kind} grid {m}x{n} {cand} failed: {exc!r}"[:300])
                    continue
                nbytes = fwd_bytes(m, n, s) if kind == "fwd" else bwd_bytes(m, n, s)
                entry = {"kind": kind, "M": m, "N": n, "candidate": repr(cand), "GBps": nbytes / (ms * 1e-3) / 1e9}
                result["grid"].append(entry)
                if best is None or entry["GBps"] > best[0]["GBps"]:
                    best = (entry, cand)
            if best:
                say(f"{kind} grid {m}x{n}: best {best[0]['candidate']} {best[0]['GBps']:.0f} GB/s "
                    f"({100 * best[0]['GBps'] / ceiling:.0f}%)")
                verify_one(best[1], n)
            del sets
            torch.cuda.empty_cache() if not args.dry else None

    def fwd_bench(sets, w, plan):
        return bench_fwd(lambda x, w: rmsnorm_forward(x, w, 1e-6, kernel="persistent", plan=plan), sets, w, args.dry)

    def fwd_verify(plan, n):
        verify(f"fwd plan {plan}", lambda x, w, dy: (rmsnorm_forward(x, w, 1e-6, kernel="persistent", plan=plan)[0],),
               1000, n, device, say)

    def bwd_bench(sets, w, cand):
        tile, k, stages = cand
        return bench_bwd_direct(persistent.persistent_backward, sets, w, args.dry, tile=tile, per_sm=k, stages=stages)

    def bwd_verify(cand, n):
        tile, k, stages = cand

        def run(x, w, dy):
            _, x2d, rstd = rmsnorm_forward(x, w, 1e-6)
            return persistent.persistent_backward(dy, x2d, w, rstd, tile=tile, per_sm=k, stages=stages)

        verify(f"bwd {cand}", run, 1000, n, device, say)

    def ws_bench(sets, w, rpp):
        return bench_bwd_direct(workspace.workspace_backward, sets, w, args.dry, rows_per_program=rpp)

    fwd_shapes = parse(args.fwd_grid_shapes) or ISSUE_SHAPES + SHORT_SHAPES[:3]
    bwd_shapes = parse(args.bwd_grid_shapes) or SHORT_SHAPES[:3] + [(4096, 16384), (16384, 1024)]
    if args.dry:
        fwd_shapes, bwd_shapes = [(64, 1024)], [(64, 128)]
    if "fwd" in grids:
        run_grid("fwd", fwd_shapes, forward_grid, fwd_bench, fwd_verify)
    if "bwd" in grids:
        run_grid("bwd", bwd_shapes, lambda n: persistent_grid(n, s), bwd_bench, bwd_verify)
    if "ws" in grids:
        run_grid("ws", ISSUE_SHAPES + SHORT_SHAPES[:3] if not args.dry else [(64, 128)],
                 lambda n: (8, 16, 32, 64, 128, 256), ws_bench, lambda cand, n: None)

    result["kernels"] = kernel_reports() if not args.dry else []
    for r in result["kernels"]:
        if r.get("n_spills"):
            say(f"SPILLS: {r.get('kernel')} regs={r.get('n_regs')} spills={r.get('n_spills')} "
                f"warps={r.get('num_warps')} key={r.get('key', '')[-70:]}")
    result["host_us"] = HOST_US
    with open(os.path.join(OUT, "tune.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)

    cols = ["fwd:triton", "fwd:triton[persistent]", "fwd:torch-native", "fwd:liger", "fwd:quack",
            "bwd:triton-persistent", "bwd:triton-workspace", "bwd:triton-atomic", "bwd:torch-native", "bwd:liger",
            "bwd:quack"]
    say(f"\nGB/s from GPU time ({args.dtype}; ceiling {ceiling:.0f} GB/s; % of ceiling)")
    say(f"{'MxN':>13} " + " ".join(f"{c[:15]:>15}" for c in cols))
    for row in result["rows"]:
        cells = []
        for c in cols:
            v = row.get(c)
            cells.append(f"{v:>8.0f} ({100 * v / ceiling:>3.0f}%)" if v else f"{'-':>15}")
        say(f"{row['M']:>6}x{row['N']:<6} " + " ".join(cells))
    say(f"total {time.time() - started:.0f}s")
    return 0


def final(args) -> int:
    """Short confirmation of the tuned defaults: correctness at the wide-row and odd shapes (fp32, bf16),
    the issue shapes timed (ours + F.rms_norm), the wide-row γ held vs reloaded per row, and a
    same-size copy per shape (the ceiling a kernel of that many bytes can reach)."""
    from engine.check import format_check_table, run_check

    started = time.time()
    os.makedirs(OUT, exist_ok=True)
    device = torch.device("cpu" if args.dry else "cuda")
    load_all()
    print("quack:", REGISTRY.get("quack").unavailable_reason(), "| liger:", REGISTRY.get("liger").unavailable_reason())
    names = ["triton", "triton-atomic", "triton-workspace", "triton-persistent"]
    shapes = ((1000, 16384), (300, 20000), (64, 65536), (4099, 1000), (1024, 4096), (5000, 128)) if not args.dry \
        else ((7, 20000),)
    rows = run_check(names, dtypes=("float32", "bfloat16"), shapes=shapes, device=device)
    print("\n".join(line for line in format_check_table(rows).splitlines() if not line.endswith("  ok")))
    dtype = torch.bfloat16
    s = 2
    ceiling = copy_ceiling_GBps(device, args.dry)
    print(f"copy ceiling (1 GiB): {ceiling:.0f} GB/s")
    table = []
    for m, n in (ISSUE_SHAPES if not args.dry else [(64, 1024), (8, 16384)]):
        sets, w = make_inputs(m, n, dtype, device, rotating_sets(m, n, s, 2))
        src = sets[0][0]
        dst = torch.empty_like(src)
        copy = 2 * src.numel() * s / (time_ms(lambda: dst.copy_(src), args.dry) * 1e-3) / 1e9
        row = {"shape": f"{m}x{n}", "same-size copy": copy}
        for name in ("triton", "torch-native"):
            row[f"fwd:{name}"] = fwd_bytes(m, n, s) / (bench_fwd(REGISTRY.get(name).fn, sets, w, args.dry) * 1e-3) / 1e9
        for name in ("triton-persistent", "triton-workspace", "triton-atomic", "torch-native"):
            ms = bench_bwd_autograd(REGISTRY.get(name).fn, sets, w, args.dry)
            row[f"bwd:{name}"] = bwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
        if n >= 16384:
            from dataclasses import replace as dc_replace

            for flag in (False, True):
                tile = dc_replace(backward_tile(n), reload_weight=flag)
                ms = bench_bwd_direct(persistent.persistent_backward, sets, w, args.dry, tile=tile)
                row[f"bwd:persistent[γ {'reloaded' if flag else 'held'}]"] = bwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
                verify(f"reload_weight={flag}",
                       lambda x, w_, dy, tile=tile: persistent.persistent_backward(
                           dy, rmsnorm_forward(x, w_, 1e-6)[1], w_, rmsnorm_forward(x, w_, 1e-6)[2], tile=tile),
                       300, n, device, print)
        table.append(row)
        print(json.dumps({k: (f"{v:.0f} ({100 * v / ceiling:.0f}%)" if isinstance(v, float) else v)
                          for k, v in row.items()}), flush=True)
        del sets, src, dst
    with open(os.path.join(OUT, "final.json"), "w") as f:
        json.dump({"ceiling_GBps": ceiling, "rows": table, "check": rows, "date": time.strftime("%Y-%m-%d %H:%M"),
                   "device": torch.cuda.get_device_name() if not args.dry else "cpu"}, f, indent=1, default=str)
    print(f"total {time.time() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
