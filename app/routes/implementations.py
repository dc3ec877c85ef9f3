"""`GET /api/implementations` (the registry) and `GET /api/launch` (each implementation's real grid for a shape)."""

from __future__ import annotations

import logging
from typing import Any, Optional

from fastapi import APIRouter, Depends, Query

from app.state import Service, get_service
from engine.models import MAX_M, MAX_N, default_registry
from kernels.registry import describe_all

router = APIRouter(tags=["implementations"])
log = logging.getLogger("rmsnorm.routes")

DEFAULT_SM_COUNT = 132
"""An H100/H200's SM count, used when no GPU worker has reported its own."""


@router.get("/api/implementations")
def implementations() -> list[dict[str, Any]]:
    """Every registered implementation: name, passes, deterministic, family, description, available + reason, source."""
    return describe_all(default_registry())


@router.get("/api/launch")
def launch(
    M: int = Query(..., ge=1, le=MAX_M, description="rows"),
    N: int = Query(..., ge=1, le=MAX_N, description="row length"),
    sm_count: Optional[int] = Query(None, ge=1, le=100_000, description="SMs; default: the first GPU's, else 132"),
    service: Service = Depends(get_service),
) -> dict[str, Optional[dict[str, Any]]]:
    """``{implementation: launch grid or null}``: the grid each kernel would launch for an [M, N] input."""
    if sm_count is None:
        sm_count = next((w.info.get("sm_count") for w in service.scheduler.workers.values()
                         if w.kind == "cuda" and w.info and w.info.get("sm_count")), None) or DEFAULT_SM_COUNT
    out: dict[str, Optional[dict[str, Any]]] = {}
    for impl in default_registry():
        if impl.launch is None:
            out[impl.name] = None
            continue
        try:
            out[impl.name] = dict(impl.launch(M, N, sm_count))
        except Exception as exc:  # one plugin's bad launch function must not hide the others
            log.warning("launch(%s, %s, %s) of %s failed: %s", M, N, sm_count, impl.name, exc)
            out[impl.name] = None
    return out
