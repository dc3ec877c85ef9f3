"""One result file from a sweep measured in several launches: a long sweep cut short (a device call's time limit),
then its missing shapes measured in a launch of their own on the same GPU, code and configuration table.

    merge_runs([first, second, …])   → a RunFile: the first's header (``merged_from`` lists every launch), each
                                       case's row from the latest launch that measured it, the summary recomputed

Launches are merged only when they measured alike — same GPU (by UUID, else name), commit, versions, timing mode
and kernel table — since each row's % of the ceiling is its own launch's; otherwise ValueError says what differs. The
result is complete when every case of the first launch's sweep (implementations × passes × dtypes × M × N) has a row.
"""

from __future__ import annotations

from itertools import product
from typing import Sequence

from engine.models import ResultRow, RunFile
from engine.summary import DEFAULT_BASELINE, summarize

ALIKE = {
    "GPU": lambda h: h.device.uuid or h.device.name,
    "commit": lambda h: h.git_commit,
    "versions": lambda h: h.versions,
    "timing": lambda h: h.sweep.get("timing"),
    "kernel table": lambda h: (getattr(h, "kernel_configs", None) or {}).get("created_at"),
}


def _case(row: ResultRow) -> tuple:
    return row.impl, row.pass_, row.dtype, row.M, row.N


def merge_runs(runs: Sequence[RunFile]) -> RunFile:
    if len(runs) < 2:
        raise ValueError("merging needs two result files or more")
    # by time: the header's (to the second), then the first row's start (two launches within one second)
    runs = sorted(runs, key=lambda r: (r.run.created_at, min((row.started_at for row in r.rows), default=0.0)))
    first = runs[0].run
    for what, key in ALIKE.items():
        values = {repr(key(r.run)) for r in runs}
        if len(values) > 1:
            raise ValueError(f"the launches differ in {what}: {', '.join(sorted(values))}")
    sweep = first.sweep
    planned = set(
        product(sweep.get("implementations") or [], *(sweep.get(k) or [] for k in ("passes", "dtypes", "M", "N")))
    )
    rows: dict[tuple, ResultRow] = {}
    for run in runs:  # oldest first: a later launch's row replaces an earlier one of the same case
        for row in run.rows:
            if run is not runs[0] and _case(row) not in planned:
                raise ValueError(f"{run.run.run_id} measured {_case(row)}, not a case of {first.run_id}'s sweep")
            rows[_case(row)] = row.model_copy(update={"run_id": first.run_id})
    complete = bool(planned) and planned <= set(rows)
    impls = {name: i for i, name in enumerate(sweep.get("implementations") or [])}
    # the engine's order: shape by shape, each shape's implementations side by side
    order = {c: i for i, c in enumerate(sorted(planned, key=lambda c: (c[1], c[2], c[3], c[4], impls[c[0]])))}
    merged = sorted(rows.values(), key=lambda r: (order.get(_case(r), len(order)), _case(r)))
    header = first.model_copy(
        update={
            "merged_from": [
                {
                    "run_id": r.run.run_id,
                    "created_at": r.run.created_at,
                    "ceiling_GBps": r.run.ceiling_GBps,
                    "rows": len(r.rows),
                }
                for r in runs
            ]
        }
    )
    baseline = sweep.get("baseline") or DEFAULT_BASELINE
    return RunFile(run=header, rows=merged, summary=summarize(merged, complete=complete, baseline=baseline))
