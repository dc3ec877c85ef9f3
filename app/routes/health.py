"""`GET /api/health`: what this service runs on, its devices and queues, and what its timings mean."""

from __future__ import annotations

import os

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from app.auth import request_exposed
from app.schemas import Health
from app.settings import Settings, get_settings
from app.state import Service, get_service
from engine.device import package_version

router = APIRouter(tags=["service"])

CPU_MESSAGE = "CPU only: timings are CPU timings; committed GPU results are under History"


def _triton_native() -> bool:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def self_check_state(settings: Settings, devices: list[dict]) -> dict | None:
    """With RMSNORM_SELF_CHECK=gpu: ``{"ok": true|false|null (pending), "detail"}`` over every worker."""
    if settings.self_check != "gpu":
        return None
    results = [d.get("self_check") for d in devices]
    failed = [f"{d['label']}: {r['detail']}" for d, r in zip(devices, results) if r is not None and not r["ok"]]
    if not any(d["label"].startswith("cuda:") for d in devices):
        failed.append("no GPU worker: the self-check needs a GPU")
    if failed:
        return {"ok": False, "detail": "; ".join(failed)}
    if any(r is None for r in results):
        return {"ok": None, "detail": "pending: the workers are starting"}
    return {"ok": True, "detail": "; ".join(f"{d['label']}: {r['detail']}" for d, r in zip(devices, results))}


@router.get(
    "/api/health",
    response_model=Health,
    responses={503: {"model": Health, "description": "RMSNORM_SELF_CHECK=gpu and a worker's GPU self-check failed"}},
)
def health(
    service: Service = Depends(get_service),
    settings: Settings = Depends(get_settings),
    exposed: bool = Depends(request_exposed),
):
    devices = service.scheduler.status()
    gpus = [d for d in devices if d["label"].startswith("cuda:")]
    cpu_only = not gpus
    first = devices[0]
    if cpu_only:
        message = CPU_MESSAGE
        if len(devices) > 1:
            message += f" ({len(devices)} CPU worker processes share this machine's cores)"
    else:
        names = sorted({d["name"] for d in gpus})
        message = f"{len(gpus)} GPU worker(s): {', '.join(names)}; one job at a time per GPU"
    fleet = service.fleet.status(devices) if service.fleet is not None else None
    if fleet is not None:
        hosts = sorted({node["host"] for node in fleet["nodes"]})
        message = (
            f"Ray fleet: {len(gpus)} GPU(s) on {len(fleet['nodes'])} node(s) ({', '.join(hosts)}), "
            f"{fleet['ready']} ready; one job at a time per GPU"
        )
    checked = self_check_state(settings, devices)
    document = Health(
        version=package_version(),
        device="cpu" if cpu_only else gpus[0]["name"],
        cpu_only=cpu_only,
        # a fleet's kernels compile on its nodes: what their actors run on, not this (perhaps GPU-less) machine
        triton_native=(any(d.get("kind") == "cuda" for d in devices) if fleet is not None else _triton_native()),
        ceiling_GBps=first.get("ceiling_GBps"),
        gpus=devices,
        max_queue=settings.max_queue,
        token_required=exposed and not settings.allow_no_token,
        message=message,
        fleet=fleet,
        self_check=checked,
    )
    if checked is not None and checked["ok"] is False:
        return JSONResponse(status_code=503, content=document.model_dump(mode="json"))
    return document
