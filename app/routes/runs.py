"""Stored runs: list, fetch (the result-file document), CSV and JSON download, delete, import a result file."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import AfterValidator
from starlette.convertors import Convertor, register_url_convertor

from app.auth import require_write_access
from app.edge import json_body
from app.ndjson import finite
from app.schemas import (
    RUN_ID_PATTERN,
    RUN_ID_REGEX,
    Deleted,
    ErrorBody,
    ImportResult,
    RunDocument,
    RunFileUpload,
    RunListing,
)
from app.state import Service, get_service

router = APIRouter(tags=["runs"])


class RunIdConvertor(Convertor):
    """``{run_id:run_id}``: a path segment that is not ``import`` and does not end in .csv/.json, so that
    ``/api/runs/x.csv`` and ``/api/runs/import`` belong to their own operations only (their 405s name only those
    operations' methods in ``Allow``); the id's full pattern is checked after routing (422)."""

    regex = r"(?!import$)(?![^/]*\.(?:csv|json)$)[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("run_id", RunIdConvertor())


def _addressable(run_id: str) -> str:
    if not RUN_ID_PATTERN.match(run_id):
        raise ValueError(
            "a run id is 1-200 letters, digits, '-', '_', '.' or ':', starts with a letter or digit, is "
            "not 'import' and does not end in .csv/.json"
        )
    return run_id


# the pattern uses look-aheads, which pydantic's own regex engine lacks: the schema shows it, Python's re checks it
RunId = Annotated[
    str,
    Path(min_length=1, max_length=200, json_schema_extra={"pattern": RUN_ID_REGEX}, description="the run id"),
    AfterValidator(_addressable),
]
NOT_FOUND = {404: {"model": ErrorBody, "description": "no run with this id"}}
WRITE_REFUSED = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody, "description": "wrong or missing token, or sent by a page of another origin"},
}


def _run_or_404(service: Service, run_id: str) -> dict:
    document = service.store.get_run(run_id)
    if document is None:
        raise HTTPException(status_code=404, detail=f"no run with id {run_id!r}")
    return document


@router.get("/api/runs", response_model=list[RunListing])
def list_runs(service: Service = Depends(get_service)) -> list[dict]:
    """Every stored run, newest first (live runs and imported result files)."""
    return service.store.list_runs()


@router.get(
    "/api/runs/{run_id}.csv",
    response_class=Response,
    responses={
        200: {"content": {"text/csv": {}}, "description": "one line per row; nested fields flattened"},
        **NOT_FOUND,
    },
)
def run_csv(run_id: RunId, service: Service = Depends(get_service)) -> Response:
    text = service.store.export_csv(run_id)
    if text is None:
        raise HTTPException(status_code=404, detail=f"no run with id {run_id!r}")
    return Response(
        text,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{_file_stem(run_id)}.csv"'},
    )


@router.get("/api/runs/{run_id}.json", response_model=RunDocument, responses=NOT_FOUND)
def run_json_download(run_id: RunId, service: Service = Depends(get_service)) -> JSONResponse:
    """The run as a result file, offered as a download (the same document as `GET /api/runs/{id}`)."""
    document = _run_or_404(service, run_id)
    return JSONResponse(
        finite(document), headers={"Content-Disposition": f'attachment; filename="{_file_stem(run_id)}.json"'}
    )


@router.get("/api/runs/{run_id:run_id}", response_model=RunDocument, responses=NOT_FOUND)
def get_run(
    run_id: RunId,
    service: Service = Depends(get_service),
    baseline: str | None = Query(
        None,
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+-]*$",
        description="the summary's speedups and standings over this implementation "
        "instead of the run's own baseline (what the dashboard's baseline picker "
        "shows)",
    ),
) -> JSONResponse:
    """The run as a result file: ``{"run": header, "rows": [...], "summary": {...}}``."""
    document = _run_or_404(service, run_id)
    if baseline is not None and not (document["summary"] or {}).get("running"):
        from engine.summary import summarize

        summary = document["summary"] or {}
        document["summary"] = {**summary, **summarize(document["rows"], summary.get("complete", True), baseline)}
    return JSONResponse(finite(document))


@router.delete(
    "/api/runs/{run_id:run_id}",
    response_model=Deleted,
    dependencies=[Depends(require_write_access)],
    responses={
        **NOT_FOUND,
        **WRITE_REFUSED,
        409: {"model": ErrorBody, "description": "the run is being measured: cancel it first (close its stream)"},
    },
)
def delete_run(run_id: RunId, service: Service = Depends(get_service)) -> Deleted:
    """Delete a stored run for good (a committed results/ file deleted here is not imported again at start)."""
    if service.scheduler.is_running(run_id):
        raise HTTPException(
            status_code=409,
            detail=f"run {run_id!r} is being measured; cancel it first (close its "
            "stream or stop the request), then delete it",
        )
    if not service.store.delete_run(run_id):
        raise HTTPException(status_code=404, detail=f"no run with id {run_id!r}")
    return Deleted(run_id=run_id)


@router.post(
    "/api/runs/import",
    response_model=ImportResult,
    dependencies=[Depends(require_write_access)],
    openapi_extra=json_body(RunFileUpload),
    responses={
        422: {"model": ErrorBody, "description": "not a valid result file (fields at fault named)"},
        413: {"model": ErrorBody, "description": "larger than RMSNORM_MAX_IMPORT_BYTES (16 MiB)"},
        415: {"model": ErrorBody, "description": "not declared 'Content-Type: application/json'"},
        **WRITE_REFUSED,
    },
)
async def import_run(
    request: Request,
    service: Service = Depends(get_service),
    label: str | None = Query(
        None, min_length=1, max_length=200, description="what History lists it as, e.g. the file's name"
    ),
) -> ImportResult:
    """Store a result file measured elsewhere (e.g. one of `results/*.json`); a run id already stored is left as is.
    The file is checked strictly with the engine's `RunFile` model, in a process of its own (`app.import_process`:
    a 16 MB file's parsing holds the GIL for hundreds of ms): a bad one is answered 422 naming the fields at
    fault, a number computed from it that is not finite (a speedup) 422 naming the row and field."""
    from fastapi.exceptions import RequestValidationError

    from app.import_process import import_in_child

    result = await import_in_child(str(service.store.path), await request.body(), label)
    if "errors" in result:
        raise RequestValidationError(result["errors"])
    return ImportResult(**result)


def _file_stem(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in run_id)[:120] or "run"
