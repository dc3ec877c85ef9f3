"""Issue 37: where the Ray actor's extra time per case goes, with the service taken out.

`bench/fleet_overhead.py` found the engine itself slower inside the Ray actor than in the local worker process
(H200, 2026-12-07: 221 vs 177 ms per case, the time between a row's started_at and ended_at). This script runs the
same cases through `engine.runner.iter_run` in two places that differ only in what hosts them:

- ``plain``: a spawned process, as the service's local worker is (`app.worker_child.get_ready`);
- ``ray``: a Ray actor placed as the fleet places ours (``num_gpus=1, num_cpus=0``, `use_the_node_threads`,
  `undo_worker_niceness` unless ``--keep-nice``).

Rounds alternate between them; the last round runs under cProfile (and is left out of the medians), and each side reports what could make
host work slower: torch's threads, the CPU set, the nice value, Python's thread count and switch interval, the
environment variables Ray sets. The per-case engine time is the rows' own (ended_at − started_at).

    python bench/ray_engine_probe.py --ray 127.0.0.1:6391 --device cuda:0 --out probe.json
    python bench/ray_engine_probe.py --start-cluster              # a one-node cluster here (a fake GPU on a CPU)
"""

from __future__ import annotations

import cProfile
import io
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
sys.path.insert(0, str(ROOT / "bench"))

from fleet_overhead import interleaved, one_node_cluster, sweep_body, sweep_parser, write_summary  # noqa: E402

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
    parser = sweep_parser(__doc__.splitlines()[0], reps=50, rounds=4)
    parser.set_defaults(impls="triton,triton-persistent,torch-native", dtypes="bfloat16", m="4096,16384", n="1024,4096")
    parser.add_argument("--keep-nice", action="store_true", help="leave the actor at Ray's nice value (15)")
    args = parser.parse_args()
    sweep = sweep_body(args)
    import ray

    cluster = one_node_cluster() if args.start_cluster else None
    ray.init(address=cluster.address if cluster else args.ray, logging_level="ERROR", log_to_driver=False)
    actor = ray.remote(num_gpus=1, num_cpus=0)(ProbeActor).remote(args.keep_nice)
    label = "cuda:0" if args.device.startswith("cuda") else "cpu"
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    profiled = lambda round_: round_ == args.rounds - 1  # noqa: E731 -- the last round, not in the medians
    try:
        results = interleaved(
            {
                "plain": lambda r: pool.submit(measure, label, sweep, profiled(r)).result(),
                "ray": lambda r: ray.get(actor.measure.remote(label, sweep, profiled(r))),
            },
            args.rounds,
            lambda name, result: (
                f"{result['engine_s'] / result['cases'] * 1e3:8.2f} ms/case in the engine "
                f"({result['cases']} cases, {result['not_ok']} not ok)"
            ),
        )
    finally:
        pool.shutdown()
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()

    def per_case(name: str) -> float:
        timed = [r for r in results[name] if "profile" not in r] or results[name]
        return statistics.median(r["engine_s"] / r["cases"] for r in timed) * 1e3

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
        f"\nengine time per case (median of the rounds not profiled): plain {summary['plain_engine_ms_per_case']:.2f} ms, "
        f"Ray actor {summary['ray_engine_ms_per_case']:.2f} ms → {summary['overhead_pct']:+.1f} %"
    )
    for name in results:
        facts = {k: v for k, v in summary["host"][name].items() if k != "env"}
        print(f"{name}: {facts}\n  env: {summary['host'][name]['env']}")
    for name in results:
        print(f"\n--- {name}: last round's profile (top by own time)\n" + results[name][-1]["profile"][:4000])
    write_summary(args.out, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
