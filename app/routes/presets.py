"""`GET /api/presets`: the named shape presets a sweep may ask for (``"preset": "models"``), from the engine's
engine.presets (one source of truth)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engine.presets import presets_document

router = APIRouter(tags=["implementations"])


@router.get("/api/presets")
def presets() -> list[dict[str, Any]]:
    """``[{"name", "description", "M", "N", "labels": {"<N>": [model names]}}]``."""
    return presets_document()
