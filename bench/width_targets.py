"""Issue 33's targets, checked against width-scan result files (``--preset widths``, one per pass or both in one):

    python bench/width_targets.py results/FILE-fwd.json results/FILE-bwd.json [--dtype bfloat16]

Per dtype: the forward ``triton`` against the best peer at every width (≥ 0.98×, median ≥ 1.00×), the backward
``triton-persistent`` likewise (≥ 1.00×, median ≥ 1.10×); no cliff (none of ours below 0.90× of the better of its
two neighbouring widths on the scan's multiples of 256); at M·N ≥ 32M the forward ≥ 95 % and triton-persistent
≥ 85 % of the run's copy ceiling. Peers: eager, torch-compile, torch-native, liger, quack. Prints the misses and
a summary line per target; exit 1 on any miss."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict

PEERS = ("eager", "torch-compile", "torch-native", "liger", "quack")
OURS = ("triton", "triton-persistent", "triton-workspace", "triton-atomic")


def load(paths):
    gbps = defaultdict(dict)  # (pass, dtype, M, N) -> impl -> (GB/s, %)
    for path in paths:
        for r in json.load(open(path, encoding="utf-8"))["rows"]:
            if r["status"] == "ok":
                gbps[(r["pass"], r["dtype"], r["M"], r["N"])][r["impl"]] = (r["GBps"], r["pct_of_ceiling"])
    return gbps


def ratios(gbps, pass_, ours):
    out = {}
    for (p, dtype, m, n), by in gbps.items():
        peers = {k: v[0] for k, v in by.items() if k in PEERS}
        if p == pass_ and ours in by and peers:
            best = max(peers, key=peers.get)
            out[(dtype, m, n)] = (by[ours][0] / peers[best], best, by[ours][1])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    gbps = load(args.files)
    misses = 0
    for pass_, ours, low, median_target, pct_target in (
        ("fwd", "triton", 0.98, 1.00, 95),
        ("bwd", "triton-persistent", 1.00, 1.10, 85),
    ):
        found = ratios(gbps, pass_, ours)
        for dtype in sorted({k[0] for k in found}):
            rows = {k: v for k, v in found.items() if k[0] == dtype}
            values = [v[0] for v in rows.values()]
            below = sorted((k, v) for k, v in rows.items() if v[0] < low)
            big = [(k, v) for k, v in rows.items() if k[1] * k[2] >= 32 * 2**20 and v[2] < pct_target]
            print(
                f"{ours} {dtype}: vs best peer min {min(values):.3f} median {statistics.median(values):.3f} "
                f"(target ≥ {low}, median ≥ {median_target}); below at {len(below)} of {len(rows)}; "
                f"under {pct_target} % of ceiling at M·N ≥ 32M: {len(big)}"
            )
            for (d, m, n), (r, best, pct) in below:
                print(f"    {m}x{n}: {r:.3f}× {best} ({pct:.1f} % of ceiling)")
            misses += len(below) + len(big) + (statistics.median(values) < median_target)
    for ours in OURS:  # cliffs along the scan (multiples of 256 at one M)
        for pass_, dtype, m in sorted({(k[0], k[1], k[2]) for k, by in gbps.items() if ours in by}):
            line = sorted(
                (k[3], by[ours][0])
                for k, by in gbps.items()
                if k[:3] == (pass_, dtype, m) and ours in by and k[3] % 256 == 0
            )
            cliffs = [
                (n, g / max(line[i - 1][1], line[i + 1][1]))
                for i, (n, g) in enumerate(line[1:-1], 1)
                if g < 0.90 * max(line[i - 1][1], line[i + 1][1])
            ]
            if len(line) > 2:
                print(
                    f"{ours} {pass_} {dtype} M={m}: {len(cliffs)} cliffs over {len(line)} widths"
                    + "".join(f"\n    N={n}: {r:.2f}× its better neighbour" for n, r in cliffs)
                )
                misses += len(cliffs)
    print(f"{misses} misses")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
