"""The dashboard page: `GET /` renders `templates/index.html`.

The page itself is static HTML; everything it shows comes from the JSON API through `static/js/`
(the browser knows only the API). The service's `app/main.py` includes `router` and mounts
`static/` at `/static` (plotly.js's basic bundle vendored as `static/vendor/plotly-basic.min.js`). Where the templates live is
the settings' (`Settings.templates_dir`), the version the engine's (`engine.device.package_version`)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.settings import Settings, get_settings
from engine.device import package_version

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


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(request: Request, settings: Settings = Depends(get_settings)) -> HTMLResponse:
    """The dashboard: run panel, charts, history and the loading dock."""
    return templates_in(Path(settings.templates_dir)).TemplateResponse(
        request, "index.html", {"version": package_version(), "modules": page_modules(settings.static_dir)})
