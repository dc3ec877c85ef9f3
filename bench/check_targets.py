"""Issue 7's targets, checked against a committed result file (prints one line per shape and target).

    python bench/check_targets.py results/nvidia-h200-2026-12-02.json   (v4; v3: results/archive/)
    python bench/check_targets.py --models results/FILE.json            (issue 15's targets, a summary per dtype)
    python bench/check_targets.py --host results/checks/FILE.json       (issue 16: host_us of ours ≤ torch-native's)

Targets (bf16 and fp16): forward `triton` ≥ 95 % of the copy ceiling where M·N ≥ 32M and 1024 ≤ N ≤ 16384, and never
below the best peer; backward `triton-persistent` ≥ 85 % there and ≥ the best peer everywhere, ≥ 2× `triton-atomic` at
M ≥ 16384; `triton-workspace` ≥ the best of torch-native and liger. Peers: eager, torch-compile, torch-native, liger, quack."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

PEERS = ("eager", "torch-compile", "torch-native", "liger", "quack")


def main(path: str) -> int:
    doc = json.load(open(path, encoding="utf-8"))
    gbps = defaultdict(dict)
    for r in doc["rows"]:
        if r["status"] == "ok":
            gbps[(r["pass"], r["dtype"], r["M"], r["N"])][r["impl"]] = (r["GBps"], r["pct_of_ceiling"])
    misses = 0
    for (pass_, dtype, m, n), by in sorted(gbps.items()):
        ours = "triton" if pass_ == "fwd" else "triton-persistent"
        if ours not in by:
            continue
        g, pct = by[ours]
        peers = {k: v[0] for k, v in by.items() if k in PEERS}
        best_peer = max(peers, key=peers.get) if peers else None
        big = m * n >= 32 * 2**20 and 1024 <= n <= 16384
        checks = []
        if big:
            checks.append((f"≥{95 if pass_ == 'fwd' else 85}% of ceiling", pct >= (95 if pass_ == "fwd" else 85)))
        if best_peer:
            checks.append((f"≥ best peer {best_peer} {peers[best_peer]:.0f}", g >= peers[best_peer]))
        if pass_ == "bwd" and m >= 16384 and "triton-atomic" in by:
            checks.append(("≥2× atomic", g >= 2 * by["triton-atomic"][0]))
        if pass_ == "bwd" and "triton-workspace" in by:
            ref = max((by[k][0] for k in ("torch-native", "liger") if k in by), default=0)
            checks.append(("workspace ≥ native/liger", by["triton-workspace"][0] >= ref))
        failed = [name for name, ok in checks if not ok]
        misses += bool(failed)
        print(
            f"{pass_} {dtype:9} {m:>6}×{n:<6} {ours:17} {g:7.0f} GB/s {pct:5.1f}%  "
            + ("ok" if not failed else "MISS: " + "; ".join(failed))
        )
    print(f"{misses} shape(s) miss at least one target")
    return 0


def models(path: str) -> int:
    """Issue 15's targets, one summary per dtype: forward `triton` ≥ 95 % of the ceiling where M·N ≥ 32M and ≥ 1.00×
    the best peer everywhere; backward `triton-persistent` ≥ 85 % where M·N ≥ 32M (90 % where ≥ 128M) and ≥ 1.10× the
    best peer everywhere. A shape some implementation did not reach (a run cut short) is listed as such."""
    doc = json.load(open(path, encoding="utf-8"))
    gbps, seen = defaultdict(dict), defaultdict(set)
    for r in doc["rows"]:
        seen[(r["pass"], r["dtype"], r["M"], r["N"])].add(r["impl"])
        if r["status"] == "ok":
            gbps[(r["pass"], r["dtype"], r["M"], r["N"])][r["impl"]] = (r["GBps"], r["pct_of_ceiling"])
    print(f"{path}: ceiling {doc['run'].get('ceiling_GBps') or 0:.0f} GB/s, {doc['run']['device']['name']}")
    for dtype in sorted({k[1] for k in seen}):
        lines = defaultdict(list)
        for pass_ in ("fwd", "bwd"):
            ours = "triton" if pass_ == "fwd" else "triton-persistent"
            shapes = sorted(k for k in seen if k[0] == pass_ and k[1] == dtype)
            expected = set().union(*(seen[k] for k in shapes)) if shapes else set()  # the pass's implementations
            for p, d, m, n in shapes:
                if expected - seen[(p, d, m, n)] or ours not in gbps[(p, d, m, n)]:
                    lines[f"{pass_} not reached"].append(f"{m}×{n}")
                    continue
                by = gbps[(p, d, m, n)]
                g, pct = by[ours]
                floor = (
                    (95 if pass_ == "fwd" else (90 if m * n >= 128 * 2**20 else 85)) if m * n >= 32 * 2**20 else None
                )
                if floor is not None and pct < floor:
                    lines[f"{pass_} <% of ceiling"].append(f"{m}×{n} {pct:.1f}% (<{floor})")
                peers = {k: v[0] for k, v in by.items() if k in PEERS}
                if peers:
                    best = max(peers, key=peers.get)
                    ratio, need = g / peers[best], (1.00 if pass_ == "fwd" else 1.10)
                    if ratio < need:
                        lines[f"{pass_} <{need:.2f}x best peer"].append(f"{m}×{n} {ratio:.3f} vs {best}")
                    lines[f"{pass_} ratio to best peer"].append(ratio)
        print(f"## {dtype}")
        for key in (
            "fwd not reached",
            "fwd <% of ceiling",
            "fwd <1.00x best peer",
            "bwd not reached",
            "bwd <% of ceiling",
            "bwd <1.10x best peer",
        ):
            print(f"{key}: {len(lines[key])} {'; '.join(lines[key])}")
        for pass_ in ("fwd", "bwd"):
            r = lines[f"{pass_} ratio to best peer"]
            if r:
                print(
                    f"{pass_} ratio to best peer: min {min(r):.3f}, median {sorted(r)[len(r) // 2]:.3f}, max {max(r):.3f} "
                    f"over {len(r)} shapes"
                )
    return 0


def host(path: str) -> int:
    """Issue 16's host target: each of our implementations' ``host_us`` ≤ torch-native's at every shape of the file,
    per pass and dtype (the ratio per shape; with interleaved rounds, each round's host time is listed too)."""
    doc = json.load(open(path, encoding="utf-8"))
    by = defaultdict(dict)
    for r in doc["rows"]:
        if r["status"] == "ok" and r.get("host_us") is not None:
            by[(r["pass"], r["dtype"], r["M"], r["N"])][r["impl"]] = r
    print(f"{path}: {doc['run']['device']['name']}, rounds {doc['run'].get('sweep', {}).get('rounds', 1)}")
    for pass_, dtype in sorted({k[:2] for k in by}):
        shapes = sorted(k for k in by if k[:2] == (pass_, dtype) and "torch-native" in by[k])
        impls = sorted({i for k in shapes for i in by[k] if i.startswith("triton")})
        for impl in impls:
            ratios = [
                (k[2], k[3], by[k][impl]["host_us"] / by[k]["torch-native"]["host_us"]) for k in shapes if impl in by[k]
            ]
            over = [f"{m}×{n} {q:.2f}" for m, n, q in ratios if q > 1.0]
            qs = sorted(q for _, _, q in ratios)
            print(
                f"{pass_} {dtype} {impl:18} ≤ torch-native at {len(ratios) - len(over)} of {len(ratios)} "
                f"(ratio min {qs[0]:.2f}, median {qs[len(qs) // 2]:.2f}, max {qs[-1]:.2f})"
                + (f"; over at {', '.join(over)}" if over else "")
            )
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--models",
        action="store_const",
        dest="check",
        const=models,
        default=main,
        help="issue 15's targets, a summary per dtype",
    )
    mode.add_argument(
        "--host", action="store_const", dest="check", const=host, help="issue 16: host_us of ours ≤ torch-native's"
    )
    ap.add_argument("file", help="a results file (JSON)")
    args = ap.parse_args()
    sys.exit(args.check(args.file))
