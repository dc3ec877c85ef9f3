"""`GET /api/compare?base=RUN_ID&new=RUN_ID`: NEW/BASE GB/s per shape and implementation of two stored runs
(the engine's engine.compare, the same logic as `rmsnorm-dash compare`); `GET /api/trends?device=NAME`: every
stored run of one device and timing mode, in time order, per pass and implementation (engine.compare.trends)."""

from __future__ import annotations

from typing import Any, Optional

from fastapi import APIRouter, Depends, HTTPException, Query

from app.schemas import ErrorBody
from app.state import Service, get_service
from engine.compare import DEFAULT_FAIL_BELOW, MixedTiming, compare_runs, timing_mode, trends

router = APIRouter(tags=["runs"])


def _run(service: Service, run_id: str, which: str) -> dict:
    document = service.store.get_run(run_id)
    if document is None:
        raise HTTPException(status_code=404, detail=f"no run with id {run_id!r} ({which})")
    return document


@router.get(
    "/api/compare",
    responses={
        404: {"model": ErrorBody, "description": "a run id is not stored"},
        409: {"model": ErrorBody, "description": "the runs use different timing modes"},
    },
)
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


@router.get("/api/trends", responses={404: {"model": ErrorBody, "description": "no stored run of that device"}})
def get_trends(
    device: Optional[str] = Query(
        None,
        min_length=1,
        max_length=200,
        description="a device name as /api/runs lists it; default: the newest GPU run's",
    ),
    timing: Optional[str] = Query(
        None,
        min_length=1,
        max_length=40,
        description='"events", "cuda-graph" or "perf_counter"; default: the timing mode of that device\'s newest run',
    ),
    fail_below: float = Query(
        DEFAULT_FAIL_BELOW,
        gt=0,
        le=10,
        description="flag a step whose geomean NEW/BASE "
        "ratio is under this (the threshold of `rmsnorm-dash compare --fail-below`)",
    ),
    service: Service = Depends(get_service),
) -> dict[str, Any]:
    """``{"device", "timing", "devices", "timings", "fail_below", "runs": [{"run_id", "created_at", "git_commit",
    "complete"}], "series": [{"pass", "impl", "points": [{"run_id", "created_at", "git_commit", "shapes", "GBps",
    "shared", "base_GBps", "new_GBps", "ratio", "index", "regression"}]}], "regressions": [...]}``: runs oldest
    first; a point compares a run with the previous run that measured that pass and implementation, over the
    shapes both measured (geometric means of GB/s)."""
    listing = service.store.list_runs()
    devices = list(dict.fromkeys(r["device_name"] for r in listing if r["device_name"]))
    if device is None:
        gpu = [r for r in listing if r["kind"] == "cuda" and r["counts"].get("ok")] or listing
        if not gpu:
            raise HTTPException(status_code=404, detail="no stored run: device has nothing to default to")
        device = gpu[0]["device_name"]
    docs = [d for d in (service.store.get_run(r["run_id"]) for r in listing if r["device_name"] == device) if d]
    if not docs:
        raise HTTPException(status_code=404, detail=f"device: no stored run of {device!r} (stored: {devices})")
    modes = list(dict.fromkeys(timing_mode(d) for d in docs))  # newest first
    if timing is None:
        timing = modes[0]
    chosen = [d for d in docs if timing_mode(d) == timing]
    if not chosen:
        raise HTTPException(status_code=404, detail=f"timing: no {timing!r} run of {device!r} (its modes: {modes})")
    return {
        "device": device,
        "timing": timing,
        "devices": devices,
        "timings": modes,
        **trends(chosen, fail_below=fail_below),
    }
