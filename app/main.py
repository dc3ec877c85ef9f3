"""The FastAPI application: `create_app(settings)` wires store, scheduler, routers and static files;
`serve(...)` runs it under uvicorn (what ``rmsnorm-dash serve`` and ``make run`` call).

``uvicorn --factory app.main:create_app`` works too (settings from the environment).
"""

from __future__ import annotations

import gzip
import importlib.util
import logging
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware

from app import import_process
from app.edge import BodyLimit, HostAndHeaders, client_errors, security_headers
from app.settings import PLOTLY_JS, Settings, get_settings
from app.state import Service
from engine.catalog import prepare_process
from engine.device import package_version
from engine.runner import settle_heap

log = logging.getLogger("rmsnorm.service")

DESCRIPTION = """Benchmark RMSNorm implementations on this host's devices and browse stored runs.

`POST /benchmark` streams NDJSON (`curl -N`): `queued`, `header`, one `row` per case as measured, `summary`.
One job at a time per device; a full queue is answered 429. Writes need the API token when the server is reachable
from other machines (the socket actually bound, or `RMSNORM_EXPOSED=1` behind a proxy; `Authorization: Bearer
<token>`). Every request must name an allowed Host (loopback names, IP addresses, `RMSNORM_ALLOWED_HOSTS`); a write
sent by a page of another origin is 403 and a write body not sent as `application/json` 415. Bodies are capped (413):
1 MiB, imports 16 MiB. A stream silent for 4 s gets a `heartbeat` line."""


# Compressed on the fly (GZipMiddleware), except the NDJSON stream: its rows go out as they are measured, byte for byte.
GZIP_EXCLUDED = (*DEFAULT_EXCLUDED_CONTENT_TYPES, "application/x-ndjson")


def precompressed_asset(path: Path, media_type: str):
    """A route serving one large static file, gzip-compressed once in memory when first asked (not at every
    request, as the middleware would: 1.2 MB at level 9 costs ~70 ms of this 2-core machine's CPU)."""
    raw: dict[str, bytes] = {}

    def asset(request: Request) -> Response:
        if not path.is_file():
            return PlainTextResponse(f"{path.name} is missing from this server's static files", status_code=404)
        headers = {"Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
        if "gzip" not in request.headers.get("accept-encoding", ""):
            return FileResponse(path, media_type=media_type, headers=headers)
        if "gz" not in raw:
            raw["gz"] = gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)
        return Response(raw["gz"], media_type=media_type, headers={**headers, "Content-Encoding": "gzip"})

    return asset


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    # Before Triton is imported: the engine's interpreter rule, then the registry with the settings' plug-ins (the
    # workers load the same ones), so that the implementation list here matches what the workers run.
    prepare_process(settings.plugins)
    service = Service(settings)
    service.import_results_dir()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        service.scheduler.start(warm=settings.start_workers)
        if settings.start_workers:
            import_process.warm()
        # what start-up built out of the collector's sight: otherwise each full collection walks it on the event
        # loop's thread, 100-190 ms here during which no request is answered (issue 12)
        settle_heap()
        try:
            yield
        finally:
            service.scheduler.stop()
            service.close()

    # FastAPIOffline: /docs and /redoc load Swagger UI / ReDoc from the package, not from a CDN.
    app = FastAPIOffline(
        title="rmsnorm-dashboard", version=package_version(), description=DESCRIPTION, lifespan=lifespan
    )
    app.state.service = service

    async def these_settings() -> Settings:  # async: no hop to the thread pool for a constant
        return settings

    app.dependency_overrides[get_settings] = these_settings
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes, import_limit=settings.max_import_bytes)
    # Responses compressed for clients that accept it (JSON runs ~10x smaller, the page's JS and CSS ~4x).
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=6, exclude_content_types=GZIP_EXCLUDED)
    app.add_middleware(HostAndHeaders, settings=settings)  # added last: outermost, so its headers are on every answer

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        import uuid

        ref = uuid.uuid4().hex[:12]
        log.exception("unexpected error %s on %s %s", ref, request.method, request.url.path)
        # the body never echoes the exception: internals stay in the server's log, found by the reference
        # sent by Starlette's outermost ServerErrorMiddleware, past HostAndHeaders: the headers are added here
        return JSONResponse(
            status_code=500,
            content={"detail": f"internal error (reference {ref} in the server log)"},
            headers={k.decode(): v.decode() for k, v in security_headers(request.url.path)},
        )

    from starlette.exceptions import HTTPException as StarletteHTTPException
    from fastapi.exception_handlers import http_exception_handler

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 405:  # Starlette names only the first route of the path; name every method it has
            return JSONResponse(
                status_code=405,
                content={"detail": "Method Not Allowed"},
                headers={"Allow": ", ".join(allowed_methods(app, request.scope))},
            )
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        from fastapi.encoders import jsonable_encoder

        errors = client_errors(exc.errors())
        return JSONResponse(
            status_code=422,
            content={
                "detail": jsonable_encoder(errors, custom_encoder={bytes: lambda b: b.decode("utf-8", "replace")})
            },
        )

    from app.routes import benchmark, compare, health, implementations, presets, runs

    app.include_router(health.router)
    app.include_router(implementations.router)
    app.include_router(benchmark.router)
    app.include_router(runs.router)
    app.include_router(compare.router)
    app.include_router(presets.router)
    if importlib.util.find_spec("app.routes.pages") is not None:
        from app.routes import pages

        app.include_router(pages.router)

    install_openapi(app)
    app.add_api_route(
        f"/static/vendor/{PLOTLY_JS}",
        precompressed_asset(settings.static_dir / "vendor" / PLOTLY_JS, "text/javascript"),
        include_in_schema=False,
    )

    if settings.static_dir.is_dir():
        app.mount("/static", StaticFiles(directory=settings.static_dir), name="static")
    return app


def allowed_methods(app: FastAPI, scope) -> list[str]:
    """Every method of every route whose path matches this request's (for the Allow header of a 405)."""
    from starlette.routing import Match

    def walk(routes):
        for route in routes:
            inner = getattr(route, "original_router", None)  # FastAPI's included routers (no prefix used here)
            yield from walk(inner.routes) if inner is not None else (route,)

    methods: set[str] = set()
    for route in walk(app.routes):
        match, _ = route.matches({**scope, "method": "GET"})
        if match != Match.NONE and getattr(route, "methods", None):
            match_any = [m for m in route.methods if route.matches({**scope, "method": m})[0] == Match.FULL]
            methods.update(match_any)
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def install_openapi(app: FastAPI) -> None:
    """The schema FastAPI builds, plus the bodies the write routes read themselves (off the event loop) and the
    413 every body-taking operation may answer."""
    from fastapi.openapi.utils import get_openapi
    from pydantic.json_schema import models_json_schema

    from app.schemas import BenchmarkRequest, RunFileUpload

    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        _, defs = models_json_schema(
            [(BenchmarkRequest, "validation"), (RunFileUpload, "validation")],
            ref_template="#/components/schemas/{model}",
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, definition in defs.get("$defs", {}).items():
            components.setdefault(name, definition)
        service = app.state.service
        models = (
            [service.scheduler.traits(label)["model"].lower() for label in service.labels]
            if service.fleet is not None
            else []
        )
        name_this_servers_values(components["BenchmarkRequest"]["properties"], service.labels, models)
        for operation in (op for path in schema["paths"].values() for op in path.values()):
            if "requestBody" in operation:  # BodyLimit: a Content-Length that is not a number
                operation["responses"].setdefault(
                    "400",
                    {
                        "description": "a malformed request (Content-Length)",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                    },
                )
        app.openapi_schema = schema
        return schema

    app.openapi = openapi


def name_this_servers_values(sweep: dict, labels: list[str], models: list[str] = ()) -> None:
    """The sweep fields whose valid values depend on this server, as enums in its schema (so a schema-valid body is
    one this server accepts): the registry's implementations, the dtype spellings, the presets, its devices (and
    a fleet's GPU models)."""
    from engine.catalog import list_implementations
    from engine.models import DTYPE_ALIASES
    from engine.presets import preset_names

    names = [impl["name"] for impl in list_implementations()]
    kinds = sorted({label.partition(":")[0] for label in labels})
    for option in sweep["implementations"].get("anyOf", [sweep["implementations"]]):
        if option.get("type") == "array":
            option["items"]["enum"] = names
    sweep["dtypes"]["items"]["enum"] = sorted(DTYPE_ALIASES)
    for option in sweep["preset"].get("anyOf", [sweep["preset"]]):
        if option.get("type") == "string":
            option["enum"] = preset_names()
    sweep["device"]["enum"] = list(dict.fromkeys(["auto", *kinds, *labels, *models]))


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    data_dir: str | Path | None = None,
    devices: str | list[str] | None = None,
    **kw,
) -> None:
    """Run the service under uvicorn until interrupted. Extra keywords are `Settings` fields (``api_token``,
    ``max_queue``, ``results_dir``, ``plugins``, ...) or ``log_level``."""
    import uvicorn

    log_level = kw.pop("log_level", "info")
    if isinstance(devices, (list, tuple)):
        devices = ",".join(devices)
    if "plugins" in kw and kw["plugins"] is not None:
        kw["plugins"] = tuple(kw["plugins"])
    settings = Settings.from_env(host=host, port=port, data_dir=data_dir, devices=devices, **kw)
    if settings.exposed and not settings.api_token and not settings.allow_no_token:
        log.warning(
            "listening on %s without RMSNORM_API_TOKEN: POST /benchmark, DELETE and import are refused "
            "(set a token, or RMSNORM_ALLOW_NO_TOKEN=1)",
            host,
        )
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=log_level, timeout_graceful_shutdown=5)
