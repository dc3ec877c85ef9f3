"""Issue 37: where the Ray actor's extra time per case goes, with the service taken out.

`bench/fleet_overhead.py` found the engine itself slower inside the Ray actor than in the local worker process
(H200, 2026-12-07: 221 vs 177 ms per case, the time between a row's started_at and ended_at). This script runs the
same cases through `engine.runner.iter_run` in two places that differ only in what hosts them:

- ``plain``: a spawned process, as the service's local worker is (`app.worker_child.get_ready`);
- ``ray``: a Ray actor placed as the fleet places ours (``num_gpus=1, num_cpus=0``, `use_the_node_threads`,
  `undo_worker_niceness` unless ``--keep-nice``).

Rounds alternate between them; the last round of each runs under cProfile, and each side reports what could make
host work slower: torch's threads, the CPU set, the nice value, Python's thread count and switch interval, the
environment variables Ray sets. The per-case engine time is the rows' own (ended_at − started_at).

    python bench/ray_engine_probe.py --ray 127.0.0.1:6391 --device cuda:0 --out probe.json
    python bench/ray_engine_probe.py --start-cluster              # a one-node cluster here (a fake GPU on a CPU)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing
import os
import pstats
import statistics
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_BENCH = {}


def _host_facts() -> dict:
    import torch

    return {
        "pid": os.getpid(),
        "torch_threads": torch.get_num_threads(),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "nice": os.nice(0),
        "python_threads": threading.active_count(),
        "switch_interval_s": sys.getswitchinterval(),
        "profile_hook": sys.getprofile() is not None,
        "trace_hook": sys.gettrace() is not None,
        "env": {
            k: v
            for k, v in os.environ.items()
            if k.startswith(("OMP_", "MKL_", "CUDA_", "PYTORCH_", "TORCH", "TRITON", "RAY_", "NCCL_"))
            and "TOKEN" not in k
        },
    }


def measure(label: str, sweep: dict, profile: bool) -> dict:
    """One round: every case of ``sweep`` through the engine on ``label``, in this process (its bench kept)."""
    from app.worker_child import get_ready
    from engine.runner import iter_run, plan

    if label not in _BENCH:
        _BENCH[label] = get_ready(label, (), int(os.environ.get("RMSNORM_CEILING_BYTES", 1 << 28)), None)
    bench = _BENCH[label]
    cases = plan(sweep, bench.registry)
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    rows = [
        item for item in iter_run(sweep, device=str(bench.device), bench=bench, registry=bench.registry, cases=cases)
    ][1:]
    if profiler:
        profiler.disable()
    wall = time.perf_counter() - start
    out = {
        "wall_s": wall,
        "engine_s": sum(r.ended_at - r.started_at for r in rows),
        "cases": len(rows),
        "not_ok": sum(r.status not in ("ok", "skipped") for r in rows),
        "per_case_ms": [round((r.ended_at - r.started_at) * 1e3, 3) for r in rows],
        "host": _host_facts(),
    }
    if profiler:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
        out["profile"] = text.getvalue()
    return out


class ProbeActor:
    def __init__(self, keep_nice: bool) -> None:
        from app.ray_actor import undo_worker_niceness, use_the_node_threads

        use_the_node_threads()
        if not keep_nice:  # as `app.ray_actor.GpuActor` starts
            undo_worker_niceness()

    def measure(self, label: str, sweep: dict, profile: bool) -> dict:
        return measure(label, sweep, profile)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--ray", help="address of a running Ray cluster")
    where.add_argument("--start-cluster", action="store_true", help="a one-node cluster here, one (fake) GPU")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--impls", default="triton,triton-persistent,torch-native")
    parser.add_argument("--dtypes", default="bfloat16")
    parser.add_argument("--m", default="4096,16384")
    parser.add_argument("--n", default="1024,4096")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--keep-nice", action="store_true", help="leave the actor at Ray's nice value (15)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sweep = {
        "implementations": args.impls.split(","),
        "passes": ["fwd", "bwd"],
        "dtypes": args.dtypes.split(","),
        "M": [int(m) for m in args.m.split(",")],
        "N": [int(n) for n in args.n.split(",")],
        "repetitions": args.reps,
        "warmup": 3,
    }
    import ray

    cluster = None
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    address = args.ray
    if args.start_cluster:
        from ray.cluster_utils import Cluster

        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "num_gpus": 1, "include_dashboard": False, "object_store_memory": 80 << 20},
        )
        address = cluster.address
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    actor = ray.remote(num_gpus=1, num_cpus=0)(ProbeActor).remote(args.keep_nice)
    label = "cuda:0" if args.device.startswith("cuda") else "cpu"
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    sides = {
        "plain": lambda profile: pool.submit(measure, label, sweep, profile).result(),
        "ray": lambda profile: ray.get(actor.measure.remote(label, sweep, profile)),
    }
    results: dict = {"plain": [], "ray": []}
    try:
        for name, side in sides.items():  # warm-up: start, compile, first allocations
            warm = side(False)
            print(f"warm-up {name}: {warm['cases']} cases, {warm['wall_s']:.2f} s", flush=True)
        for round_ in range(args.rounds):
            order = ["plain", "ray"] if round_ % 2 == 0 else ["ray", "plain"]
            for name in order:
                result = sides[name](round_ >= args.rounds - 2)
                results[name].append(result)
                print(
                    f"round {round_ + 1} {name:5s}: {result['engine_s'] / result['cases'] * 1e3:8.2f} ms/case in "
                    f"the engine ({result['cases']} cases, {result['not_ok']} not ok)",
                    flush=True,
                )
    finally:
        pool.shutdown()
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()

    def per_case(name: str) -> float:
        return statistics.median(r["engine_s"] / r["cases"] for r in results[name]) * 1e3

    summary = {
        "sweep": sweep,
        "rounds": args.rounds,
        "device": args.device,
        "keep_nice": args.keep_nice,
        "plain_engine_ms_per_case": per_case("plain"),
        "ray_engine_ms_per_case": per_case("ray"),
        "host": {name: results[name][-1]["host"] for name in results},
        "rounds_detail": results,
    }
    summary["overhead_pct"] = 100 * (summary["ray_engine_ms_per_case"] / summary["plain_engine_ms_per_case"] - 1)
    print(
        f"\nengine time per case (median of {args.rounds}): plain {summary['plain_engine_ms_per_case']:.2f} ms, "
        f"Ray actor {summary['ray_engine_ms_per_case']:.2f} ms → {summary['overhead_pct']:+.1f} %"
    )
    for name in results:
        facts = {k: v for k, v in summary["host"][name].items() if k != "env"}
        print(f"{name}: {facts}\n  env: {summary['host'][name]['env']}")
    for name in results:
        print(f"\n--- {name}: last round's profile (top by own time)\n" + results[name][-1]["profile"][:4000])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
