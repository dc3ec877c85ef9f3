"""`GET /api/implementations` (the registry) and `GET /api/launch` (each implementation's real grid for a shape)."""

from __future__ import annotations

from typing import Any, Optional

from fastapi import APIRouter, Depends, Query

from app.state import Service, get_service
from engine.catalog import DEFAULT_SM_COUNT, launch_grids, list_implementations
from engine.models import MAX_M, MAX_N

router = APIRouter(tags=["implementations"])


@router.get("/api/implementations")
def implementations() -> list[dict[str, Any]]:
    """Every registered implementation: name, passes, deterministic, family, description, available + reason, source."""
    return list_implementations()


@router.get("/api/launch")
def launch(
    M: int = Query(..., ge=1, le=MAX_M, description="rows"),
    N: int = Query(..., ge=1, le=MAX_N, description="row length"),
    sm_count: Optional[int] = Query(
        None, ge=1, le=100_000, description=f"SMs; default: the first GPU's, else {DEFAULT_SM_COUNT}"
    ),
    service: Service = Depends(get_service),
) -> dict[str, Optional[dict[str, Any]]]:
    """``{implementation: launch grid or null}``: the grid each kernel would launch for an [M, N] input."""
    if sm_count is None:
        sm_count = service.scheduler.gpu_sm_count() or DEFAULT_SM_COUNT
    return launch_grids(M, N, sm_count)
