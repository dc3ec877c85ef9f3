"""Device script for issue 7: check the kernels on the GPU, then time them against the peers and the copy
ceiling, and grid-search the backward launch parameters. One call does all of it; the table is printed
last and everything is written to $OUT/tune.json.

    python3 bench/tune_kernels.py [--check] [--peers] [--grid] [--shapes 16384x4096,...] [--dtype bfloat16]

Bytes (minimum, each tensor read or written once): fwd reads x, γ and writes y, rstd (fp32);
bwd reads x, dy, γ, rstd and writes dx, dγ. GB/s = bytes / median time; % of the measured copy ceiling
(device-to-device copy of 1 GiB, counting bytes read + written). On CPU (--dry) it only exercises the
script on tiny shapes through the interpreter; those timings mean nothing and are labelled so."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if "--dry" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import triton  # noqa: E402

from kernels.registry import REGISTRY, load_all  # noqa: E402
from kernels.triton_backward import atomic, persistent, workspace  # noqa: E402
from kernels.triton_backward.dx import BackwardTile, backward_tile  # noqa: E402
from kernels.triton_forward import rmsnorm_forward  # noqa: E402

ISSUE_SHAPES = [(16384, 1024), (32768, 2048), (16384, 4096), (65536, 4096), (16384, 8192), (4096, 16384)]
SHORT_SHAPES = [(262144, 128), (131072, 256), (65536, 512), (4096, 4096), (1024, 1024)]
L2_BYTES = 60 * 2**20
OUT = os.environ.get("OUT", "/tmp/tune-out")


def time_ms(fn, dry: bool, warmup=10, rep=40) -> float:
    if dry:
        samples = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t) * 1e3)
        return statistics.median(samples)
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def copy_ceiling_GBps(device, dry: bool) -> float:
    n = (2**30 if not dry else 2**20) // 2
    src = torch.randn(n, device=device).to(torch.float16)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), dry, warmup=20, rep=200)
    return 2 * src.numel() * 2 / (ms * 1e-3) / 1e9


def fwd_bytes(m, n, s):
    return 2 * m * n * s + n * s + 4 * m


def bwd_bytes(m, n, s):
    return 3 * m * n * s + 2 * n * s + 4 * m


def rotating_sets(m, n, s, tensors_per_set):
    return max(2, min(8, -(-3 * L2_BYTES // max(1, tensors_per_set * m * n * s))))


def make_inputs(m, n, dtype, device, count):
    sets = []
    for _ in range(count):
        x = torch.randn(m, n, device=device, dtype=torch.float32).mul_(1.5).to(dtype)
        dy = torch.randn(m, n, device=device, dtype=torch.float32).to(dtype)
        sets.append((x, dy))
    w = (1 + 0.5 * torch.randn(n, device=device)).to(dtype)
    return sets, w


def cycle(items):
    state = {"i": 0}

    def nxt():
        state["i"] = (state["i"] + 1) % len(items)
        return items[state["i"]]

    return nxt


def bench_fwd(fn, sets, w, dry):
    nxt = cycle(sets)

    def run():
        x, _ = nxt()
        fn(x, w)

    with torch.no_grad():
        return time_ms(run, dry)


def bench_bwd_autograd(fn, sets, w, dry):
    graphs = []
    for x, dy in sets:
        xg = x.clone().requires_grad_(True)
        wg = w.clone().requires_grad_(True)
        graphs.append((fn(xg, wg), xg, wg, dy))
    nxt = cycle(graphs)

    def run():
        y, xg, wg, dy = nxt()
        torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)

    return time_ms(run, dry)


def bench_bwd_direct(strategy, sets, w, dry, **kwargs):
    prepared = []
    for x, dy in sets:
        _, x2d, rstd = rmsnorm_forward(x, w, 1e-6)
        prepared.append((dy, x2d, rstd))
    nxt = cycle(prepared)

    def run():
        dy, x2d, rstd = nxt()
        strategy(dy, x2d, w, rstd, **kwargs)

    return time_ms(run, dry)


def kernel_reports():
    """Registers / spills of every compiled variant of our kernels (what ptxas made of them)."""
    from kernels.triton_backward.column_sum import column_sum_kernel
    from kernels.triton_forward import rmsnorm_fwd_row_kernel, rmsnorm_fwd_rows_kernel

    out = []
    for fn in (rmsnorm_fwd_row_kernel, rmsnorm_fwd_rows_kernel, atomic.rmsnorm_bwd_atomic_kernel,
               workspace.rmsnorm_bwd_workspace_kernel, persistent.rmsnorm_bwd_persistent_kernel, column_sum_kernel):
        for caches in getattr(fn, "device_caches", {}).values():
            for key, compiled in caches[0].items():
                try:
                    compiled._init_handles()
                    md = compiled.metadata
                    consts = {k: v for k, v in (getattr(compiled, "constants", None) or {}).items()} if False else {}
                    out.append({"kernel": fn.__name__, "n_regs": compiled.n_regs, "n_spills": compiled.n_spills,
                                "num_warps": md.num_warps, "num_stages": md.num_stages,
                                "shared": md.shared, "key": str(key)[-160:], **consts})
                except Exception as exc:  # report what could be read
                    out.append({"kernel": fn.__name__, "error": repr(exc)[:200]})
    return out


def persistent_grid(n, dtype_size):
    """Candidate (tile, k, stages) for the persistent backward at row width n."""
    block = max(16, triton.next_power_of_2(n))
    candidates = []
    for rows in (1, 2, 4, 8, 16, 32, 64):
        elements = rows * block
        if elements > 16384 or (block >= 1024 and rows > 4) or (elements < 2048 and rows < 64 and block < 1024):
            continue
        for warps in (4, 8, 16):
            if elements // (32 * warps) < 4:  # under 4 elements per thread: narrow loads
                continue
            for k in (1, 2, 3, 4, 6, 8):
                if k * warps > 64:
                    continue
                for stages in (1, 2, 3):
                    candidates.append((BackwardTile(rows=rows, block=block, num_warps=warps), k, stages))
    return candidates


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true", help="CPU/interpreter smoke run (tiny shapes)")
    parser.add_argument("--check", action="store_true", help="run the correctness sweep on the device first")
    parser.add_argument("--peers", action="store_true", help="time liger and quack too, where importable")
    parser.add_argument("--grid", action="store_true", help="grid-search the persistent backward")
    parser.add_argument("--grid-shapes", default="", help="shapes for the grid search (default: the issue's)")
    parser.add_argument("--shapes", default="", help="MxN,MxN (default: issue shapes + short rows)")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--budget-s", type=float, default=480, help="stop starting new work after this")
    args = parser.parse_args(argv)
    started = time.time()
    os.makedirs(OUT, exist_ok=True)
    device = torch.device("cpu" if args.dry else "cuda")
    dtype = getattr(torch, args.dtype)
    s = torch.empty((), dtype=dtype).element_size()
    parse = lambda text: [tuple(int(v) for v in p.lower().split("x")) for p in text.split(",") if p]  # noqa: E731
    shapes = parse(args.shapes) or (ISSUE_SHAPES + SHORT_SHAPES if not args.dry else [(64, 1024), (16, 4096)])
    grid_shapes = parse(args.grid_shapes) or (ISSUE_SHAPES if not args.dry else [(64, 1024)])
    load_all()
    result = {"device": torch.cuda.get_device_name() if not args.dry else "cpu (interpreter; timings meaningless)",
              "torch": torch.__version__, "triton": triton.__version__, "dtype": args.dtype,
              "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "rows": [], "grid": [], "check": None}
    log = open(os.path.join(OUT, "tune.log"), "w")

    def say(text):
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    if args.check:
        from kernels.check import format_check_table, run_check

        slow_to_compile = ("torch-compile", "quack")  # one compile per shape and dtype: two shapes, bf16
        names = [n for n in REGISTRY.names() if n not in slow_to_compile]
        rows = run_check(names, device=device) if not args.dry else run_check(["triton", "triton-persistent"])
        if not args.dry:
            rows += run_check(list(slow_to_compile), dtypes=("bfloat16",), shapes=((1024, 4096), (300, 12289)),
                              device=device)
        result["check"] = rows
        say(format_check_table(rows))
        say(f"check done at {time.time() - started:.0f}s")

    ceiling = copy_ceiling_GBps(device, args.dry)
    result["ceiling_GBps"] = ceiling
    say(f"copy ceiling: {ceiling:.0f} GB/s  ({result['device']}, {args.dtype})")

    fwd_impls = ["triton", "torch-native"] + (["liger", "quack"] if args.peers else [])
    bwd_impls = ["triton-persistent", "triton-workspace", "triton-atomic", "torch-native"] + (
        ["liger", "quack"] if args.peers else [])
    for m, n in shapes:
        if time.time() - started > args.budget_s:
            say(f"budget reached; skipping {m}x{n} and later")
            break
        count = rotating_sets(m, n, s, 2)
        sets, w = make_inputs(m, n, dtype, device, count)
        row = {"M": m, "N": n, "sets": count}
        for name in fwd_impls:
            impl = REGISTRY.get(name)
            if impl.unavailable_reason():
                continue
            try:
                ms = bench_fwd(impl.fn, sets, w, args.dry)
                row[f"fwd:{name}"] = fwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
            except Exception as exc:
                say(f"fwd {name} {m}x{n} failed: {exc!r}"[:300])
        for variant in ("one-row", "multi-row"):
            try:
                ms = bench_fwd(lambda x, w: rmsnorm_forward(x, w, 1e-6, kernel=variant), sets, w, args.dry)
                row[f"fwd:triton[{variant}]"] = fwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
            except Exception as exc:
                say(f"fwd {variant} {m}x{n} failed: {exc!r}"[:300])
        for name in bwd_impls:
            impl = REGISTRY.get(name)
            if impl.unavailable_reason():
                continue
            try:
                ms = bench_bwd_autograd(impl.fn, sets, w, args.dry)
                row[f"bwd:{name}"] = bwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
            except Exception as exc:
                say(f"bwd {name} {m}x{n} failed: {exc!r}"[:300])
        for label, strategy in (("persistent", persistent.persistent_backward),):
            ms = bench_bwd_direct(strategy, sets, w, args.dry)
            row[f"bwd:{label}[direct]"] = bwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
        result["rows"].append(row)
        say(json.dumps({k: (round(v) if isinstance(v, float) else v) for k, v in row.items()}))
        del sets
        torch.cuda.empty_cache() if not args.dry else None

    if args.grid:
        for m, n in grid_shapes:
            if time.time() - started > args.budget_s:
                say(f"budget reached; grid skips {m}x{n} and later")
                break
            sets, w = make_inputs(m, n, dtype, device, rotating_sets(m, n, s, 2))
            best = None
            for tile, k, stages in persistent_grid(n, s):
                if time.time() - started > args.budget_s:
                    break
                try:
                    ms = bench_bwd_direct(persistent.persistent_backward, sets, w, args.dry,
                                          tile=tile, per_sm=k, stages=stages)
                except Exception as exc:
                    say(f"grid {m}x{n} {tile} k={k} st={stages} failed: {exc!r}"[:300])
                    continue
                gbps = bwd_bytes(m, n, s) / (ms * 1e-3) / 1e9
                entry = {"M": m, "N": n, "rows": tile.rows, "warps": tile.num_warps, "k": k, "stages": stages,
                         "GBps": gbps}
                result["grid"].append(entry)
                if best is None or gbps > best["GBps"]:
                    best = entry
            default = backward_tile(n)
            say(f"grid {m}x{n}: best {best}  (default rows={default.rows} warps={default.num_warps} "
                f"k={persistent.programs_per_sm(n)})")
            del sets
            torch.cuda.empty_cache() if not args.dry else None

    result["kernels"] = kernel_reports() if not args.dry else []
    for r in result["kernels"]:
        if r.get("n_spills"):
            say(f"SPILLS: {r}")
    with open(os.path.join(OUT, "tune.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)

    cols = ["fwd:triton", "fwd:torch-native", "fwd:liger", "fwd:quack", "bwd:triton-persistent",
            "bwd:triton-workspace", "bwd:triton-atomic", "bwd:torch-native", "bwd:liger", "bwd:quack"]
    say(f"\nGB/s ({args.dtype}; ceiling {ceiling:.0f} GB/s; % of ceiling in brackets)")
    say(f"{'MxN':>13} " + " ".join(f"{c.split(':')[0] + ':' + c.split(':')[1][:10]:>16}" for c in cols))
    for row in result["rows"]:
        cells = []
        for c in cols:
            v = row.get(c)
            cells.append(f"{v:>9.0f} ({100 * v / ceiling:>3.0f}%)" if v else f"{'-':>16}")
        say(f"{row['M']:>6}x{row['N']:<6} " + " ".join(cells))
    say(f"total {time.time() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
