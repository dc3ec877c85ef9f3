"""The NDJSON streaming response (``application/x-ndjson``, one JSON object per line).

Unlike Starlette's `StreamingResponse` under ASGI spec 2.4, it always listens for the client's disconnect while
streaming, so a client that goes away is noticed at once — even while its job waits in a queue and no line is
being sent — and the body iterator is cancelled (its ``finally`` cancels the job)."""

from __future__ import annotations

import json
import math
from typing import Any, AsyncIterator

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

MEDIA_TYPE = "application/x-ndjson"


def finite(value: Any) -> Any:
    """JSON has no NaN/Infinity: such floats become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def ndjson_line(obj: dict) -> bytes:
    return (json.dumps(finite(obj), separators=(",", ":"), allow_nan=False, default=str) + "\n").encode()


class NdjsonResponse(StreamingResponse):
    media_type = MEDIA_TYPE

    def __init__(self, content: AsyncIterator[bytes], status_code: int = 200, headers: dict | None = None) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})}
        super().__init__(content, status_code=status_code, headers=headers, media_type=MEDIA_TYPE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def stream_then_stop() -> None:
                try:
                    await self.stream_response(send)
                except OSError:  # the client is gone (ASGI 2.4 servers raise on send)
                    pass
                group.cancel_scope.cancel()

            async def listen_then_stop() -> None:
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        break
                group.cancel_scope.cancel()

            group.start_soon(stream_then_stop)
            await listen_then_stop()
