"""The JSON API through FastAPI's TestClient, with one real CPU worker and the real engine."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from fastapi.testclient import TestClient
from service_harness import TINY_SWEEP, lines_of, read_stream

from app.main import create_app
from app.settings import Settings
from engine.models import MAX_ELEMENTS, MAX_M, ResultRow, RunHeader, default_registry
from rmsnorm_kernels.registry import describe_all


@pytest.fixture(scope="module")
def results_dir(module_tmp):
    """A results/ folder with one valid file (made by a real run, see `valid_file`) and one broken file."""
    folder = module_tmp / "results"
    folder.mkdir()
    (folder / "broken.json").write_text('{"run": {"run_id": "broken"}, "rows": []}')
    return folder


@pytest.fixture(scope="module")
def settings(module_tmp, results_dir):
    return Settings.from_env(data_dir=module_tmp / "data", devices="cpu", results_dir=results_dir, max_queue=4)


@pytest.fixture(scope="module")
def client(settings):
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


@pytest.fixture(scope="module")
def finished_run(client):
    """One real run of the tiny sweep, as one document (``?stream=false``)."""
    response = client.post("/benchmark?stream=false", json={**TINY_SWEEP, "M": [32], "N": [128, 256]})
    assert response.status_code == 200, response.text
    return response.json()


def test_health_describes_a_cpu_service(client):
    health = client.get("/api/health").json()
    assert health["device"] == "cpu" and health["cpu_only"] is True
    assert health["triton_native"] is False
    assert "CPU only" in health["message"] and "History" in health["message"]
    assert [d["label"] for d in health["gpus"]] == ["cpu:0"]
    assert health["gpus"][0]["queue_length"] == 0
    assert health["max_queue"] == 4


def test_implementations_are_the_registry(client):
    listed = client.get("/api/implementations").json()
    assert listed == describe_all(default_registry())
    assert {"eager", "torch-native"} <= {i["name"] for i in listed}
    for entry in listed:
        assert set(entry) >= {"name", "passes", "deterministic", "family", "description", "available", "reason"}


def test_launch_gives_each_kernels_real_grid(client):
    grids = client.get("/api/launch", params={"M": 4096, "N": 2048, "sm_count": 100}).json()
    registry = default_registry()
    assert set(grids) == set(registry.names())
    for impl in registry:
        expected = None if impl.launch is None else impl.launch(4096, 2048, 100)
        assert grids[impl.name] == expected
    assert any(grid is not None for grid in grids.values())


@pytest.mark.parametrize(
    "params", [{"M": 0, "N": 10}, {"M": 10}, {"M": 10, "N": 10, "sm_count": 0}, {"M": "x", "N": 10}]
)
def test_launch_rejects_bad_query(client, params):
    response = client.get("/api/launch", params=params)
    assert response.status_code == 422


def test_one_document_run_has_header_rows_and_summary(finished_run, settings):
    header = RunHeader.model_validate(finished_run["run"])
    assert header.device.kind == "cpu" and header.ceiling_GBps and header.ceiling_GBps > 0
    assert header.sweep["implementations"] == ["eager", "torch-native"]
    rows = [ResultRow.model_validate(r) for r in finished_run["rows"]]
    assert len(rows) == 2 * 2 * 2  # impls × passes × N
    assert {(r.impl, r.pass_, r.N) for r in rows} == {
        (i, p, n) for i in ("eager", "torch-native") for p in ("fwd", "bwd") for n in (128, 256)
    }
    for r in rows:
        assert r.run_id == header.run_id and r.status == "ok", r.reason
        assert r.mode == "cpu" and r.device.index == 0 and r.device.label == "cpu:0"
        assert 0 < r.min_us <= r.q1_us <= r.median_us <= r.q3_us <= r.max_us
        assert math.isclose(r.GBps, r.bytes / (r.median_us * 1e-6) / 1e9, rel_tol=1e-9)
        assert math.isclose(r.pct_of_ceiling, 100 * r.GBps / header.ceiling_GBps, rel_tol=1e-9)
        assert r.started_at <= r.ended_at
    summary = finished_run["summary"]
    assert summary["run_id"] == header.run_id
    assert (summary["rows"], summary["ok"], summary["error"], summary["complete"]) == (8, 8, 0, True)


def test_the_sweeps_verify_profile_and_baseline_reach_the_worker(client, finished_run):
    """The worker runs the engine's own path: what the sweep says about checking, profiling and the summary's
    baseline holds in the service exactly as in the CLI."""
    assert all(r["verified"] is True for r in finished_run["rows"])  # verify defaults on
    assert finished_run["summary"]["speedup"]["baseline"] == "torch-native"
    body = {**TINY_SWEEP, "passes": ["fwd"], "M": [32], "verify": False, "profile": True, "baseline": "eager"}
    document = client.post("/benchmark?stream=false", json=body).json()
    rows = document["rows"]
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows), rows
    assert all(r["verified"] is None and r["max_rel_err"] is None for r in rows)  # not checked
    assert all(r["profile"] is not None or r.get("profile_error") for r in rows)  # profiled (or why not)
    assert any(r["profile"] and r["profile"]["kernels"] for r in rows)
    speedup = document["summary"]["speedup"]
    assert speedup["baseline"] == "eager"
    assert speedup["by_shape"]["fwd/bfloat16/32x128"]["eager"] == 1.0
    assert document["run"]["sweep"]["verify"] is False and document["run"]["sweep"]["baseline"] == "eager"
    assert document["run"]["sweep"]["split"] is False and document["run"]["sweep"]["device"] == "auto"


def test_stream_lines_in_order(client):
    with client.stream("POST", "/benchmark", json=TINY_SWEEP, headers={"Accept-Encoding": "gzip"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        assert "content-encoding" not in response.headers  # issue 35: the rows stream uncompressed, as measured
        stream = read_stream(response)  # (heartbeat lines left out)
    kinds = [line["type"] for _, line in stream]
    assert kinds[0] == "queued" and stream[0][1]["position"] == 0 and stream[0][1]["device"] == "cpu:0"
    assert kinds[1] == "header" and kinds[-1] == "summary"
    assert kinds[2:-1] == ["row"] * 8
    run_id = stream[0][1]["run_id"]
    assert all(line["run_id"] == run_id for _, line in stream)
    for row in lines_of(stream, "row"):
        ResultRow.model_validate(row)
    # measured one after the other on the one device
    rows = lines_of(stream, "row")
    for before, after in zip(rows, rows[1:]):
        assert before["ended_at"] <= after["started_at"]


def test_case_too_big_for_memory_is_skipped_not_crashed(client):
    """A case whose memory estimate exceeds what may be used is a ``skipped`` row with the reason; the sweep goes on
    (the next case is measured)."""
    import torch

    from engine import memory
    from engine.device import free_memory_bytes

    big_m, big_n = MAX_ELEMENTS // 65536, 65536
    need = memory.footprint("bwd", big_m, big_n, 4, False, None).total(1)
    if need <= memory.budget(free_memory_bytes(torch.device("cpu")), "cpu"):
        pytest.skip("this machine could hold the big case")
    body = {
        "implementations": ["eager"],
        "passes": ["bwd"],
        "dtypes": ["float32"],
        "M": [16, big_m],
        "N": [128, big_n],
        "repetitions": 2,
        "warmup": 1,
    }
    document = client.post("/benchmark?stream=false", json=body).json()
    by_shape = {(r["M"], r["N"]): r for r in document["rows"]}
    big = by_shape[(big_m, big_n)]
    assert big["status"] == "skipped" and "not enough memory" in big["reason"]
    assert big["median_us"] is None
    assert by_shape[(16, 128)]["status"] == "ok"
    assert document["summary"]["complete"] is True and document["summary"]["skipped"] >= 1


def test_run_is_stored_and_exported(client, finished_run):
    run_id = finished_run["run"]["run_id"]
    listed = {r["run_id"]: r for r in client.get("/api/runs").json()}
    assert listed[run_id]["rows"] == 8 and listed[run_id]["complete"] is True and listed[run_id]["source"] == "live"
    sweep = finished_run["run"]["sweep"]  # the first look pairs one sweep's two files by them
    assert listed[run_id]["shapes"] == {"M": sweep["M"], "N": sweep["N"], "dtypes": sweep["dtypes"]}
    stored = client.get(f"/api/runs/{run_id}").json()
    assert stored["rows"] == finished_run["rows"]
    assert stored["run"] == finished_run["run"]
    assert stored["summary"]["complete"] is True

    download = client.get(f"/api/runs/{run_id}.json")
    assert download.status_code == 200 and "attachment" in download.headers["content-disposition"]
    assert download.json()["rows"] == finished_run["rows"]

    exported = client.get(f"/api/runs/{run_id}.csv")
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(exported.text)))
    assert len(table) == 8
    assert {"impl", "pass", "median_us", "GBps", "device.name", "device.label"} <= set(table[0])
    for line, row in zip(table, finished_run["rows"]):
        assert line["impl"] == row["impl"] and line["pass"] == row["pass"]
        assert float(line["median_us"]) == pytest.approx(row["median_us"])


def test_unknown_run_is_404(client):
    for path in ("/api/runs/nope", "/api/runs/nope.csv", "/api/runs/nope.json"):
        assert client.get(path).status_code == 404
    assert client.delete("/api/runs/nope").status_code == 404


def test_import_a_result_file(client, finished_run, results_dir):
    document = json.loads(json.dumps(finished_run))
    document["run"]["run_id"] = "imported-h200-example"
    for row in document["rows"]:
        row["run_id"] = "imported-h200-example"
    assert client.post("/api/runs/import?label=", json=document).status_code == 422  # an empty label: refused
    first = client.post("/api/runs/import?label=h200.json", json=document)
    assert first.status_code == 200, first.text
    assert first.json() == {"run_id": "imported-h200-example", "imported": True, "rows": 8}
    again = client.post("/api/runs/import", json=document)
    assert again.json()["imported"] is False  # idempotent by run id
    listed = {r["run_id"]: r for r in client.get("/api/runs").json()}
    assert listed["imported-h200-example"]["source"] == "import"
    assert listed["imported-h200-example"]["timing"] == document["rows"][0]["timing"]
    assert listed["imported-h200-example"]["label"] == "h200.json"
    assert listed["imported-h200-example"]["counts"]["ok"] == 8
    graphs = json.loads(json.dumps(document))
    graphs["run"]["run_id"] = "imported-cuda-graph"
    for row in graphs["rows"]:
        row.update(run_id="imported-cuda-graph", timing="cuda-graph")
    assert client.post("/api/runs/import", json=graphs).status_code == 200
    listed = {r["run_id"]: r for r in client.get("/api/runs").json()}
    assert listed["imported-cuda-graph"]["timing"] == "cuda-graph"  # the History table labels it
    assert client.delete("/api/runs/imported-cuda-graph").status_code in (200, 204)
    assert client.get("/api/runs/imported-h200-example").json()["rows"] == document["rows"]
    # the same file dropped into results/ is imported at the next start (see test_restart_keeps_runs)
    document["run"]["run_id"] = "from-results-dir"
    (results_dir / "gpu-2026-12-02.json").write_text(json.dumps(document))


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["run"].pop("device"), "device"),
        (lambda d: d["rows"][0].update(status="great"), "status"),
        (lambda d: d["rows"][0].pop("bytes"), "bytes"),
        (lambda d: d["run"].update(run_id="a/b"), "run"),
        (lambda d: d.pop("run"), "run"),
    ],
)
def test_import_rejects_a_bad_file_naming_the_field(client, finished_run, mutate, field):
    document = json.loads(json.dumps(finished_run))
    mutate(document)
    response = client.post("/api/runs/import", json=document)
    assert response.status_code == 422
    locs = [".".join(map(str, err["loc"])) for err in response.json()["detail"]]
    assert any(field in loc for loc in locs), locs


def test_delete_run(client, finished_run):
    document = json.loads(json.dumps(finished_run))
    document["run"]["run_id"] = "to-delete"
    assert client.post("/api/runs/import", json=document).status_code == 200
    assert client.delete("/api/runs/to-delete").json() == {"run_id": "to-delete", "deleted": True}
    assert client.get("/api/runs/to-delete").status_code == 404


def test_restart_keeps_runs_and_imports_results_dir(client, settings, finished_run):
    before = {r["run_id"]: r for r in client.get("/api/runs").json()}
    with TestClient(
        create_app(settings), base_url="http://127.0.0.1"
    ) as again:  # a second service on the same data folder
        after = {r["run_id"]: r for r in again.get("/api/runs").json()}
        assert set(before) <= set(after)
        run_id = finished_run["run"]["run_id"]
        assert again.get(f"/api/runs/{run_id}").json()["rows"] == finished_run["rows"]
        assert after["from-results-dir"]["source"] == "import"
        service = again.app.state.service
        assert any("broken.json" in r for r in service.import_report["rejected"])


def test_plotly_is_served_locally_compressed(client):
    """Issue 35: the vendored partial bundle (scatter + bar), gzip-compressed for a client that accepts it, plain for
    one that does not; the page's template names that file."""

    from app.settings import PLOTLY_JS

    raw = client.get(f"/static/vendor/{PLOTLY_JS}", headers={"Accept-Encoding": "identity"})
    assert raw.status_code == 200 and "javascript" in raw.headers["content-type"]
    assert "content-encoding" not in raw.headers
    assert 500_000 < len(raw.content) < 2_000_000, "not the basic partial bundle (the full plotly.js is 4.8 MB)"
    assert b"plotly.js (basic" in raw.content[:400]
    packed = client.get(f"/static/vendor/{PLOTLY_JS}", headers={"Accept-Encoding": "gzip, deflate, br"})
    assert packed.headers["content-encoding"] == "gzip" and "Accept-Encoding" in packed.headers["vary"]
    assert int(packed.headers["content-length"]) < len(raw.content) / 2
    assert packed.content == raw.content  # httpx decoded it: the same bytes
    assert PLOTLY_JS in client.get("/").text


def test_json_and_page_assets_are_compressed_the_stream_is_not(client):
    """JSON answers and the page's own JS / CSS go out gzip-compressed to a client that accepts it, not to one that
    does not (the NDJSON stream never: test_stream_lines_in_order)."""
    for path in ("/api/implementations", "/static/js/charts.js", "/static/css/app.css", "/"):
        response = client.get(path, headers={"Accept-Encoding": "gzip"})
        assert response.status_code == 200, path
        assert response.headers.get("content-encoding") == "gzip", path
    assert "content-encoding" not in client.get("/api/health", headers={"Accept-Encoding": "identity"}).headers


def test_openapi_and_docs(client):
    spec = client.get("/openapi.json").json()
    for path in (
        "/benchmark",
        "/api/health",
        "/api/implementations",
        "/api/launch",
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}.csv",
        "/api/runs/import",
    ):
        assert path in spec["paths"], path
    assert client.get("/docs").status_code == 200


# -- validation: every bad input is a 422 naming its field, and nothing was queued -------------------------------

BAD_BODIES = [
    ({"implementations": ["no-such-kernel"]}, "implementations"),
    ({"implementations": []}, "implementations"),
    ({"passes": []}, "passes"),
    ({"passes": ["sideways"]}, "passes"),
    ({"dtypes": ["int8"]}, "dtypes"),
    ({"dtypes": []}, "dtypes"),
    ({"M": []}, "M"),
    ({"N": []}, "N"),
    ({"M": [0]}, "M"),
    ({"M": [MAX_M + 1]}, "M"),
    ({"M": [MAX_M], "N": [MAX_ELEMENTS // MAX_M + 1]}, "N"),  # M·N over the limit
    ({"M": ["many"]}, "M"),
    ({"repetitions": 0}, "repetitions"),
    ({"repetitions": -5}, "repetitions"),
    ({"repetitions": 10**9}, "repetitions"),
    ({"warmup": -1}, "warmup"),
    ({"device": "gpu"}, "device"),
    ({"device": "cuda:0"}, "device"),  # well formed, but this service has no such worker
    ({"device": "cpu:7"}, "device"),
    ({"split": "sometimes"}, "split"),
    ({"timing": "sundial"}, "timing"),
    ({"colour": "blue"}, "colour"),
]


@pytest.mark.parametrize("change, field", BAD_BODIES, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_BODIES)])
def test_bad_benchmark_request_is_422_naming_the_field(client, change, field):
    body = {**TINY_SWEEP, **change}
    response = client.post("/benchmark", json=body)
    assert response.status_code == 422, response.text
    locs = [".".join(map(str, err["loc"])) for err in response.json()["detail"]]
    assert any(field in loc for loc in locs), locs
    assert client.get("/api/health").json()["gpus"][0]["queue_length"] == 0


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b"null", b'{"M": [1'])
def test_malformed_body_is_422(client, raw):
    response = client.post("/benchmark", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
