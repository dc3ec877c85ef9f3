"""Interleaved rounds: where noise decides who wins a shape, measure its implementations several times in turn.

A GPU's speed drifts during a long run (docs/NOTES.md, "twelfth session": slow modes that come and go for whichever
implementation is being timed). One row per case measured once compares implementations at different moments; with
``rounds`` R, every shape's implementations are measured R times in turn (A B C, A B C, …) and each keeps the row of
its median round, with every round's median beside it (``round_medians_us``) so the spread is shown, not hidden.
Host time is a separate quantity (the CPU's, drifting on its own clock): a merged row's ``host_us`` is the median of
its rounds' host times, each listed in ``round_host_us``.

    interleave(cases, R)   the plan's cases with each shape's group repeated R times, in place
    merge_rounds(rows)     one case's R rows → one row (the median round's, every round's median listed)
"""

from __future__ import annotations

import statistics
from itertools import groupby
from typing import Sequence

from engine.models import Case, ResultRow

MAX_ROUNDS = 9


def _shape(case: Case) -> tuple:
    return case.dtype, case.pass_, case.M, case.N


def interleave(cases: Sequence[Case], rounds: int) -> list[Case]:
    """``cases`` (the plan's order: every implementation of one shape next to each other) with each shape's group of
    implementations repeated ``rounds`` times before the next shape."""
    if not 1 <= rounds <= MAX_ROUNDS:
        raise ValueError(f"rounds must be 1…{MAX_ROUNDS}, not {rounds}")
    out: list[Case] = []
    for _, group in groupby(cases, key=_shape):
        group = list(group)
        out.extend(group * rounds)
    return out


def merge_rounds(rows: Sequence[ResultRow]) -> ResultRow:
    """One case's rows, one per round, as one row: the round whose median is the median of the rounds' medians (the
    lower middle one for an even count), so its quartiles and GB/s belong together; ``rounds`` and
    ``round_medians_us`` (in the order measured) beside it. ``host_us`` is the median of the rounds' host times
    (listed in ``round_host_us``): the host's noise is not the GPU's, so the GPU's median round does not pick it.
    A round that failed the correctness gate makes the case ``wrong``; a case no round could time keeps its last
    row (skipped or error)."""
    if not rows:
        raise ValueError("no rows to merge")
    keys = {(r.impl, r.pass_, r.dtype, r.M, r.N) for r in rows}
    if len(keys) != 1:
        raise ValueError(f"rows of different cases: {sorted(keys)}")
    timed = [r for r in rows if r.status in ("ok", "wrong") and r.median_us is not None]
    if not timed:
        return rows[-1]
    ordered = sorted(timed, key=lambda r: r.median_us)
    base = ordered[(len(ordered) - 1) // 2]
    wrong = next((r for r in timed if r.status == "wrong"), None)
    extra = {
        "rounds": len(rows),
        "round_medians_us": [r.median_us for r in timed],
        "started_at": min(r.started_at for r in rows),
        "ended_at": max(r.ended_at for r in rows),
    }
    hosts = [host for host in (getattr(r, "host_us", None) for r in timed) if host is not None]
    if hosts:
        extra.update(host_us=statistics.median(hosts), round_host_us=hosts)
    if wrong is not None:
        extra.update(status="wrong", reason=wrong.reason, verified=False, max_rel_err=wrong.max_rel_err)
    return ResultRow.model_validate({**base.model_dump(by_alias=True), **extra})
