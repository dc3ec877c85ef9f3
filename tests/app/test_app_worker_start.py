"""A device whose worker cannot start (here: a GPU index that does not exist) gives error rows with the reason,
and /api/health says what went wrong; the service itself keeps answering."""

from fastapi.testclient import TestClient
from service_harness import TINY_SWEEP

from app.main import create_app
from app.settings import Settings


def test_worker_that_cannot_start_reports_instead_of_hanging(tmp_path):
    settings = Settings.from_env(data_dir=tmp_path / "data", devices="cuda:99", results_dir="")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        body = {**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"], "M": [32], "N": [128]}
        document = client.post("/benchmark?stream=false", json=body).json()
        assert document["run"] is None  # no device could start the run
        assert [r["status"] for r in document["rows"]] == ["error"]
        reason = document["rows"][0]["reason"]
        assert "cuda:99" in reason and "could not start" in reason
        assert document["summary"]["complete"] is False and document["summary"]["error"] == 1
        device = client.get("/api/health").json()["gpus"][0]
        assert device["label"] == "cuda:99" and device["ready"] is False
        assert "could not start" in device["error"]
