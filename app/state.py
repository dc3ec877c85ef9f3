"""The running service's parts, shared by the routes: settings, store and scheduler (``app.state.service``)."""

from __future__ import annotations

import logging

from fastapi import Request

from app.dispatch import Scheduler
from app.settings import Settings
from app.store import Store
from app.worker_handle import DeviceWorker

log = logging.getLogger("rmsnorm.service")


def validate_run_file(document: dict) -> dict:
    """A result file checked with the engine's `RunFile` model, as a JSON-ready dict (extra ``headers`` kept)."""
    from engine.models import RunFile, RunHeader

    checked = RunFile.model_validate(document).model_dump(mode="json")
    if isinstance(document, dict) and document.get("headers"):
        checked["headers"] = [RunHeader.model_validate(h).model_dump(mode="json") for h in document["headers"]]
    return checked


class Service:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = Store(settings.db_path)
        self.store.mark_interrupted()
        self.fleet = None
        """With a Ray address: the cluster's GPUs (`app.fleet.RayFleet`), one actor each, as the devices."""
        factory = DeviceWorker
        if settings.ray_address:
            from app.fleet import RayFleet

            self.fleet = RayFleet(settings.ray_address).connect()
            factory = self.fleet.worker
        self.labels = self.fleet.labels() if self.fleet is not None else settings.resolved_devices()
        self.scheduler = Scheduler(
            self.labels,
            self.store,
            settings.max_queue,
            plugins=settings.plugins,
            ceiling_bytes=settings.ceiling_bytes,
            case_timeout_s=settings.case_timeout_s,
            self_check=settings.self_check == "gpu",
            worker_factory=factory,
        )
        self.import_report: dict[str, list[str]] = {"imported": [], "present": [], "rejected": []}

    def close(self) -> None:
        """After the scheduler stopped: leave the Ray cluster, if the service joined one."""
        if self.fleet is not None:
            self.fleet.close()

    def import_results_dir(self) -> dict[str, list[str]]:
        """Import the committed ``results/*.json`` (idempotent: a run already stored is left alone)."""
        folder = self.settings.results_dir
        if folder is None or not folder.is_dir():
            return self.import_report
        self.import_report = self.store.import_paths(folder.glob("*.json"), validate_run_file)
        for rejected in self.import_report["rejected"]:
            log.warning("results file not imported: %s", rejected)
        return self.import_report


async def get_service(request: Request) -> Service:
    """FastAPI dependency (async: it only reads an attribute, so no hop to the thread pool)."""
    return request.app.state.service
