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

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
router = APIRouter(tags=["pages"])


def _version() -> str:
    try:
        return metadata.version("rmsnorm-dashboard")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(request: Request) -> HTMLResponse:
    """The dashboard: run panel, charts, history and the loading dock."""
    return templates.TemplateResponse(request, "index.html", {"version": _version()})
