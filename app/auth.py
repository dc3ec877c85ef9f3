"""Who may write: `POST /benchmark`, `DELETE /api/runs/{id}` and `POST /api/runs/import` pass through
`require_write_access`. The rule itself is `Settings.write_refusal` (loopback: anyone local; bound elsewhere: the
API token, sent as ``Authorization: Bearer <token>`` or ``X-API-Token: <token>``)."""

from __future__ import annotations

from fastapi import HTTPException, Request


def presented_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return request.headers.get("x-api-token") or None


def require_write_access(request: Request) -> None:
    refusal = request.app.state.service.settings.write_refusal(presented_token(request))
    if refusal is not None:
        status, reason = refusal
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        raise HTTPException(status_code=status, detail=reason, headers=headers)
