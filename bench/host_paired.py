"""Host time per call, ours against F.rms_norm, paired call by call (issue 16).

    python3 bench/host_paired.py [--m 4096,16384,65536] [--n 512,...,16384] [--rounds 60] [--out DIR]

The engine's ``host_us`` times each implementation's calls together, one case after another. The host's speed drifts
(docs/NOTES.md, fourteenth session: a whole round of 20 calls moves by ±15 %), so two rows measured seconds apart
differ by more than the few µs being compared. Here every round calls each implementation once, in a fresh random
order, and each of our calls is divided by ``torch-native``'s call of the same round: the drift is common to the
pair and cancels. Each call is timed as the engine times it: the inputs' graph built untimed (backward),
``time.perf_counter`` around the call alone, the GPU kept busy by a spin so the call only enqueues. One spin covers
a whole round, and the round opens with an untimed call: the timed calls follow one another with no wait between
them, as a training loop's do. (Until 2026-12-06 07:30 UTC each call followed a synchronize and a spin of its own;
a host thread woken from a long wait is slower, more so after a longer GPU job, so those host times grow with the
shape: results/checks/host-paired-h100-2026-12-06*.json.) Implementations are warmed up first (the steady-state path
a training loop takes: launch plans recorded, the native node's plans registered).

Per (pass, shape, implementation): the median host µs and quartiles, and for ours the paired ratios' median and
quartiles and how many rounds were at or below torch-native. A shape counts as "≤ torch-native" when the median
paired ratio is ≤ 1. On CPU (``--device cpu``, the tests) host time is the whole call, and no spin is given.
Writes ``host-paired.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from engine import device as devices  # noqa: E402
from engine.timing import SPIN_CLOCK_HZ, BackwardWorkload, ForwardWorkload, random_inputs  # noqa: E402
from rmsnorm_kernels import launch_plans, native  # noqa: E402
from rmsnorm_kernels.registry import REGISTRY, load_all  # noqa: E402

BASELINE = "torch-native"
OURS = {"fwd": ("triton",), "bwd": ("triton-persistent", "triton-workspace", "triton-atomic")}
SPIN_FLOOR_S = 200e-6
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) == 1:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[1], q[2]


def interleaved(names, rounds: int, rng: random.Random, call_one, round_start=None) -> dict[str, list[float]]:
    """``rounds`` rounds, each calling ``call_one(name, round)`` once for every name in a fresh random order (after
    ``round_start(round, order)`` where given); each name's results in round order. A host whose speed drifts then
    drifts under every name alike."""
    samples: dict[str, list[float]] = {name: [] for name in names}
    order = list(names)
    for r in range(rounds):
        rng.shuffle(order)
        if round_start is not None:
            round_start(r, order)
        for name in order:
            samples[name].append(call_one(name, r))
    return samples


def round_opening(cuda: bool, spin_cycles: int, untimed):
    """A round's opening for `interleaved`: on CUDA, ``spin_cycles`` of GPU work queued behind an empty queue, long
    enough that no call of the round waits for the GPU; then ``untimed(name)`` for the round's last name, so the
    first timed call follows a call, not a wait, like all the others (a training loop's calls follow each other)."""

    def start(r: int, order: list[str]) -> None:
        if cuda:
            torch.cuda.synchronize()
            torch.cuda._sleep(spin_cycles)
        untimed(order[-1], r)

    return start


def paired_stats(samples: dict[str, list[float]], baseline: str) -> dict[str, dict]:
    """Per name: the median host time and quartiles; beside the baseline, the median and quartiles of the ratios
    to the baseline's call of the same round, and in how many rounds it was at or below it."""
    out = {}
    for name, values in samples.items():
        q1, med, q3 = quartiles(values)
        stats = {"host_us": med, "host_us_q1": q1, "host_us_q3": q3}
        if name != baseline:
            ratios = [a / b for a, b in zip(values, samples[baseline])]
            rq1, rmed, rq3 = quartiles(ratios)
            stats.update(
                paired_ratio=rmed,
                paired_ratio_q1=rq1,
                paired_ratio_q3=rq3,
                rounds_at_or_below=sum(1 for q in ratios if q <= 1.0),
            )
        out[name] = stats
    return out


def workload(impl: str, pass_: str, m: int, n: int, dtype: torch.dtype, device: torch.device):
    fn = REGISTRY.get(impl).fn
    xs, weight, dys = random_inputs(m, n, dtype, device, sets=1, backward=pass_ == "bwd", seed=m * 131 + n)
    return ForwardWorkload(fn, xs, weight) if pass_ == "fwd" else BackwardWorkload(fn, xs, weight, dys)


def warm_up(wl, calls: int, cuda: bool) -> float:
    """``calls`` calls (the first ones compile, record launch plans and hand them to the native node), the output
    checked; the host time of one steady-state call (the median of the last three), for the spin."""
    times = []
    with wl.context():
        for i in range(calls):
            wl.before(i)
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            wl.call(i)
            times.append(time.perf_counter() - t0)
        wl.check()
    return statistics.median(times[-3:])


def timed_call(wl, i: int) -> float:
    """The host time of call ``i`` alone (its inputs' graph built first, untimed)."""
    wl.before(i)
    t0 = time.perf_counter()
    wl.call(i)
    return time.perf_counter() - t0


def measure_shape(
    pass_: str, m: int, n: int, dtype: torch.dtype, device: torch.device, rounds: int, rng: random.Random
) -> list[dict]:
    cuda = device.type == "cuda"
    impls = (BASELINE,) + OURS[pass_]
    loads = {impl: workload(impl, pass_, m, n, dtype, device) for impl in impls}
    warm = launch_plans.calls_to_a_replay(device) + 2
    host_estimate = max(warm_up(wl, warm, cuda) for wl in loads.values())
    if cuda:
        torch.cuda.synchronize()
    # the GPU spins through the whole round (an untimed call and every timed one, each with its graph built): no
    # call waits for it, and the calls follow each other as a training loop's do, with no wait between them
    spin_cycles = int(max(4 * 2 * (len(impls) + 1) * host_estimate, SPIN_FLOOR_S) * SPIN_CLOCK_HZ)

    def untimed(impl: str, r: int) -> None:
        wl = loads[impl]
        with wl.context():
            wl.before(warm + r)
            wl.call(warm + r)

    def one_call(impl: str, r: int) -> float:
        wl = loads[impl]
        with wl.context():
            return timed_call(wl, warm + r) * 1e6

    samples = interleaved(impls, rounds, rng, one_call, round_opening(cuda, spin_cycles, untimed))
    if cuda:
        torch.cuda.synchronize()
    for wl in loads.values():
        wl.release()
    shape = {"pass": pass_, "dtype": str(dtype).removeprefix("torch."), "M": m, "N": n, "rounds": rounds}
    return [{**shape, "impl": impl, **stats} for impl, stats in paired_stats(samples, BASELINE).items()]


def summary(rows: list[dict]) -> list[str]:
    lines = []
    for pass_ in ("fwd", "bwd"):
        for impl in OURS[pass_]:
            mine = [r for r in rows if r["impl"] == impl and r["pass"] == pass_]
            if not mine:
                continue
            over = [f"{r['M']}×{r['N']} {r['paired_ratio']:.3f}" for r in mine if r["paired_ratio"] > 1.0]
            ratios = sorted(r["paired_ratio"] for r in mine)
            lines.append(
                f"{pass_} {impl:18} ≤ {BASELINE} at {len(mine) - len(over)} of {len(mine)} shapes "
                f"(median paired ratio per shape: min {ratios[0]:.3f}, median {ratios[len(ratios) // 2]:.3f}, "
                f"max {ratios[-1]:.3f})" + (f"; over at {', '.join(over)}" if over else "")
            )
    return lines


def sizes(text: str) -> list[int]:
    """A comma-separated list of positive sizes (``--m`` / ``--n``)."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated whole numbers, not {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"sizes of at least 1, not {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=sizes, default="4096,16384,65536")
    ap.add_argument("--n", type=sizes, default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--pass", dest="passes", default="fwd,bwd")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/logs"))
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds: at least 1")
    load_all()
    device = devices.resolve(args.device)
    if device.type == "cuda":
        native.ensure()
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    rows = []
    for pass_ in args.passes.split(","):
        if pass_ not in OURS:
            ap.error(f"--pass: fwd and/or bwd, not {pass_!r}")
        for m in args.m:
            for n in args.n:
                shape_rows = measure_shape(pass_, m, n, DTYPES[args.dtype], device, args.rounds, rng)
                rows.extend(shape_rows)
                print(
                    f"{pass_} {m:>6}×{n:<6} "
                    + "  ".join(
                        f"{r['impl']} {r['host_us']:.1f}"
                        + (f" ({r['paired_ratio']:.3f}×)" if "paired_ratio" in r else "")
                        for r in shape_rows
                    ),
                    flush=True,
                )
    lines = summary(rows)
    print("\n".join(lines))
    info = devices.describe(device)
    doc = {
        "kind": "host-paired",
        "created_at": devices.utc_now_iso(),
        "device": info.name,
        "versions": devices.versions(),
        "git_commit": devices.git_commit(),
        "host": devices.host(),
        "native_node": devices.native_node_state(),
        "seed": seed,
        "rounds": args.rounds,
        "baseline": BASELINE,
        "method": "one GPU spin and one untimed call per round, then every implementation's call back to back",
        "rows": rows,
        "summary": lines,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "host-paired.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
