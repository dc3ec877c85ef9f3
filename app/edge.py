"""The network edge, before any route runs: the Host every request must name and the security headers every
response carries (`HostAndHeaders`), where a write may come from and what it must be (`write_origin_refusal`,
`content_type_refusal`), which addresses this process really listens on, how big a request body may be (refused
with 413 before it is read whole), JSON bodies parsed off the event loop, and non-finite numbers refused with 422
naming the field."""

from __future__ import annotations

import json
import math
import os
import time
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:  # app.settings imports the engine's device module (torch): the import process needs neither
    from app.settings import Settings

IMPORT_PATH = "/api/runs/import"


# -- Host, security headers, cross-site writes ---------------------------------------------------------------------

EMPTY_STYLE = "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"
"""The hash of an empty text: plotly.js adds its rules (mode bar, hover cursors) to empty ``<style>`` elements it
creates, through the CSSOM (``insertRule``, which a CSP does not govern); with this, those empty elements and only
they are allowed, not one inline style with content."""
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' " + EMPTY_STYLE + "; img-src 'self' data: blob:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""The page loads nothing from elsewhere and has no inline script, style or eval (tests/browser: Chromium reports
no violation with the page's charts, views and dock drawn)."""
DOCS_CSP = (
    CSP.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'").replace(
        "style-src 'self' " + EMPTY_STYLE, "style-src 'self' 'unsafe-inline'"
    )
    + "; worker-src 'self' blob:"
)
"""/docs and /redoc (FastAPI's pages, static text with an inline script that starts Swagger UI / ReDoc, whose
ReDoc runs a worker from a blob)."""
DOCS_PATHS = ("/docs", "/docs/oauth2-redirect", "/redoc")
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)


def security_headers(path: str) -> list[tuple[bytes, bytes]]:
    policy = DOCS_CSP if path in DOCS_PATHS else CSP
    return [(b"content-security-policy", policy.encode()), *SECURITY_HEADERS]


class HostAndHeaders:
    """ASGI middleware, outermost: a request whose Host is not this service's (`Settings.host_allowed`: DNS
    rebinding) is refused 403 whatever its method; every response, refusals included, carries the security headers
    (CSP, nosniff, frame-ancestors / X-Frame-Options, Referrer-Policy)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        added = security_headers(scope["path"])

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", ())}
                message["headers"] = [*message.get("headers", ()), *(h for h in added if h[0] not in names)]
            await send(message)

        host = next((value.decode("latin-1") for name, value in scope.get("headers", ()) if name == b"host"), None)
        from app.settings import host_refusal

        refusal = host_refusal(self.settings, host)
        if refusal is not None:
            return await _answer(with_headers, *refusal)
        await self.app(scope, receive, with_headers)


def _origin_netloc(origin: str) -> str | None:
    """``http://127.0.0.1:8000`` → ``127.0.0.1:8000`` (as a browser writes both Origin and Host: default port left
    out); None for ``null`` or anything that is not scheme://host[:port]."""
    scheme, sep, rest = origin.partition("://")
    if not sep or scheme not in ("http", "https") or not rest or "/" in rest:
        return None
    return rest.lower()


def write_origin_refusal(settings: Settings, headers) -> tuple[int, str] | None:
    """Why a write must be refused for where it comes from; None = allowed. A browser names the page's origin on
    every POST and DELETE (also a no-cors fetch or a form): it must be this service's own (the origin whose
    host:port is the request's Host) or one of RMSNORM_ALLOWED_ORIGINS (a reverse proxy that rewrites Host). With
    no Origin (curl, scripts), a ``Sec-Fetch-Site`` of another site or origin still refuses it."""
    origin = headers.get("origin")
    if origin is not None:
        origin = origin.strip()
        if origin.rstrip("/").lower() in {o.rstrip("/").lower() for o in settings.allowed_origins}:
            return None
        netloc = _origin_netloc(origin)
        host = (headers.get("host") or "").strip().lower()
        if netloc is not None and netloc == host:
            return None
        return 403, (
            f"a write from another origin ({origin[:100]!r}) is refused: this service writes only for "
            f"pages it served itself (behind a reverse proxy, add the page's origin to RMSNORM_ALLOWED_ORIGINS)"
        )
    site = (headers.get("sec-fetch-site") or "").strip().lower()
    if site in ("cross-site", "same-site"):
        return 403, f"a write sent by a page of another origin (Sec-Fetch-Site: {site}) is refused"
    return None


def content_type_refusal(headers) -> tuple[int, str] | None:
    """A write body must be declared ``application/json`` (UTF-8): a form or ``text/plain`` body is what a page of
    another origin can send without asking (no CORS preflight), so it is never read (415)."""
    declared = headers.get("content-type") or ""
    media, _, params = declared.partition(";")
    charset = next(
        (
            value.strip().strip('"').lower()
            for key, _, value in (p.strip().partition("=") for p in params.split(";"))
            if key.strip().lower() == "charset"
        ),
        None,
    )
    if media.strip().lower() != "application/json" or charset not in (None, "utf-8", "utf8"):
        return 415, (
            f"a write body must be sent with 'Content-Type: application/json' (UTF-8); this request says "
            f"{declared[:100]!r}"
        )
    return None


# -- the bound socket --------------------------------------------------------------------------------------------


def _hex_address(text: str) -> str:
    """``0100007F:1F40`` (little-endian IPv4) or the 32-hex-digit IPv6 form → the address without the port."""
    import ipaddress

    raw = bytes.fromhex(text.partition(":")[0])
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
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
    from app.settings import is_loopback

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
    """A JSON error answered from the edge, before any route (the connection is closed: a body may be unread)."""
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
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


INPUT_QUOTE_CHARS = 120
"""A 422 quotes at most this much of the value at fault (a 5 MB string sent is not sent back)."""


def quoted_input(value):
    """The ``input`` of a validation error, cut to a short prefix: a string or bytes value to its first
    `INPUT_QUOTE_CHARS` characters; a list or object to a short Python-style sketch of its start (`reprlib`: a few
    items, a few levels, never the whole of it walked)."""
    import reprlib

    if isinstance(value, (bytes, bytearray)):
        value = bytes(value[: INPUT_QUOTE_CHARS * 4]).decode("utf-8", "replace")
    if isinstance(value, str):
        return value if len(value) <= INPUT_QUOTE_CHARS else f"{value[:INPUT_QUOTE_CHARS]}… ({len(value)} characters)"
    if isinstance(value, (dict, list, tuple)):
        sketch = reprlib.Repr()
        sketch.maxlevel, sketch.maxdict, sketch.maxlist, sketch.maxtuple = 3, 6, 6, 6
        sketch.maxstring = sketch.maxother = 40
        text = sketch.repr(value)
        if len(text) > INPUT_QUOTE_CHARS or len(value) > 6:
            return text[:INPUT_QUOTE_CHARS] + ("…" if len(text) > INPUT_QUOTE_CHARS else "")
    return value


def client_errors(errors, prefix: tuple = ()) -> list[dict]:
    """Validation errors as a 422 body shows them: ``loc`` after ``prefix``, no docs URL, the input quoted short
    (`quoted_input`) and finite (JSON has no NaN), ``ctx`` values as text where they are not plain values."""
    from app.ndjson import finite

    out = []
    for err in errors:
        err = dict(err)
        err.pop("url", None)
        if prefix:
            err["loc"] = [*prefix, *err.get("loc", ())]
        err["input"] = finite(quoted_input(err.get("input")))
        ctx = err.get("ctx")
        if isinstance(ctx, dict):
            err["ctx"] = {
                k: (v if isinstance(v, (str, int, float, bool, type(None))) else str(v)) for k, v in ctx.items()
            }
        out.append(err)
    return out


def parse_json(body: bytes) -> Any:
    """Parse a JSON body; raises `BodyError` (422: not JSON, or a non-finite number naming the field)."""
    try:
        text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body  # JSON is UTF-8 (RFC 8259)
    except UnicodeDecodeError as exc:
        raise BodyError(
            422,
            [
                {
                    "type": "json_invalid",
                    "loc": ["body"],
                    "input": None,
                    "msg": f"the body is not UTF-8 text: {str(exc)[:200]}",
                }
            ],
        ) from None
    try:
        value = json.loads(text, parse_float=_json_number)
    except (ValueError, RecursionError) as exc:
        raise BodyError(
            422,
            [
                {
                    "type": "json_invalid",
                    "loc": ["body"],
                    "input": None,
                    "msg": f"the body is not valid JSON: {str(exc)[:200]}",
                }
            ],
        ) from None
    where = first_non_finite(value)
    if where is not None:
        field = ".".join(map(str, where)) or "body"
        raise BodyError(
            422,
            [
                {
                    "type": "finite_number",
                    "loc": ["body", *where],
                    "input": None,
                    "msg": f"{field}: NaN and Infinity are not numbers JSON allows; send a finite number",
                }
            ],
        )
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
            raise RequestValidationError(
                [{**err, "loc": ("body", *err["loc"])} for err in exc.errors(include_url=False)]
            ) from None

    return await run_in_threadpool(work)


def json_body(model) -> dict:
    """``openapi_extra`` for a route that reads its body with `read_model`: the body's schema is ``model``'s."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}},
        }
    }
