"""Who may write. On loopback anyone local may; bound to another address, POST /benchmark, DELETE and import need
the API token (or are refused outright when none is configured, unless RMSNORM_ALLOW_NO_TOKEN=1).

These apps are never started (no lifespan), so no worker runs: a request that gets past the token check is
answered by validation (422) or by the store (404) instead of 401/403."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings, write_refusal

INVALID_SWEEP = {"implementations": ["eager"], "M": [0]}  # reaches validation only once authorised
GOOD_TOKEN = "s3cret-token"


def make_client(tmp_path, **settings) -> TestClient:
    config = Settings.from_env(
        data_dir=tmp_path / "data", devices="cpu", results_dir="", start_workers=False, **settings
    )
    return TestClient(create_app(config), base_url="http://127.0.0.1")


def writes(client: TestClient, headers: dict | None = None) -> list[int]:
    return [
        client.post("/benchmark", json=INVALID_SWEEP, headers=headers).status_code,
        client.delete("/api/runs/some-run", headers=headers).status_code,
        client.post("/api/runs/import", json={"run": {}}, headers=headers).status_code,
    ]


AUTHORISED = [422, 404, 422]


def test_loopback_needs_no_token(tmp_path):
    client = make_client(tmp_path, host="127.0.0.1", api_token=GOOD_TOKEN)
    assert writes(client) == AUTHORISED
    assert client.get("/api/health").json()["token_required"] is False


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::"])
def test_exposed_without_configured_token_refuses_writes(tmp_path, host):
    client = make_client(tmp_path, host=host)
    assert writes(client) == [403, 403, 403]
    response = client.post("/benchmark", json=INVALID_SWEEP)
    assert "RMSNORM_API_TOKEN" in response.json()["detail"]
    assert client.get("/api/health").status_code == 200  # reading stays open
    assert client.get("/api/runs").status_code == 200
    assert client.get("/api/health").json()["token_required"] is True


def test_exposed_with_token(tmp_path):
    client = make_client(tmp_path, host="0.0.0.0", api_token=GOOD_TOKEN)
    assert writes(client) == [401, 401, 401]
    assert client.post("/benchmark", json=INVALID_SWEEP).headers["www-authenticate"] == "Bearer"
    assert writes(client, {"Authorization": "Bearer wrong"}) == [403, 403, 403]
    assert writes(client, {"Authorization": f"Bearer {GOOD_TOKEN}"}) == AUTHORISED
    assert writes(client, {"X-API-Token": GOOD_TOKEN}) == AUTHORISED


def test_exposed_without_token_when_allowed_deliberately(tmp_path):
    client = make_client(tmp_path, host="0.0.0.0", allow_no_token=True)
    assert writes(client) == AUTHORISED


def test_environment_sets_the_rule(tmp_path, monkeypatch):
    monkeypatch.setenv("RMSNORM_API_TOKEN", GOOD_TOKEN)
    monkeypatch.setenv("RMSNORM_HOST", "0.0.0.0")
    settings = Settings.from_env()
    assert settings.exposed and settings.api_token == GOOD_TOKEN
    assert write_refusal(settings, None)[0] == 401
    assert write_refusal(settings, GOOD_TOKEN) is None
    monkeypatch.delenv("RMSNORM_API_TOKEN")
    assert write_refusal(Settings.from_env(), None)[0] == 403
    monkeypatch.setenv("RMSNORM_ALLOW_NO_TOKEN", "1")
    assert write_refusal(Settings.from_env(), None) is None
