"""`GET /api/health`: what this service runs on, its devices and queues, and what its timings mean."""

from __future__ import annotations

import os

from fastapi import APIRouter, Depends

from app.schemas import Health
from app.state import Service, get_service
from kernels.bench.device import package_version

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


@router.get("/api/health", response_model=Health)
def health(service: Service = Depends(get_service)) -> Health:
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
    return Health(
        version=package_version(),
        device="cpu" if cpu_only else gpus[0]["name"],
        cpu_only=cpu_only,
        triton_native=_triton_native(),
        ceiling_GBps=first.get("ceiling_GBps"),
        gpus=devices,
        max_queue=service.settings.max_queue,
        token_required=service.settings.exposed and not service.settings.allow_no_token,
        message=message,
    )
