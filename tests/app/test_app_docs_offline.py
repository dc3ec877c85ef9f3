"""/docs works on a host with no internet: Swagger UI's assets are served by the app itself."""

import re

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


def test_docs_page_loads_only_local_assets(tmp_path):
    app = create_app(Settings.from_env(data_dir=tmp_path, start_workers=False))
    with TestClient(app, base_url="http://127.0.0.1") as client:  # a loopback Host (testserver is refused)
        page = client.get("/docs")
        assert page.status_code == 200
        urls = re.findall(r'(?:src|href|url)\s*[=:]\s*["\']([^"\']+)["\']', page.text)
        assets = [u for u in urls if not u.startswith("/openapi")]
        assert assets, "the docs page should reference its Swagger UI assets"
        for url in urls:
            assert url.startswith("/"), f"/docs references a non-local URL: {url}"
        for url in assets:
            assert client.get(url).status_code == 200, url
        assert client.get("/openapi.json").json()["info"]["title"] == "rmsnorm-dashboard"
