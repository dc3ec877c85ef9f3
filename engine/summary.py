"""The run summary: counts by status and the best implementation per (pass, dtype, shape).

The same dict ends a result file (``"summary"``), the stream (the ``summary`` line adds ``type`` and
``run_id``) and the CLI's table. ``best`` is keyed ``"<pass>/<dtype>/<M>x<N>"``, e.g. ``"bwd/bfloat16/16384x4096"``,
each value ``{"impl", "GBps", "pct_of_ceiling", "median_us"}``; only ``ok`` rows compete (a ``wrong`` row,
timed but off the reference, never does).

``speedup`` = ``{"baseline": name, "by_shape": {key: {impl: GBps / baseline's GBps}}}``: per shape, every ok
implementation's speedup over the baseline (the sweep's ``baseline``, default ``torch-native``; 1.0 for the
baseline itself); a shape where the baseline has no ok row is absent.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Union

from engine.models import ResultRow

Row = Union[ResultRow, Mapping[str, Any]]


def _as_dict(row: Row) -> Mapping[str, Any]:
    return row.model_dump() if isinstance(row, ResultRow) else row


def shape_key(pass_: str, dtype: str, M: int, N: int) -> str:
    return f"{pass_}/{dtype}/{M}x{N}"


DEFAULT_BASELINE = "torch-native"


def summarize(rows: Iterable[Row], complete: bool = True, baseline: str = DEFAULT_BASELINE) -> dict[str, Any]:
    counts = {"ok": 0, "skipped": 0, "error": 0, "wrong": 0}
    best: dict[str, dict[str, Any]] = {}
    measured: dict[str, dict[str, float]] = {}
    total = 0
    for raw in rows:
        row = _as_dict(raw)
        total += 1
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        if row["status"] != "ok" or not row.get("GBps"):
            continue
        key = shape_key(row["pass"], row["dtype"], row["M"], row["N"])
        measured.setdefault(key, {})[row["impl"]] = row["GBps"]
        if key not in best or row["GBps"] > best[key]["GBps"]:
            best[key] = {
                "impl": row["impl"],
                "GBps": row["GBps"],
                "pct_of_ceiling": row.get("pct_of_ceiling"),
                "median_us": row.get("median_us"),
            }
    return {"rows": total, **counts, "complete": bool(complete), "best": best,
            "speedup": {"baseline": baseline, "by_shape": speedups(measured, baseline)}}


def speedups(measured: Mapping[str, Mapping[str, float]], baseline: str) -> dict[str, dict[str, float]]:
    """shape key → impl → GBps / the baseline's GBps, for the shapes the baseline was measured at."""
    return {key: {impl: gbps / by_impl[baseline] for impl, gbps in by_impl.items()}
            for key, by_impl in measured.items() if by_impl.get(baseline)}
