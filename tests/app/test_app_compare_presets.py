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
    settings = Settings.from_env(
        data_dir=module_tmp / "data",
        devices="cpu",
        results_dir=module_tmp / "none",
        max_queue=4,
        plugins=(WRONG_PLUGIN,),
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


def _doc(run_id: str, gbps: float, timing: str = "events") -> dict:
    row = {
        "run_id": run_id,
        "impl": "eager",
        "pass": "fwd",
        "dtype": "bfloat16",
        "M": 64,
        "N": 128,
        "status": "ok",
        "median_us": 1.0,
        "GBps": gbps,
        "bytes": 1,
        "mode": "cpu",
        "device": {"name": "cpu"},
        "started_at": 0.0,
        "ended_at": 0.0,
        "timing": timing,
    }
    return {
        "run": {
            "run_id": run_id,
            "created_at": "2026-12-02T00:00:00Z",
            "ceiling_method": "m",
            "ceiling_GBps": 1.0,
            "versions": {},
            "sweep": {"timing": timing},
            "device": {"kind": "cpu", "name": "cpu", "sm_count": 1, "memory_bytes": 1, "l2_bytes": 1},
        },
        "rows": [row, {**copy.deepcopy(row), "N": 256, "GBps": gbps * 2}],
        "summary": {},
    }


def test_compare_two_stored_runs(client):
    for run_id, gbps, timing in (
        ("cmp-base", 10.0, "events"),
        ("cmp-new", 9.0, "events"),
        ("cmp-graph", 10.0, "cuda-graph"),
    ):
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
    body = {
        "implementations": ["eager", "cli-test-wrong"],
        "passes": ["fwd"],
        "dtypes": ["float16"],
        "M": [64],
        "N": [128],
        "repetitions": 3,
        "warmup": 1,
    }
    response = client.post("/benchmark?stream=false", json=body)
    assert response.status_code == 200, response.text
    doc = response.json()
    by = {r["impl"]: r for r in doc["rows"]}
    assert by["cli-test-wrong"]["status"] == "wrong" and by["cli-test-wrong"]["verified"] is False
    assert by["cli-test-wrong"]["GBps"] > 0 and "relative error" in by["cli-test-wrong"]["reason"]
    assert by["eager"]["status"] == "ok" and by["eager"]["verified"] is True
    assert doc["summary"]["best"]["fwd/float16/64x128"]["impl"] == "eager" and doc["summary"]["wrong"] == 1


def _trend_doc(run_id, created_at, device, gbps_by_impl, commit):
    """A run of ``device`` with one fwd row per (impl, N) at the given GB/s."""
    rows = [
        {
            "run_id": run_id,
            "impl": impl,
            "pass": "fwd",
            "dtype": "bfloat16",
            "M": 64,
            "N": n,
            "status": "ok",
            "median_us": 1.0,
            "GBps": g,
            "bytes": 1,
            "mode": "cuda",
            "device": {"name": device},
            "started_at": 0.0,
            "ended_at": 0.0,
            "timing": "events",
        }
        for impl, by_n in gbps_by_impl.items()
        for n, g in by_n.items()
    ]
    return {
        "run": {
            "run_id": run_id,
            "created_at": created_at,
            "ceiling_method": "m",
            "ceiling_GBps": 1.0,
            "versions": {},
            "sweep": {"timing": "events"},
            "git_commit": commit,
            "device": {"kind": "cuda", "name": device, "sm_count": 1, "memory_bytes": 1, "l2_bytes": 1},
        },
        "rows": rows,
        "summary": {},
    }


def test_trends_flag_a_planted_regression_with_the_compare_threshold(client):
    import math
    import random

    rng = random.Random()
    device = f"Trend GPU {rng.randrange(10**6)}"
    ns = (1024, 2048, 4096)
    first = {impl: {n: rng.uniform(500, 3000) for n in ns} for impl in ("triton", "eager")}
    second = {impl: {n: g * rng.uniform(0.99, 1.01) for n, g in by.items()} for impl, by in first.items()}
    slow = rng.uniform(0.80, 0.95)  # the planted regression: triton loses 5-20 % at every shape of the third run
    third = {"triton": {n: g * slow for n, g in second["triton"].items()}, "eager": dict(second["eager"])}
    docs = [
        _trend_doc(f"trend-{i}-{rng.randrange(10**6)}", f"2026-12-0{i + 1}T00:00:00Z", device, g, f"c{i}")
        for i, g in enumerate((first, second, third))
    ]
    for d in reversed(docs):  # imported newest first: the order comes from created_at, not from the store
        assert client.post("/api/runs/import", json=d).status_code == 200
    trend = client.get("/api/trends", params={"device": device}).json()
    assert [r["run_id"] for r in trend["runs"]] == [d["run"]["run_id"] for d in docs]
    triton = next(s for s in trend["series"] if s["impl"] == "triton" and s["pass"] == "fwd")
    last = triton["points"][-1]
    assert last["regression"] and last["shared"] == 3 and last["base_run_id"] == docs[1]["run"]["run_id"]
    assert math.isclose(last["ratio"], slow, rel_tol=1e-9)
    assert not any(p["regression"] for p in triton["points"][:-1])
    assert [(r["impl"], r["run_id"]) for r in trend["regressions"]] == [("triton", docs[2]["run"]["run_id"])]
    # the same rule as `compare`: the mean of its per-shape ratios, against the same threshold
    from engine.compare import DEFAULT_FAIL_BELOW

    cmp = client.get("/api/compare", params={"base": docs[1]["run"]["run_id"], "new": docs[2]["run"]["run_id"]}).json()
    ratios = [r["ratio"] for r in cmp["rows"] if r["impl"] == "triton"]
    assert math.isclose(math.prod(ratios) ** (1 / len(ratios)), last["ratio"], rel_tol=1e-9)
    assert trend["fail_below"] == DEFAULT_FAIL_BELOW
    # a looser threshold clears it; bad input is a 4xx naming the field
    assert not client.get("/api/trends", params={"device": device, "fail_below": slow * 0.9}).json()["regressions"]
    missing = client.get("/api/trends", params={"device": "no such card"})
    assert missing.status_code == 404 and "device" in missing.json()["detail"]
    bad = client.get("/api/trends", params={"device": device, "fail_below": "x"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "fail_below"
