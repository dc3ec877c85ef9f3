"""The network edge, before any route runs: which addresses this process really listens on, how big a request
body may be (refused with 413 before it is read whole), JSON bodies parsed off the event loop, and non-finite
numbers refused with 422 naming the field."""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.settings import is_loopback

IMPORT_PATH = "/api/runs/import"


# -- the bound socket --------------------------------------------------------------------------------------------

def _hex_address(text: str) -> str:
    """``0100007F:1F40`` (little-endian IPv4) or the 32-hex-digit IPv6 form → the address without the port."""
    import ipaddress

    raw = bytes.fromhex(text.partition(":")[0])
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))


_LISTENING_TTL_S = 2.0
_listening: tuple[float, list[str]] | None = None


def listening_addresses() -> list[str]:
    """The local addresses of this process's listening TCP sockets (Linux: /proc); [] where that cannot be read.

    Read again at most every 2 s (the sockets are bound once, at start-up): the scan is a readlink per open file
    descriptor, milliseconds of system calls that each give up the GIL, and every request asks (issue 12: under
    load each of those calls waited for the event loop's thread to hand the GIL back)."""
    global _listening
    now = time.monotonic()
    if _listening is not None and now - _listening[0] < _LISTENING_TTL_S:
        return list(_listening[1])
    found = _scan_listening_addresses()
    _listening = (now, found)
    return list(found)


_NOT_HTTP: set[str] = set()
"""Listening sockets of this process that serve no HTTP: a Ray driver's own (`app.fleet`), opened while it joined
the cluster, before the HTTP server bound anything. They do not make the HTTP edge reachable from elsewhere."""


def not_http(inodes: set[str]) -> None:
    """Mark these listening sockets (`listening_sockets` keys) as not the HTTP edge's."""
    global _listening
    _NOT_HTTP.update(inodes)
    _listening = None


def _scan_listening_addresses() -> list[str]:
    return [address for inode, address in listening_sockets().items() if inode not in _NOT_HTTP]


def listening_sockets() -> dict[str, str]:
    """inode → local address of every listening TCP socket of this process (Linux: /proc); {} where unreadable."""
    try:
        inodes = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        found = {}
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                lines = open(table).read().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                parts = line.split()
                if len(parts) > 9 and parts[3] == "0A" and parts[9] in inodes:
                    found[parts[9]] = _hex_address(parts[1])
        return found
    except OSError:
        return {}


def reached_exposed(scope: Scope) -> bool:
    """Whether this request came through a socket other machines can reach: the connection's own local address,
    or any listening socket of this process (``uvicorn --host 0.0.0.0`` binds one whatever the settings say)."""
    server = scope.get("server")
    if server and server[0] and not is_loopback(str(server[0])) and _is_ip(str(server[0])):
        return True
    return any(not is_loopback(address) for address in listening_addresses())


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text.strip("[]"))
        return True
    except ValueError:
        return False


# -- body size -----------------------------------------------------------------------------------------------------

def too_large_message(limit: int, path: str) -> str:
    what = "a result file to import" if path == IMPORT_PATH else "a request body"
    setting = "RMSNORM_MAX_IMPORT_BYTES" if path == IMPORT_PATH else "RMSNORM_MAX_BODY_BYTES"
    return f"{what} may be at most {limit} bytes ({limit / (1 << 20):.1f} MiB; the server's {setting}): 413"


class BodyLimit:
    """ASGI middleware: a body announced (Content-Length) or sent larger than the path's limit is answered 413
    at once, without reading it whole; a chunked body is counted as it arrives. The body read (at most the limit)
    is replayed to the app."""

    def __init__(self, app: ASGIApp, limit: int, import_limit: int) -> None:
        self.app, self.limit, self.import_limit = app, limit, import_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        limit = self.import_limit if scope["path"] == IMPORT_PATH else self.limit
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    announced = int(value)
                except ValueError:
                    return await _answer(send, 400, "Content-Length is not a number")
                if announced > limit:
                    return await _answer(send, 413, too_large_message(limit, scope["path"]))
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away before its body was whole
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > limit:
                return await _answer(send, 413, too_large_message(limit, scope["path"]))
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _answer(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


# -- JSON off the event loop, finite numbers only ------------------------------------------------------------------

def first_non_finite(value: Any, path: tuple = ()) -> tuple | None:
    """The path to the first NaN/±Infinity in a parsed JSON value, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, dict):
        for key, item in value.items():
            found = first_non_finite(item, path + (key,))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = first_non_finite(item, path + (index,))
            if found is not None:
                return found
    return None


class BodyError(Exception):
    """A body that is not JSON or holds a non-finite number (422): ``errors`` in FastAPI's format."""

    def __init__(self, status: int, errors: list[dict]) -> None:
        self.status, self.errors = status, errors
        super().__init__(errors[0]["msg"])


def _json_number(text: str) -> int | float:
    """A JSON number written with a fraction or exponent: ``8.0`` and ``1e3`` have integer values, so they are ints
    (JSON Schema's "integer" admits them; an int is a valid float too); ``0.5`` stays a float. Strings and booleans
    are never numbers here (strict validation)."""
    value = float(text)
    return int(value) if value.is_integer() else value


def parse_json(body: bytes) -> Any:
    """Parse a JSON body; raises `BodyError` (422: not JSON, or a non-finite number naming the field)."""
    try:
        value = json.loads(body, parse_float=_json_number)
    except (ValueError, RecursionError) as exc:
        raise BodyError(422, [{"type": "json_invalid", "loc": ["body"], "input": None,
                               "msg": f"the body is not valid JSON: {str(exc)[:200]}"}]) from None
    where = first_non_finite(value)
    if where is not None:
        field = ".".join(map(str, where)) or "body"
        raise BodyError(422, [{"type": "finite_number", "loc": ["body", *where], "input": None,
                               "msg": f"{field}: NaN and Infinity are not numbers JSON allows; send a finite number"}])
    return value


async def parse_json_off_loop(body: bytes) -> Any:
    return await run_in_threadpool(parse_json, body)


async def read_model(request, model, **validate_kw):
    """The request's JSON body validated as ``model`` strictly (no "8" for 8), both off the event loop; a bad body
    raises FastAPI's `RequestValidationError` (422, the fields at fault named, like any other body)."""
    from fastapi.exceptions import RequestValidationError
    from pydantic import ValidationError

    body = await request.body()

    def work():
        try:
            value = parse_json(body)
        except BodyError as exc:
            raise RequestValidationError(exc.errors) from None
        try:
            return model.model_validate(value, strict=True, **validate_kw)
        except ValidationError as exc:
            raise RequestValidationError([{**err, "loc": ("body", *err["loc"])}
                                          for err in exc.errors(include_url=False)]) from None

    return await run_in_threadpool(work)


def json_body(model) -> dict:
    """``openapi_extra`` for a route that reads its body with `read_model`: the body's schema is ``model``'s."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}
