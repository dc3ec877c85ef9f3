"""The dashboard page: `GET /` renders `templates/index.html`.

The page itself is static HTML; everything it shows comes from the JSON API through `static/js/`
(the browser knows only the API). The service's `app/main.py` includes `router` and mounts
`static/` at `/static` (plotly.js's basic bundle vendored as `static/vendor/plotly-basic.min.js`). Where the templates live is
the settings' (`Settings.templates_dir`), the version the engine's (`engine.device.package_version`)."""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.first_look import first_look_runs
from app.settings import PLOTLY_JS, Settings, get_settings
from app.state import Service, get_service
from engine.device import package_version

log = logging.getLogger(__name__)
router = APIRouter(tags=["pages"])
_templates: dict[Path, Jinja2Templates] = {}


def templates_in(folder: Path) -> Jinja2Templates:
    """One Jinja environment per templates folder."""
    if folder not in _templates:
        _templates[folder] = Jinja2Templates(directory=str(folder))
    return _templates[folder]


def page_modules(static_dir: Path) -> list[str]:
    """Every ES module of the page (static/js/, relative paths), for `<link rel="modulepreload">`: the browser
    fetches them all at once instead of level by level down the import graph (issue 35: four round trips)."""
    root = Path(static_dir) / "js"
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.js")) if root.is_dir() else []


_INJECTED_STYLE = re.compile(
    r'if\(!document\.getElementById\("([\w-]{8,128})"\)\)\{var \w+=document\.createElement\("style"\)'
)


@lru_cache(maxsize=4)
def plotly_style_ids(static_dir: Path) -> tuple[str, ...]:
    """The ids plotly.js looks for before it injects a ``<style>`` with text (maplibre's CSS, for maps this page never
    draws): an element of that id in the page makes it skip the injection, which the CSP would refuse (a console
    error). Read from the plotly.js bundle this server serves, so a new plotly version brings its own id."""
    path = static_dir / "vendor" / PLOTLY_JS
    if not path.is_file():
        return ()
    return tuple(dict.fromkeys(_INJECTED_STYLE.findall(path.read_text(errors="replace"))))


def _first_look_ids(service: Service) -> list[str]:
    """The first look's run ids; none when the store cannot list its runs: the page still loads, and its own
    GET /api/runs reports the failure."""
    try:
        runs = service.store.list_runs()
    except Exception:
        log.exception("the first look could not be chosen: the store did not list its runs")
        return []
    return [r["run_id"] for r in first_look_runs(runs)]


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(
    request: Request, settings: Settings = Depends(get_settings), service: Service = Depends(get_service)
) -> HTMLResponse:
    """The dashboard: run panel, charts, history and the loading dock. The first look's runs are named in the page
    and preloaded by it: fetched while plotly.js is parsed, not after (issue 35)."""
    return templates_in(Path(settings.templates_dir)).TemplateResponse(
        request,
        "index.html",
        {
            "version": package_version(),
            "modules": page_modules(settings.static_dir),
            "plotly_js": PLOTLY_JS,
            "plotly_style_ids": plotly_style_ids(Path(settings.static_dir)),
            "first_look": _first_look_ids(service),
        },
    )
