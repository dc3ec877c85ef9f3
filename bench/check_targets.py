"""Issue 7's targets, checked against a committed result file (prints one line per shape and target).

    python bench/check_targets.py results/nvidia-h200-2026-12-02.json   (v4; v3: results/archive/)

Targets (bf16 and fp16): forward `triton` ≥ 95 % of the copy ceiling where M·N ≥ 32M and 1024 ≤ N ≤ 16384, and never
below the best peer; backward `triton-persistent` ≥ 85 % there and ≥ the best peer everywhere, ≥ 2× `triton-atomic` at
M ≥ 16384; `triton-workspace` ≥ the best of torch-native and liger. Peers: eager, torch-compile, torch-native, liger, quack."""

from __future__ import annotations

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
        print(f"{pass_} {dtype:9} {m:>6}×{n:<6} {ours:17} {g:7.0f} GB/s {pct:5.1f}%  "
              + ("ok" if not failed else "MISS: " + "; ".join(failed)))
    print(f"{misses} shape(s) miss at least one target")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
