"""`GET /api/compare`, `GET /api/presets`, and the correctness gate seen through the API (a wrong plug-in's rows
come back ``wrong``, never best)."""

from __future__ import annotations

import copy
import json

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from engine.presets import presets_document

WRONG_PLUGIN = "tests.cli.cli_test_plugin:wrong"


@pytest.fixture(scope="module")
def client(module_tmp):
    settings = Settings.from_env(data_dir=module_tmp / "data", devices="cpu", results_dir=module_tmp / "none",
                                 max_queue=4, plugins=(WRONG_PLUGIN,))
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


def _doc(run_id: str, gbps: float, timing: str = "events") -> dict:
    row = {"run_id": run_id, "impl": "eager", "pass": "fwd", "dtype": "bfloat16", "M": 64, "N": 128, "status": "ok",
           "median_us": 1.0, "GBps": gbps, "bytes": 1, "mode": "cpu", "device": {"name": "cpu"}, "started_at": 0.0,
           "ended_at": 0.0, "timing": timing}
    return {"run": {"run_id": run_id, "created_at": "2026-12-02T00:00:00Z", "ceiling_method": "m", "ceiling_GBps": 1.0,
                    "versions": {}, "sweep": {"timing": timing},
                    "device": {"kind": "cpu", "name": "cpu", "sm_count": 1, "memory_bytes": 1, "l2_bytes": 1}},
            "rows": [row, {**copy.deepcopy(row), "N": 256, "GBps": gbps * 2}], "summary": {}}


def test_compare_two_stored_runs(client):
    for run_id, gbps, timing in (("cmp-base", 10.0, "events"), ("cmp-new", 9.0, "events"), ("cmp-graph", 10.0, "cuda-graph")):
        assert client.post("/api/runs/import", json=_doc(run_id, gbps, timing)).status_code == 200
    doc = client.get("/api/compare", params={"base": "cmp-base", "new": "cmp-new"}).json()
    assert doc["base"] == {"run_id": "cmp-base", "timing": "events"} and doc["new"]["run_id"] == "cmp-new"
    assert [r["key"] for r in doc["rows"]] == ["fwd/bfloat16/64x128", "fwd/bfloat16/64x256"]
    assert all(r["ratio"] == pytest.approx(0.9) and r["impl"] == "eager" for r in doc["rows"])
    assert doc["min_ratio"] == pytest.approx(0.9) and doc["only_in_base"] == [] and doc["only_in_new"] == []
    mixed = client.get("/api/compare", params={"base": "cmp-base", "new": "cmp-graph"})
    assert mixed.status_code == 409 and "timed differently" in mixed.json()["detail"]
    allowed = client.get("/api/compare", params={"base": "cmp-base", "new": "cmp-graph", "allow_mixed_timing": "true"})
    assert allowed.status_code == 200 and allowed.json()["min_ratio"] == pytest.approx(1.0)
    missing = client.get("/api/compare", params={"base": "cmp-base", "new": "no-such-run"})
    assert missing.status_code == 404 and "no-such-run" in missing.json()["detail"]
    assert client.get("/api/compare", params={"base": "cmp-base"}).status_code == 422


def test_presets_listed(client):
    assert client.get("/api/presets").json() == json.loads(json.dumps(presets_document()))


def test_wrong_plugin_through_the_api_is_wrong_never_best(client):
    body = {"implementations": ["eager", "cli-test-wrong"], "passes": ["fwd"], "dtypes": ["float16"], "M": [64],
            "N": [128], "repetitions": 3, "warmup": 1}
    response = client.post("/benchmark?stream=false", json=body)
    assert response.status_code == 200, response.text
    doc = response.json()
    by = {r["impl"]: r for r in doc["rows"]}
    assert by["cli-test-wrong"]["status"] == "wrong" and by["cli-test-wrong"]["verified"] is False
    assert by["cli-test-wrong"]["GBps"] > 0 and "relative error" in by["cli-test-wrong"]["reason"]
    assert by["eager"]["status"] == "ok" and by["eager"]["verified"] is True
    assert doc["summary"]["best"]["fwd/float16/64x128"]["impl"] == "eager" and doc["summary"]["wrong"] == 1
