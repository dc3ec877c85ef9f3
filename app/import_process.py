"""`POST /api/runs/import`'s work in a process of its own: parse the body, validate it as a `RunFileUpload`
(strictly), recompute its summary and store it.

Why a process, not a thread: ``json.loads``, pydantic's validation and the store's ``json.dumps`` of a 16 MB file
each hold the GIL for their whole call (hundreds of ms on a shared 2-core machine), so in any thread of the server
they stall the event loop: `/api/health` took 295-698 ms while such a file was stored (issue 34). The child imports
the API models and the store only (no torch: ~0.3 s to start); one child serves every app of the process, started on
the first import and kept. SQLite serializes its writes with the server's own (WAL, a busy timeout).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

_pool: ProcessPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            # spawn: the server has threads (dispatchers, uvicorn's), which a fork would copy mid-lock
            _pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        return _pool


def _forget(broken: ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is broken:
            _pool = None


def warm() -> None:
    """Start the child now (the app's start-up), so the first import does not wait for it, and the server's fork
    of itself (tens of ms, with torch mapped) happens before any request."""
    _executor().submit(int)


async def import_in_child(db_path: str, body: bytes, label: str | None) -> dict:
    """``{"run_id", "imported", "rows"}``, or ``{"errors": [...]}`` (FastAPI's 422 list, inputs quoted short).
    A child that died (killed, out of memory) is replaced for the next import; this one raises."""
    pool = _executor()
    try:
        return await asyncio.wrap_future(pool.submit(import_body, db_path, body, label))
    except BrokenProcessPool:
        _forget(pool)
        raise


# -- in the child ------------------------------------------------------------------------------------------------

_stores: dict = {}


def import_body(db_path: str, body: bytes, label: str | None) -> dict:
    from pydantic import ValidationError

    from app.edge import BodyError, client_errors, parse_json
    from app.schemas import RunFileUpload
    from app.store import Store
    from engine.summary import NonFiniteResult

    try:
        value = parse_json(body)
    except BodyError as exc:
        return {"errors": exc.errors}
    try:
        document = RunFileUpload.model_validate(value, strict=True)
    except ValidationError as exc:  # quoted here: the whole file may be an error's input, not worth sending back
        return {"errors": client_errors(exc.errors(include_url=False), prefix=("body",))}
    checked = document.model_dump(mode="json", exclude_none=False)
    if not checked.get("headers"):
        checked.pop("headers", None)
    store = _stores.get(db_path) or _stores.setdefault(db_path, Store(db_path))
    try:
        imported = store.import_run(checked, source="import", undelete=True, label=label)
    except NonFiniteResult as exc:
        return {
            "errors": [
                {
                    "type": "finite_number",
                    "loc": ["body", "rows", exc.row, exc.field],
                    "msg": str(exc),
                    "input": checked["rows"][exc.row].get(exc.field),
                }
            ]
        }
    return {"run_id": document.run.run_id, "imported": imported, "rows": len(document.rows)}
