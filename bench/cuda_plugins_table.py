"""The short table of bench/cuda_plugins.sh: backward GB/s per shape of the CUDA plug-ins beside the Triton backwards
and the peers, the ratio triton-persistent / cuda-persistent (below 1: the Triton one loses, by that much), and the
kernel breakdown of the profiled rows. Markdown on stdout; reads result files only (stdlib, no torch).

    python3 bench/cuda_plugins_table.py RESULT.json [...] [--profile PROFILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

IMPLS = ("cuda-naive", "cuda-persistent", "triton-persistent", "triton-workspace", "quack", "liger")
SHORT = {"ok": None, "skipped": "skip", "error": "err", "wrong": "WRONG"}


def load_rows(paths: list[Path]) -> list[dict]:
    rows = []
    for p in paths:
        try:
            rows += [r for r in json.loads(p.read_text())["rows"] if r["pass"] == "bwd"]
        except (OSError, ValueError, KeyError) as exc:
            print(f"<!-- {p}: {type(exc).__name__}: {exc} -->")
    return rows


def cell(row: dict | None) -> str:
    if row is None:
        return "–"
    if row["status"] == "ok":
        return f"{row['GBps']:.0f}"
    return SHORT.get(row["status"], row["status"])


def table(rows: list[dict]) -> list[str]:
    by = {(r["dtype"], r["M"], r["N"], r["impl"]): r for r in rows}
    shapes = sorted({(r["dtype"], r["M"], r["N"]) for r in rows})
    out = ["| dtype | M×N | " + " | ".join(IMPLS) + " | triton-p / cuda-p |", "|---|---|" + "---:|" * (len(IMPLS) + 1)]
    ratios = []
    for dtype, M, N in shapes:
        cells = [cell(by.get((dtype, M, N, i))) for i in IMPLS]
        cp, tp = by.get((dtype, M, N, "cuda-persistent")), by.get((dtype, M, N, "triton-persistent"))
        ratio = ""
        if cp and tp and cp["status"] == tp["status"] == "ok":
            r = tp["GBps"] / cp["GBps"]
            ratios.append((r, dtype, M, N))
            ratio = f"**{r:.2f}**" if r < 1 else f"{r:.2f}"
        out.append(f"| {dtype} | {M}×{N} | " + " | ".join(cells) + f" | {ratio} |")
    out.append("")
    if ratios:
        losses = sorted(x for x in ratios if x[0] < 1)
        out.append(
            f"triton-persistent / cuda-persistent over {len(ratios)} shapes: median {statistics.median(r for r, *_ in ratios):.2f}, "
            f"min {min(ratios)[0]:.2f}, max {max(ratios)[0]:.2f}; the Triton one loses at {len(losses)}"
            + (
                ": " + ", ".join(f"{d} {m}×{n} ({(1 - r) * 100:.0f} % slower)" for r, d, m, n in losses[:12])
                if losses
                else "."
            )
        )
    wrong = [r for r in rows if r["status"] in ("wrong", "error")]
    for r in wrong:
        out.append(f"- {r['status']}: {r['impl']} {r['dtype']} {r['M']}×{r['N']}: {(r.get('reason') or '')[:200]}")
    return out


def profile_lines(rows: list[dict]) -> list[str]:
    out = [
        "",
        "| impl | dtype | M×N | median µs | kernels (median µs × launches) | gaps µs |",
        "|---|---|---|---:|---|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r["M"], r["N"], r["impl"])):
        p = r.get("profile") or {}
        if r["status"] != "ok" or not p.get("kernels"):
            continue
        ks = ", ".join(f"{k['name'][:40]} {k['median_us']:.1f}×{k['calls']}" for k in p["kernels"][:5])
        out.append(
            f"| {r['impl']} | {r['dtype']} | {r['M']}×{r['N']} | {r['median_us']:.1f} | {ks} | {p.get('gap_us') or 0:.1f} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--profile", type=Path)
    args = parser.parse_args(argv)
    rows = load_rows(args.files)
    print("\n".join(table(rows)))
    if args.profile and args.profile.is_file():
        print("\n".join(profile_lines(load_rows([args.profile]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
