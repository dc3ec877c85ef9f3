"""Who may write: `POST /benchmark`, `DELETE /api/runs/{id}` and `POST /api/runs/import` depend on
`require_write_access`. The rule is `app.settings.write_refusal`: reached on a loopback socket, anyone local may
write (with a Host from the allow-list: no DNS rebinding); reached on a socket other machines can reach (the
address actually bound, whatever the settings say) or declared exposed, the API token is needed, sent as
``Authorization: Bearer <token>`` or ``X-API-Token: <token>`` and compared in constant time. Before that, a
write from a page of another origin is refused (403: `app.edge.write_origin_refusal`), and after it a body not
declared ``application/json`` (415: `app.edge.content_type_refusal`): what a cross-site form or no-cors fetch
sends is never parsed, let alone run."""

from __future__ import annotations

from fastapi import Depends, HTTPException, Request

from app.edge import content_type_refusal, reached_exposed, write_origin_refusal
from app.settings import Settings, get_settings, write_refusal


def presented_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return request.headers.get("x-api-token") or None


async def request_exposed(request: Request, settings: Settings = Depends(get_settings)) -> bool:
    """Whether this request must be treated as coming from another machine (FastAPI dependency; async, so no hop
    to the thread pool: `listening_addresses` is cached)."""
    return settings.exposed or reached_exposed(request.scope)


async def require_write_access(
    request: Request, settings: Settings = Depends(get_settings), exposed: bool = Depends(request_exposed)
) -> None:
    """(async: a few header comparisons, no hop to the thread pool)"""
    refusal = write_origin_refusal(settings, request.headers) or write_refusal(
        settings, presented_token(request), exposed=exposed, host_header=request.headers.get("host", "")
    )
    if refusal is None and request.method in ("POST", "PUT", "PATCH"):
        refusal = content_type_refusal(request.headers)
    if refusal is not None:
        status, reason = refusal
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        raise HTTPException(status_code=status, detail=reason, headers=headers)
