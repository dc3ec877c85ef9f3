"""The run summary: counts by status and the best implementation per (pass, dtype, shape).

The same dict ends a result file (``"summary"``), the stream (the ``summary`` line adds ``type`` and
``run_id``) and the CLI's table. ``best`` is keyed ``"<pass>/<dtype>/<M>x<N>"``, e.g. ``"bwd/bfloat16/16384x4096"``,
each value ``{"impl", "GBps", "pct_of_ceiling", "median_us"}``; only ``ok`` rows compete (a ``wrong`` row,
timed but off the reference, never does).

``speedup`` = ``{"baseline": name, "by_shape": {key: {impl: GBps / baseline's GBps}}}``: per shape, every ok
implementation's speedup over the baseline (the sweep's ``baseline``, default ``torch-native``; 1.0 for the
baseline itself); a shape where the baseline has no ok row is absent, and so is a ratio that is not a finite
number (``GBps`` 1e308 over a baseline's 2.0 overflows): JSON and the store carry only finite numbers (the
standings' means leave such a ratio out too). With ``strict=True`` (an imported file, whose numbers anyone may
have written) a ratio that is not finite raises `NonFiniteResult` naming the row instead.

``standings`` = ``{pass: {impl: {"won", "measured", "vs_baseline", "vs_baseline_shapes", "vs_best_peer",
"vs_best_peer_shapes"}}}``: the one-line answer per pass. ``won``: the shapes (every dtype, M and N of that pass)
where the implementation is ``best``; ``measured``: those with an ok row of it; ``vs_baseline``: the geometric
mean over shapes of its GB/s over the baseline's (the shapes where both are ok); ``vs_best_peer``: the geometric
mean of its GB/s over the best peer's, the best peer of a shape being the fastest ok implementation *other than
this one* (so > 1 means it beats every other implementation on average, the winner's margin; < 1, how far it is
behind the fastest other). A mean over no shape is null.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Optional, Union

from engine.models import ResultRow

Row = Union[ResultRow, Mapping[str, Any]]


def _as_dict(row: Row) -> Mapping[str, Any]:
    return row.model_dump() if isinstance(row, ResultRow) else row


def shape_key(pass_: str, dtype: str, M: int, N: int) -> str:
    return f"{pass_}/{dtype}/{M}x{N}"


DEFAULT_BASELINE = "torch-native"


class NonFiniteResult(ValueError):
    """A number computed from the rows is not finite: ``row`` (its index) and ``field`` say whose value made it."""

    def __init__(self, row: int, field: str, message: str) -> None:
        self.row, self.field = row, field
        super().__init__(message)


def summarize(
    rows: Iterable[Row], complete: bool = True, baseline: str = DEFAULT_BASELINE, strict: bool = False
) -> dict[str, Any]:
    counts = {"ok": 0, "skipped": 0, "error": 0, "wrong": 0}
    best: dict[str, dict[str, Any]] = {}
    measured: dict[str, dict[str, float]] = {}
    source: dict[tuple[str, str], int] = {}
    total = 0
    for index, raw in enumerate(rows):
        row = _as_dict(raw)
        total += 1
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        if row["status"] != "ok" or not row.get("GBps"):
            continue
        key = shape_key(row["pass"], row["dtype"], row["M"], row["N"])
        measured.setdefault(key, {})[row["impl"]] = row["GBps"]
        source[key, row["impl"]] = index
        if key not in best or row["GBps"] > best[key]["GBps"]:
            best[key] = {
                "impl": row["impl"],
                "GBps": row["GBps"],
                "pct_of_ceiling": row.get("pct_of_ceiling"),
                "median_us": row.get("median_us"),
            }
    if strict:
        check_ratios(measured, source)
    return {
        "rows": total,
        **counts,
        "complete": bool(complete),
        "best": best,
        "speedup": {"baseline": baseline, "by_shape": speedups(measured, baseline)},
        "standings": standings(measured, best, baseline),
    }


def check_ratios(measured: Mapping[str, Mapping[str, float]], source: Mapping[tuple[str, str], int]) -> None:
    """Raise `NonFiniteResult` naming the row whose GB/s over another implementation's of the same shape (the
    speedups' and the standings' ratios) is not a finite number."""
    for key, by_impl in measured.items():
        low_impl = min(by_impl, key=lambda impl: by_impl[impl])
        for impl, gbps in by_impl.items():
            if not math.isfinite(gbps / by_impl[low_impl]):
                mine, low = source[key, impl], source[key, low_impl]
                raise NonFiniteResult(
                    mine,
                    "GBps",
                    (
                        f"rows.{mine}.GBps: {gbps!r} GB/s over {low_impl}'s {by_impl[low_impl]!r} GB/s (rows.{low}) is "
                        f"not a finite ratio; no two measurements are that far apart"
                    ),
                )


def speedups(measured: Mapping[str, Mapping[str, float]], baseline: str) -> dict[str, dict[str, float]]:
    """shape key → impl → GBps / the baseline's GBps, for the shapes the baseline was measured at (finite ratios)."""
    return {
        key: {
            impl: gbps / by_impl[baseline] for impl, gbps in by_impl.items() if math.isfinite(gbps / by_impl[baseline])
        }
        for key, by_impl in measured.items()
        if by_impl.get(baseline)
    }


def geomean(values: Iterable[float]) -> Optional[float]:
    logs = [math.log(v) for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(logs) / len(logs)) if logs else None


def standings(
    measured: Mapping[str, Mapping[str, float]], best: Mapping[str, Mapping[str, Any]], baseline: str
) -> dict[str, dict[str, dict[str, Any]]]:
    """pass → impl → shapes won / measured and the two geometric means (see the module's docstring)."""
    acc: dict[str, dict[str, dict[str, list]]] = {}
    for key, by_impl in measured.items():
        pass_ = key.split("/", 1)[0]
        for impl, gbps in by_impl.items():
            a = acc.setdefault(pass_, {}).setdefault(impl, {"won": [], "base": [], "peer": [], "n": []})
            a["n"].append(key)
            if best.get(key, {}).get("impl") == impl:
                a["won"].append(key)
            if by_impl.get(baseline):
                a["base"].append(gbps / by_impl[baseline])
            peers = [g for other, g in by_impl.items() if other != impl]
            if peers:
                a["peer"].append(gbps / max(peers))
    return {
        pass_: {
            impl: {
                "won": len(a["won"]),
                "measured": len(a["n"]),
                "vs_baseline": geomean(a["base"]),
                "vs_baseline_shapes": len(a["base"]),
                "vs_best_peer": geomean(a["peer"]),
                "vs_best_peer_shapes": len(a["peer"]),
            }
            for impl, a in sorted(by.items())
        }
        for pass_, by in sorted(acc.items())
    }
