"""Issue 37's overhead figure: the same sweep through the service's local worker process and through a Ray actor
(``serve --ray``), wall time per case, interleaved rounds so that drift hits both alike.

Two services run side by side (app/live_server.py's `LiveServer`, on loopback, fresh data folders): one with its
local worker on ``--device`` (``cuda:0`` on a GPU host, ``cpu`` elsewhere), one pointed at a Ray cluster
(``--ray ADDRESS``, or ``--start-cluster``: a one-node cluster started here, with one GPU, fake where there is none).
Only one of them measures at a time. Each round POSTs the sweep to each (order alternating) and times, client side,
the request to its summary line; a warm-up sweep on each comes first (start-up, compile, first allocation) and is
not counted. Per case: wall / cases; the time inside the engine (Σ ended_at − started_at of the rows) is reported
too, so that what Ray adds (wall − engine) is seen apart from the measuring itself. Both sides have the node's
cores for torch's threads (the actor takes them back from Ray's ``OMP_NUM_THREADS=1``:
`app.ray_actor.use_the_node_threads`; until 2026-12-07 both ran with one thread).

    python bench/fleet_overhead.py --start-cluster [--device cpu] [--rounds 5] [--out FILE.json]
    python bench/fleet_overhead.py --ray 127.0.0.1:6379 --device cuda:0 --impls triton,torch-native

Target (issue 37, on a GPU machine): Ray's wall time per case at most 5 % above the local worker's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.live_server import LiveServer  # noqa: E402


def sweep_body(args) -> dict:
    return {
        "implementations": args.impls.split(","),
        "passes": ["fwd", "bwd"],
        "dtypes": args.dtypes.split(","),
        "M": [int(m) for m in args.m.split(",")],
        "N": [int(n) for n in args.n.split(",")],
        "repetitions": args.reps,
        "warmup": 3,
    }


def one_sweep(url: str, body: dict) -> dict:
    """Client-side wall time of one streamed sweep, its rows, and the time its rows spent inside the engine."""
    rows, summary = [], None
    start = time.perf_counter()
    with httpx.stream("POST", url + "/benchmark", json=body, timeout=3600) as response:
        response.raise_for_status()
        for raw in response.iter_lines():
            if raw.strip():
                line = json.loads(raw)
                if line["type"] == "row":
                    rows.append(line)
                elif line["type"] == "summary":
                    summary = line
    wall = time.perf_counter() - start
    engine = sum(r["ended_at"] - r["started_at"] for r in rows)
    bad = [r for r in rows if r["status"] not in ("ok", "skipped")]
    return {
        "wall_s": wall,
        "engine_s": engine,
        "cases": len(rows),
        "not_ok": len(bad),
        "complete": bool(summary and summary.get("complete")),
        "device": rows[0]["device"] if rows else None,
        "mode": rows[0]["mode"] if rows else None,
    }


def sweep_parser(description: str, reps: int, rounds: int) -> argparse.ArgumentParser:
    """The arguments this script and `bench/ray_engine_probe.py` share: where the cluster is, the local device,
    the sweep, the rounds and the output file."""
    parser = argparse.ArgumentParser(description=description)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--ray", help="address of a running Ray cluster (its head)")
    where.add_argument("--start-cluster", action="store_true", help="start a one-node Ray cluster here (one GPU)")
    parser.add_argument("--device", default="cpu", help="the local worker's device (cpu, cuda:0)")
    parser.add_argument("--impls", default="eager")
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--m", default="64,256")
    parser.add_argument("--n", default="256,1024")
    parser.add_argument("--reps", type=int, default=reps)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--out", type=Path)
    return parser


def one_node_cluster():
    """A Ray cluster of this machine alone, with one GPU (a fake one where there is none); its actors import this
    checkout (PYTHONPATH)."""
    from ray.cluster_utils import Cluster

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "num_gpus": 1, "include_dashboard": False, "object_store_memory": 80 << 20},
    )


def interleaved(sides: dict, rounds: int, describe) -> dict[str, list[dict]]:
    """A warm-up call of each side (start-up, compile, first allocation: not counted), then ``rounds`` rounds, the
    order of the two sides alternating so that drift hits both alike. ``sides``: name → ``call(round_index)``
    (-1 for the warm-up) returning a result dict; ``describe(name, result)`` prints it."""
    names = list(sides)
    for name in names:
        print(f"warm-up {name}: " + describe(name, sides[name](-1)), flush=True)
    results: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            results[name].append(sides[name](round_))
            print(f"round {round_ + 1} {name:5s}: " + describe(name, results[name][-1]), flush=True)
    return results


def write_summary(path: Path | None, summary: dict) -> None:
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=1))
        print(f"wrote {path}")


def main() -> int:
    parser = sweep_parser(__doc__.splitlines()[0], reps=10, rounds=5)
    args = parser.parse_args()
    if args.rounds < 1 or args.reps < 1:
        parser.error("--rounds and --reps must be at least 1")

    cluster = one_node_cluster() if args.start_cluster else None
    address = cluster.address if cluster is not None else args.ray
    body = sweep_body(args)
    work = Path(tempfile.mkdtemp(prefix="rmsnorm-fleet-overhead-"))
    env = {
        **({"OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"]} if "OMP_NUM_THREADS" in os.environ else {}),
        "RMSNORM_CEILING_BYTES": os.environ.get(
            "RMSNORM_CEILING_BYTES", str(1 << 20 if args.device == "cpu" else 1 << 28)
        ),
    }
    local = LiveServer(work / "local", devices=args.device, env=env)
    fleet = LiveServer(work / "fleet", env={**env, "RMSNORM_RAY_ADDRESS": address})
    try:
        local.start(timeout=900)
        fleet.start(timeout=900)
        results = interleaved(
            {"local": lambda _: one_sweep(local.url, body), "ray": lambda _: one_sweep(fleet.url, body)},
            args.rounds,
            lambda name, result: (
                f"{result['wall_s'] / result['cases'] * 1e3:8.2f} ms/case wall, "
                f"{(result['wall_s'] - result['engine_s']) / result['cases'] * 1e3:7.2f} ms/case outside the "
                f"engine ({result['cases']} cases, {result['not_ok']} not ok)"
            ),
        )
    finally:
        fleet.stop()
        local.stop()
        if cluster is not None:
            cluster.shutdown()

    def per_case(name: str, key: str) -> float:
        return statistics.median(r[key] / r["cases"] for r in results[name])

    def outside(name: str) -> float:
        return statistics.median((r["wall_s"] - r["engine_s"]) / r["cases"] for r in results[name])

    summary = {
        "sweep": body,
        "rounds": args.rounds,
        "local_device": args.device,
        "ray_address": "started here" if args.start_cluster else "given",
        "mode": results["ray"][0]["mode"],
        "device": results["ray"][0]["device"],
        "local_ms_per_case": per_case("local", "wall_s") * 1e3,
        "ray_ms_per_case": per_case("ray", "wall_s") * 1e3,
        "local_engine_ms_per_case": per_case("local", "engine_s") * 1e3,
        "ray_engine_ms_per_case": per_case("ray", "engine_s") * 1e3,
        "local_outside_engine_ms_per_case": outside("local") * 1e3,
        "ray_outside_engine_ms_per_case": outside("ray") * 1e3,
        "rounds_detail": results,
    }
    summary["overhead_pct"] = 100 * (summary["ray_ms_per_case"] / summary["local_ms_per_case"] - 1)
    summary["ray_added_ms_per_case"] = summary["ray_ms_per_case"] - summary["local_ms_per_case"]
    print(
        f"\nper case (median of {args.rounds} rounds): local {summary['local_ms_per_case']:.2f} ms, "
        f"Ray {summary['ray_ms_per_case']:.2f} ms → {summary['overhead_pct']:+.1f} % "
        f"({summary['ray_added_ms_per_case']:+.2f} ms/case); target on a GPU: ≤ +5 %\n"
        f"outside the engine (dispatch, stream, store): local {summary['local_outside_engine_ms_per_case']:.2f} "
        f"ms/case, Ray {summary['ray_outside_engine_ms_per_case']:.2f} ms/case"
    )
    write_summary(args.out, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
