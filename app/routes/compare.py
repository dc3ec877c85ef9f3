"""`GET /api/compare?base=RUN_ID&new=RUN_ID`: NEW/BASE GB/s per shape and implementation of two stored runs
(the engine's engine.compare, the same logic as `rmsnorm-dash compare`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query

from app.schemas import ErrorBody
from app.state import Service, get_service
from engine.compare import MixedTiming, compare_runs

router = APIRouter(tags=["runs"])


def _run(service: Service, run_id: str, which: str) -> dict:
    document = service.store.get_run(run_id)
    if document is None:
        raise HTTPException(status_code=404, detail=f"no run with id {run_id!r} ({which})")
    return document


@router.get("/api/compare", responses={404: {"model": ErrorBody, "description": "a run id is not stored"},
                                       409: {"model": ErrorBody, "description": "the runs use different timing modes"}})
def compare(
    base: str = Query(..., min_length=1, max_length=200, description="the base run's id"),
    new: str = Query(..., min_length=1, max_length=200, description="the new run's id"),
    allow_mixed_timing: bool = Query(False, description="compare runs of different timing modes anyway"),
    service: Service = Depends(get_service),
) -> dict[str, Any]:
    """``{"base": {"run_id", "timing"}, "new": {...}, "rows": [{"key", "pass", "dtype", "M", "N", "impl",
    "base_GBps", "new_GBps", "ratio"}], "only_in_base": [keys], "only_in_new": [keys], "min_ratio"}``; only rows
    measured ``ok`` in both runs are compared."""
    base_doc, new_doc = _run(service, base, "base"), _run(service, new, "new")
    try:
        return compare_runs(base_doc, new_doc, allow_mixed_timing=allow_mixed_timing)
    except MixedTiming as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
