"""The run summary: counts by status and the best implementation per (pass, dtype, shape).

The same dict ends a result file (``"summary"``), the stream (the ``summary`` line adds ``type`` and
``run_id``) and the CLI's table. ``best`` is keyed ``"<pass>/<dtype>/<M>x<N>"``, e.g. ``"bwd/bfloat16/16384x4096"``,
each value ``{"impl", "GBps", "pct_of_ceiling", "median_us"}``; only ``ok`` rows compete (a ``wrong`` row,
timed but off the reference, never does).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Union

from kernels.bench.models import ResultRow

Row = Union[ResultRow, Mapping[str, Any]]


def _as_dict(row: Row) -> Mapping[str, Any]:
    return row.model_dump() if isinstance(row, ResultRow) else row


def shape_key(pass_: str, dtype: str, M: int, N: int) -> str:
    return f"{pass_}/{dtype}/{M}x{N}"


def summarize(rows: Iterable[Row], complete: bool = True) -> dict[str, Any]:
    counts = {"ok": 0, "skipped": 0, "error": 0, "wrong": 0}
    best: dict[str, dict[str, Any]] = {}
    total = 0
    for raw in rows:
        row = _as_dict(raw)
        total += 1
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        if row["status"] != "ok" or row.get("GBps") is None:
            continue
        key = shape_key(row["pass"], row["dtype"], row["M"], row["N"])
        if key not in best or row["GBps"] > best[key]["GBps"]:
            best[key] = {
                "impl": row["impl"],
                "GBps": row["GBps"],
                "pct_of_ceiling": row.get("pct_of_ceiling"),
                "median_us": row.get("median_us"),
            }
    return {"rows": total, **counts, "complete": bool(complete), "best": best}
