"""The dashboard page: `GET /` renders `templates/index.html`.

The page itself is static HTML; everything it shows comes from the JSON API through `static/js/`
(the browser knows only the API). The service's `app/main.py` includes `router` and mounts
`static/` at `/static` (with plotly.js copied to `static/vendor/plotly.min.js`)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES_DIR = REPO_ROOT / "templates"
STATIC_DIR = REPO_ROOT / "static"

router = APIRouter(tags=["pages"])
_templates: dict[Path, Jinja2Templates] = {}


def templates_for(request: Request) -> Jinja2Templates:
    """The templates folder of the app's settings (``Settings.templates_dir``), else the checkout's."""
    settings = getattr(request.app.state, "settings", None)
    folder = Path(getattr(settings, "templates_dir", None) or TEMPLATES_DIR)
    if folder not in _templates:
        _templates[folder] = Jinja2Templates(directory=str(folder))
    return _templates[folder]


def _version() -> str:
    try:
        return metadata.version("rmsnorm-dashboard")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(request: Request) -> HTMLResponse:
    """The dashboard: run panel, charts, history and the loading dock."""
    return templates_for(request).TemplateResponse(request, "index.html", {"version": _version()})
