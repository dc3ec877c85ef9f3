"""Device script (issue 7, third device session): the measurements the next kernel choices depend on, in one
call, written to $OUT/probe.json and printed as they come.

1. wide rows (N = 16384): the persistent backward's remedies for register spills — γ reloaded per row,
   the two-pass column-halves kernel — at 16/32 warps and 1/2 pipeline stages, against today's tile;
   each variant checked against the fp64 reference on the GPU first;
2. small-M backward (M·N ≈ 32M and below): the persistent kernel and the column sum timed apart (where the
   fixed ~10 µs goes), and a grid over k × stages × warps around today's tile;
3. forward at short rows and 65536×8192: the multi-row kernel at explicit (ROWS, warps), beside
   torch.compile, whose generated Triton source is saved ($OUT/inductor_*.py) to read offline;
4. (second call, ``--only pdl,fwdkinds``) the column sum: its blocks, and programmatic dependent launch
   on/off for the persistent and workspace backward; every forward kernel (one-row, multi-row, chunked;
   autotuned per size class of M) beside torch.compile at N 512 … 16384 × M 4096 … 65536.

    python3 bench/probe_tiles.py [--dry] [--budget-s 480]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if "--dry" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

import tune_kernels as tk  # noqa: E402
from rmsnorm_kernels.registry import REGISTRY, load_all  # noqa: E402
from rmsnorm_kernels.triton_backward import persistent  # noqa: E402
from rmsnorm_kernels.triton_backward.column_sum import column_sum  # noqa: E402
from rmsnorm_kernels.triton_backward.dx import backward_tile  # noqa: E402
from rmsnorm_kernels.segments import Segments, next_power_of_two  # noqa: E402
from rmsnorm_kernels.triton_forward import rmsnorm_forward, rmsnorm_fwd_rows_kernel, size_class  # noqa: E402
from rmsnorm_kernels.triton_mode import sm_count  # noqa: E402

OUT = os.environ.get("OUT", "/tmp/probe-out")


def wide_variants(n):
    base = replace(backward_tile(n), reload_weight=False, column_halves=False, rows=1)
    out = {"held γ 16w st1 (v3)": (replace(base, num_warps=16), 1)}
    for warps in (16, 32):
        for stages in (1, 2):
            out[f"reload γ {warps}w st{stages}"] = (replace(base, num_warps=warps, reload_weight=True), stages)
            out[f"halves {warps}w st{stages}"] = (replace(base, num_warps=warps, column_halves=True), stages)
    return out


def small_m_variants(n):
    base = backward_tile(n)
    out = {"tuned": (base, None, None)}
    for k in (1, 2, 3, 4):
        for stages in (2, 3):
            for warps in sorted({base.num_warps, base.num_warps * 2}):
                if k * warps > 64 or warps > 32:
                    continue
                out[f"rows{base.rows} {warps}w k{k} st{stages}"] = (replace(base, num_warps=warps), k, stages)
    return out


def timed_parts(sets, w, dry):
    """GPU time (ms) of today's persistent backward (kernel + column sum) and of the column sum alone."""
    prepared = []
    for x, dy in sets:
        _, x2d, rstd = rmsnorm_forward(x, w, 1e-6)
        prepared.append((dy, x2d, w, rstd))
    nxt = tk.cycle(prepared)
    m, n = prepared[0][1].shape
    _, _, programs = persistent.persistent_plan(m, n, sm_count(w.device))
    partial = torch.randn(programs, n, device=w.device)
    return (tk.time_ms(lambda: persistent.persistent_backward(*nxt()), dry),
            tk.time_ms(lambda: column_sum(partial, w.dtype), dry))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--budget-s", type=float, default=480)
    parser.add_argument("--skip", default="", help="comma list of parts to skip: wide, small, fwd, inductor")
    parser.add_argument("--only", default="", help="comma list of the parts to run (adds: pdl, fwdkinds)")
    args = parser.parse_args(argv)
    dry = args.dry
    parts = {"wide", "small", "fwd", "inductor", "pdl", "fwdkinds"}
    skip = set(filter(None, args.skip.split(","))) | ({"pdl", "fwdkinds"} if not args.only else
                                                       parts - set(args.only.split(",")))
    started = time.time()
    os.makedirs(OUT, exist_ok=True)
    device = torch.device("cpu" if dry else "cuda")
    load_all()
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": "cpu (dry: timings meaningless)" if dry
              else torch.cuda.get_device_name(), "torch": torch.__version__, "git_commit": os.environ.get("GIT_COMMIT"),
              "wide": [], "small_m": [], "fwd": [], "pdl": [], "column_sum": [], "fwd_kinds": [], "errors": []}

    def over():
        return time.time() - started > args.budget_s

    def save():
        with open(os.path.join(OUT, "probe.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)

    ceiling = tk.copy_ceiling_GBps(device, dry)
    report["ceiling_GBps"] = ceiling
    print(f"copy ceiling {ceiling:.0f} GB/s", flush=True)
    dtype, s = torch.bfloat16, 2

    def gbps(bytes_, ms):
        return bytes_ / (ms * 1e-3) / 1e9

    def show(row):
        """One result row as it comes: GB/s with % of the ceiling, other values as they are."""
        print(json.dumps({k: (f"{v:.0f} ({100 * v / ceiling:.0f}%)" if isinstance(v, float) else v)
                          for k, v in row.items()}), flush=True)

    # 1. wide rows
    if "wide" not in skip:
        n = 16384 if not dry else 64
        for label, (tile, stages) in wide_variants(n).items():
            tk.verify(label, lambda x, w_, dy, tile=tile, stages=stages: persistent.persistent_backward(
                dy, *rmsnorm_forward(x, w_, 1e-6)[1:2], w_, rmsnorm_forward(x, w_, 1e-6)[2], tile=tile, stages=stages),
                300 if not dry else 5, n, device, lambda t: (print(t, flush=True),
                                                             "FAIL" in t and report["errors"].append(t)))
        for m in ((4096, 16384, 65536) if not dry else (8,)):
            sets, w = tk.make_inputs(m, n, dtype, device, tk.rotating_sets(m, n, s, 2))
            row = {"shape": f"{m}x{n}"}
            for label, (tile, stages) in wide_variants(n).items():
                try:
                    ms = tk.bench_bwd_direct(persistent.persistent_backward, sets, w, dry, tile=tile, stages=stages)
                    row[label] = gbps(tk.bwd_bytes(m, n, s), ms)
                except Exception as exc:
                    row[label] = repr(exc)[:200]
            for name in ("torch-compile", "triton-persistent"):
                try:
                    row[f"autograd {name}"] = gbps(tk.bwd_bytes(m, n, s),
                                                   tk.bench_bwd_autograd(REGISTRY.get(name).fn, sets, w, dry))
                except Exception as exc:
                    row[f"autograd {name}"] = repr(exc)[:200]
            report["wide"].append(row)
            show(row)
            del sets
            save()
        report["kernels"] = tk.kernel_reports()
        save()

    # 2. small-M backward
    if "small" not in skip:
        shapes = ((4096, 8192), (16384, 2048), (4096, 4096), (4096, 2048), (4096, 1024), (32768, 1024)) if not dry \
            else ((16, 64),)
        for m, n in shapes:
            if over():
                break
            sets, w = tk.make_inputs(m, n, dtype, device, tk.rotating_sets(m, n, s, 2))
            row = {"shape": f"{m}x{n}", "tuned tile": asdict(backward_tile(n))}
            t_all, t_sum = timed_parts(sets, w, dry)
            row["tuned total ms"], row["column sum ms"] = t_all, t_sum
            best = (0.0, "")
            for label, (tile, k, stages) in small_m_variants(n).items():
                if over():
                    break
                try:
                    ms = tk.bench_bwd_direct(persistent.persistent_backward, sets, w, dry, tile=tile, per_sm=k,
                                             stages=stages)
                    row[label] = gbps(tk.bwd_bytes(m, n, s), ms)
                    best = max(best, (row[label], label))
                except Exception as exc:
                    row[label] = repr(exc)[:200]
            row["best"] = best
            report["small_m"].append(row)
            print(json.dumps({"shape": row["shape"], "tuned": row.get("tuned"), "best": best,
                              "total ms": t_all, "column sum ms": t_sum}, default=str), flush=True)
            del sets
            save()

    # 3. forward at short rows and 65536×8192
    if "fwd" not in skip:
        shapes = ((65536, 512), (65536, 1024), (16384, 1024), (4096, 1024), (65536, 8192), (16384, 512)) if not dry \
            else ((64, 64),)
        for m, n in shapes:
            if over():
                break
            sets, w = tk.make_inputs(m, n, dtype, device, tk.rotating_sets(m, n, s, 1))
            block = next_power_of_two(n)
            row = {"shape": f"{m}x{n}"}
            for name in ("triton", "torch-compile", "liger"):
                try:
                    row[name] = gbps(tk.fwd_bytes(m, n, s), tk.bench_fwd(REGISTRY.get(name).fn, sets, w, dry))
                except Exception as exc:
                    row[name] = repr(exc)[:120]
            for rows in (1, 2, 4, 8, 16, 32):
                if rows * block > 32768 or rows * block < 1024:
                    continue
                for warps in (1, 2, 4, 8, 16):
                    if rows * block // (32 * warps) < 4 or rows * block // (32 * warps) > 64:
                        continue
                    nxt = tk.cycle(sets)
                    rstd = torch.empty(m, device=device)
                    y = torch.empty(m, n, device=device, dtype=dtype)

                    def run(rows=rows, warps=warps):
                        x, _ = nxt()
                        rmsnorm_fwd_rows_kernel[(-(-m // rows),)](x, w, y, rstd, m, x.stride(0), y.stride(0), n, 1e-6,
                                                                   size_class(m), ROWS=rows, num_warps=warps,
                                                                   **Segments(block, 0, 0, n).constants())
                    try:
                        row[f"rows{rows} {warps}w"] = gbps(tk.fwd_bytes(m, n, s), tk.time_ms(run, dry))
                    except Exception as exc:
                        row[f"rows{rows} {warps}w"] = repr(exc)[:120]
            report["fwd"].append(row)
            show(row)
            del sets
            save()

    # 5. column sum blocks, dependent launch on/off
    if "pdl" not in skip:
        from rmsnorm_kernels.triton_backward import workspace

        for g, n in (((132, 8192), (132, 2048), (264, 1024), (132, 16384), (128, 4096)) if not dry else ((5, 64),)):
            partial = torch.randn(g, n, device=device)
            row = {"G x N": f"{g}x{n}"}
            for block_g in (32, 64, 128, 256):
                for block_n in (16, 32, 64, 128):
                    for warps in (4, 8):
                        if block_g * block_n // (32 * warps) < 1:
                            continue
                        row[f"g{block_g} n{block_n} {warps}w"] = 1e3 * tk.time_ms(
                            lambda: column_sum(partial, torch.bfloat16, blocks=(block_g, block_n), num_warps=warps,
                                               pdl=False), dry)
            best = min((v, k) for k, v in row.items() if isinstance(v, float))
            row["best"] = best
            report["column_sum"].append(row)
            print(json.dumps({"G x N": row["G x N"], "µs default": 1e3 * tk.time_ms(
                lambda: column_sum(partial, torch.bfloat16, pdl=False), dry), "best": best}), flush=True)
            save()
        for m, n in (((4096, 8192), (16384, 2048), (4096, 4096), (32768, 1024), (4096, 16384), (16384, 8192),
                      (4096, 1024), (65536, 4096)) if not dry else ((16, 64),)):
            sets, w = tk.make_inputs(m, n, dtype, device, tk.rotating_sets(m, n, s, 2))
            row = {"shape": f"{m}x{n}"}
            for name, fn in (("persistent", persistent.persistent_backward), ("workspace", workspace.workspace_backward)):
                for pdl in (False, True):
                    try:
                        row[f"{name} pdl={pdl}"] = gbps(tk.bwd_bytes(m, n, s),
                                                        tk.bench_bwd_direct(fn, sets, w, dry, pdl=pdl and not dry))
                    except Exception as exc:
                        row[f"{name} pdl={pdl}"] = repr(exc)[:200]
            report["pdl"].append(row)
            show(row)
            del sets
            save()

    # 6. every forward kernel, per size class
    if "fwdkinds" not in skip:
        for n in ((512, 1024, 2048, 4096, 8192, 16384) if not dry else (64,)):
            for m in ((4096, 16384, 65536) if not dry else (8,)):
                if over():
                    break
                sets, w = tk.make_inputs(m, n, dtype, device, tk.rotating_sets(m, n, s, 1))
                row = {"shape": f"{m}x{n}"}
                kinds = ("one-row", "multi-row", "chunked") if n >= 1024 else ("multi-row",)
                for kind in kinds:
                    try:
                        row[kind] = gbps(tk.fwd_bytes(m, n, s), tk.bench_fwd(
                            lambda x, w_, kind=kind: rmsnorm_forward(x, w_, 1e-6, kernel=kind), sets, w, dry))
                    except Exception as exc:
                        row[kind] = repr(exc)[:200]
                for name in ("torch-compile", "liger"):
                    try:
                        row[name] = gbps(tk.fwd_bytes(m, n, s), tk.bench_fwd(REGISTRY.get(name).fn, sets, w, dry))
                    except Exception as exc:
                        row[name] = repr(exc)[:80]
                report["fwd_kinds"].append(row)
                show(row)
                del sets
                save()
        from rmsnorm_kernels.triton_forward import _CHOSEN_CONFIGS

        report["forward_autotuner_choices"] = {str(k[:4]): str(v) for k, v in _CHOSEN_CONFIGS.items()}
        print(json.dumps(report["forward_autotuner_choices"]), flush=True)

    # 4. Inductor's kernels, to read offline
    if "inductor" not in skip and not dry:
        from torch._inductor.utils import run_and_get_code

        for m, n, what in ((65536, 1024, "fwd"), (65536, 8192, "fwd"), (65536, 16384, "bwd"), (4096, 8192, "bwd")):
            if over():
                break
            try:
                torch._dynamo.reset()
                x = torch.randn(m, n, device=device, dtype=dtype, requires_grad=what == "bwd")
                w = torch.randn(n, device=device, dtype=dtype, requires_grad=what == "bwd")
                fn = torch.compile(REGISTRY.get("eager").fn)
                if what == "fwd":
                    with torch.no_grad():
                        _, code = run_and_get_code(fn, x, w)
                else:
                    dy = torch.randn_like(x)
                    _, code = run_and_get_code(lambda: torch.autograd.grad(fn(x, w), (x, w), dy))
                with open(os.path.join(OUT, f"inductor_{what}_{m}x{n}.py"), "w") as f:
                    f.write("\n\n# ======== next module\n".join(code))
                print(f"inductor code {what} {m}x{n}: {sum(len(c) for c in code)} chars", flush=True)
            except Exception as exc:
                report["errors"].append(f"inductor {what} {m}x{n}: {exc!r}"[:300])
                print(report["errors"][-1], flush=True)
    report["elapsed_s"] = time.time() - started
    save()
    print(f"probe done in {report['elapsed_s']:.0f}s, errors: {report['errors']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
