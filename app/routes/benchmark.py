"""`POST /benchmark`: queue a sweep and stream its results as NDJSON (``queued``, ``header``, ``row``…, ``summary``).

``curl -N -X POST localhost:8000/benchmark -H 'content-type: application/json' \\
    -d '{"implementations":["eager"],"M":[256],"N":[512],"repetitions":5}'``
prints one line per event as it happens. ``?stream=false`` waits and returns the run as one document.

``"fleet": "each-model"`` queues one run per GPU model (linked by a ``group_id``): the stream carries every run's
lines (each with its ``run_id``) and ends after the last run's summary; ``?stream=false`` returns
``{"group_id", "runs": [document, …]}``.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from app.auth import require_write_access
from app.edge import json_body, read_model
from app.queues import Job, QueueFull, UnknownDevice
from app.ndjson import MEDIA_TYPE, NdjsonResponse, finite, ndjson_line
from app.schemas import BenchmarkRequest, ErrorBody, QueuedLine, RunDocument
from app.settings import Settings, get_settings
from app.state import Service, get_service
from engine.models import Case, Sweep

router = APIRouter(tags=["benchmark"])

DISCONNECT_POLL_S = 1.0
"""How often a ``?stream=false`` request checks whether its client is still there."""

STREAM_DOC = (
    "NDJSON (`application/x-ndjson`), one JSON object per line, each with `type` and `run_id`: "
    "`queued` (position in the device's queue; again whenever it moves), `header` (one per device: device, "
    "ceiling, versions), `row` (one per case, as measured: a result row), `summary` (counts, complete, best); "
    "`heartbeat` (`at`, `running`, `rows`) whenever nothing else was sent for RMSNORM_HEARTBEAT_S (4 s), so proxies "
    "and read timeouts never see a silent stream while a long case runs: a reader ignores it. "
    "With `?stream=false`: one JSON document `{run, rows, summary}`."
)


def _validation_error(field: str, message: str, value=None) -> HTTPException:
    return HTTPException(
        status_code=422, detail=[{"type": "value_error", "loc": ["body", field], "msg": message, "input": value}]
    )


def heartbeat(job: Job) -> dict:
    """The line sent when the stream has been silent for ``heartbeat_s``: the run is alive (queued, or a case is
    being measured: ``running``), with the rows measured so far."""
    import time

    return {
        "type": "heartbeat",
        "run_id": job.run_id,
        "at": round(time.time(), 3),
        "running": bool(job.active),
        "rows": len(job.rows),
        "planned": len(job.cases),
    }


def _plan(body: BenchmarkRequest) -> tuple[Sweep, list[Case]]:
    """The request, validated once (by `read_model`), as the engine's `Sweep` and its planned cases."""
    from engine.runner import plan

    sweep = body.engine_sweep()
    return sweep, plan(sweep)


@router.post(
    "/benchmark",
    dependencies=[Depends(require_write_access)],
    response_model=RunDocument,
    openapi_extra=json_body(BenchmarkRequest),
    responses={
        200: {"description": STREAM_DOC, "content": {MEDIA_TYPE: {"schema": QueuedLine.model_json_schema()}}},
        401: {"model": ErrorBody, "description": "API token missing (server bound to a non-loopback address)"},
        403: {
            "model": ErrorBody,
            "description": "wrong API token, writes refused on this bind, or sent by a page of another origin",
        },
        413: {"model": ErrorBody, "description": "body larger than RMSNORM_MAX_BODY_BYTES (1 MiB by default)"},
        415: {"model": ErrorBody, "description": "the body is not declared 'Content-Type: application/json'"},
        422: {"model": ErrorBody, "description": "not a valid sweep (strict types, finite numbers): fields named"},
        429: {"model": ErrorBody, "description": "the queue of every eligible device is full"},
    },
)
async def benchmark(
    request: Request,
    stream: bool = Query(True, description="false: wait and return the whole run as one JSON document"),
    service: Service = Depends(get_service),
    settings: Settings = Depends(get_settings),
):
    """Run a sweep (every implementation × pass × dtype × M × N) on one device, or split over all of them.
    The body is a `BenchmarkRequest`, validated strictly and off the event loop."""
    body: BenchmarkRequest = await read_model(request, BenchmarkRequest)
    sweep, cases = _plan(body)
    if not cases:
        raise _validation_error(
            "implementations", "the sweep has no case to run (no implementation available here)", body.implementations
        )
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[dict] = asyncio.Queue()

    def listener(line: dict) -> None:  # called from the scheduler's threads
        try:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            pass

    try:
        if body.fleet == "each-model":
            jobs = service.scheduler.submit_group(body, sweep, cases, listener=listener)
        else:
            jobs = [service.scheduler.submit(body, sweep, cases, listener=listener)]
    except UnknownDevice as exc:
        raise _validation_error(exc.field, str(exc), getattr(body, exc.field)) from None
    except QueueFull as exc:
        raise HTTPException(status_code=429, detail=str(exc), headers={"Retry-After": "30"}) from None
    job = jobs[0]

    def cancel_unfinished() -> None:
        for one in jobs:
            if not one.finished.is_set():
                service.scheduler.cancel(one)
            one.detach()

    if not stream:
        try:
            checked, summaries = loop.time(), 0
            while True:
                try:
                    line = await asyncio.wait_for(lines.get(), timeout=DISCONNECT_POLL_S)
                except asyncio.TimeoutError:
                    line = None
                if line is not None and line["type"] == "summary":
                    summaries += 1
                    if summaries == len(jobs):
                        break
                if loop.time() - checked >= DISCONNECT_POLL_S:
                    checked = loop.time()
                    if await request.is_disconnected():
                        break  # nobody waits for the document any more: cancel (in finally)
        finally:
            cancel_unfinished()
        if job.group is None:
            return JSONResponse(finite(job.document()))
        return JSONResponse(finite({"group_id": job.group["group_id"], "runs": [one.document() for one in jobs]}))

    async def body_lines():
        try:
            summaries = 0
            while True:
                try:
                    line = await asyncio.wait_for(lines.get(), timeout=settings.heartbeat_s)
                except asyncio.TimeoutError:  # (an item put meanwhile stays queued for the next get)
                    yield ndjson_line(heartbeat(job))
                    continue
                yield ndjson_line(line)
                if line["type"] == "summary":
                    summaries += 1
                    if summaries == len(jobs):
                        return
        finally:
            cancel_unfinished()  # the client went away: drop the cases not started

    headers = {"X-Run-Id": job.run_id}
    if job.group is not None:
        headers["X-Group-Id"] = job.group["group_id"]
    return NdjsonResponse(body_lines(), headers=headers)
