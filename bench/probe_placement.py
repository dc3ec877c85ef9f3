"""Device probe (issue 15): is the bimodal timing at M = 65536 a property of the input buffer or of the kernel?

Rows of the M = 65536 forwards in the committed runs have q1 near 97 % of the ceiling and a median near 88 %
(results/nvidia-h200-2026-12-04-models-allpeers-fp16-partial.json): with two rotating input sets, half the calls
are fast and half slow. This probe allocates ``--buffers`` inputs of one shape and times every implementation on
each buffer on its own (median of ``--reps`` calls on that buffer, the GPU kept busy between calls as the engine
does), then a plain device copy of each buffer. If one buffer is slow for every implementation, the cause is where
the buffer lies in memory, not the kernel; if one implementation is slow on every buffer, it is the kernel.

    python3 bench/probe_placement.py [--m 65536] [--n 2048,4096] [--dtype bfloat16] [--impl triton,torch-native,...]
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

from engine.timing import ForwardWorkload, device_mallocs, measure  # noqa: E402
from rmsnorm_kernels.registry import default_registry  # noqa: E402
from rmsnorm_kernels.triton_forward import _forward  # noqa: E402


def triton_direct(x, w, eps):
    """Our forward without launch plans or the native node: the same compiled kernel, launched from Python with
    a fresh rstd each call (is a slow mode the kernel's, or the replay path's?)."""
    return _forward(x, w, eps, "auto", None, False)[0]


def time_calls(fn, reps: int) -> float:
    """Median µs of ``reps`` calls of ``fn``, each timed with events after a short spin (as the engine times); each
    output is dropped before the next call, so every call writes the same output block (unlike `sequence`)."""
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        torch.cuda._sleep(200_000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return statistics.median(samples)


def sequence(fn, xs: list, calls: int) -> dict:
    """µs of each of ``calls`` calls alternating over ``xs`` as the engine's rotating sets do (the output kept
    until the next call returns, so two output blocks alternate too): is a slow call tied to one set, or to time?
    With the cudaMalloc calls made meanwhile (`engine.timing.device_mallocs`)."""
    device = torch.device("cuda")
    out = fn(xs[0])
    torch.cuda.synchronize()
    before = device_mallocs(device)
    samples = []
    for i in range(calls):
        torch.cuda._sleep(200_000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn(xs[i % len(xs)])
        end.record()
        end.synchronize()
        samples.append(round(start.elapsed_time(end) * 1e3, 1))
    del out
    return {"us": samples, "device_mallocs": device_mallocs(device) - before}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=65536)
    p.add_argument("--n", default="2048,8192")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--impl", default="triton,torch-native,liger")
    p.add_argument("--buffers", type=int, default=6)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--history", action="store_true", help="probe again after engine cases at 4096 and 16384 rows")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bench/logs"))
    args = p.parse_args()
    registry = default_registry()
    impls = [name for name in args.impl.split(",") if name in registry and registry.get(name).unavailable_reason() is None]
    fns = {name: registry.get(name).fn for name in impls}
    if "triton" in fns:
        fns["triton-direct"] = triton_direct
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "M": args.m, "dtype": args.dtype,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "reps": args.reps, "shapes": {}}
    report["shapes"] = probe(args, fns)
    if args.history:
        # what a long run does before it reaches M = 65536: the engine's cases at 4096 and 16384 rows, both passes
        from engine.runner import run_sweep

        t0 = time.perf_counter()
        run = run_sweep({"implementations": ["torch-native", "liger", "triton", "triton-persistent"], "passes": ["fwd", "bwd"],
                         "dtypes": [args.dtype], "M": [4096, 16384], "N": [2048, 4096, 5120, 8192], "repetitions": 5,
                         "warmup": 2})
        print(f"history: {len(run.rows)} engine cases at M 4096 and 16384 in {time.perf_counter() - t0:.0f} s")
        report["after_history"] = probe(args, fns)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"probe-placement-{time.strftime('%Y-%m-%d')}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


def probe(args, fns: dict) -> dict:
    dtype = getattr(torch, args.dtype)
    shapes = {}
    for n in (int(v) for v in args.n.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(n)
        xs = [torch.randn(args.m, n, dtype=dtype, device="cuda", generator=gen) for _ in range(args.buffers)]
        w = (1 + 0.1 * torch.randn(n, device="cuda", generator=gen)).to(dtype)
        moved = 2 * args.m * n * xs[0].element_size()
        table = {}
        with torch.no_grad():
            for name, fn in fns.items():
                table[name] = [time_calls(lambda x=x: fn(x, w, 1e-6), args.reps) for x in xs]
            # the engine's own timing over the first two buffers (its two rotating sets at this size): q1 vs median
            engine = {}
            for name, fn in fns.items():
                st = measure(ForwardWorkload(fn, xs[:2], w, 1e-6), 20, 5, torch.device("cuda"))
                engine[name] = {"q1_us": st.q1_us, "median_us": st.median_us, "q3_us": st.q3_us}
            sequences = {name: sequence(lambda x, fn=fn: fn(x, w, 1e-6), xs[:2], 40) for name, fn in fns.items()}
            ys = [torch.empty_like(x) for x in xs]
            table["copy"] = [time_calls(lambda x=x, y=ys[k]: y.copy_(x), args.reps) for k, x in enumerate(xs)]
        addresses = [hex(x.data_ptr()) for x in xs]
        shapes[str(n)] = {"us": table, "GBps": {k: [moved / (u * 1e-6) / 1e9 for u in v] for k, v in table.items()},
                          "addresses": addresses, "engine_two_sets": engine, "alternating_calls_us": sequences}
        print(f"M={args.m} N={n} {args.dtype}: GB/s per buffer ({', '.join(addresses)})")
        for name, us in table.items():
            print(f"  {name:14} " + " ".join(f"{moved / (u * 1e-6) / 1e9:6.0f}" for u in us))
        for name, seq in sequences.items():
            fast = min(seq["us"])
            print(f"  sequence {name:12} " + "".join("S" if v > 1.05 * fast else "f" for v in seq["us"])
                  + f"  (f ≤ {1.05 * fast:.0f} µs; cudaMalloc {seq['device_mallocs']})")
        for name, st in engine.items():
            print(f"  engine {name:14} q1 {st['q1_us']:.1f} median {st['median_us']:.1f} q3 {st['q3_us']:.1f} µs")
        del xs, ys
        torch.cuda.empty_cache()
    return shapes


if __name__ == "__main__":
    sys.exit(main())
