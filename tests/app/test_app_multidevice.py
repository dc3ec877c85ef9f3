"""Three fake CPU devices (``RMSNORM_DEVICES=cpu*3``, one worker process each) behind a real uvicorn server:
pinning, least-busy choice, split sweeps, and a worker killed mid-case while the other devices go on."""

from __future__ import annotations

import threading

import httpx
import pytest
from service_harness import TEST_PLUGINS, TINY_SWEEP, LiveServer, lines_of, post_stream, slow_sweep, wait_for

from engine.models import ResultRow, RunHeader

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server(module_tmp):
    live = LiveServer(module_tmp / "data", devices="cpu*3", max_queue=4, plugins=TEST_PLUGINS).start()
    yield live
    live.stop()


def test_health_lists_every_device(server):
    health = server.health()
    assert [d["label"] for d in health["gpus"]] == ["cpu:0", "cpu:1", "cpu:2"]
    assert [d["index"] for d in health["gpus"]] == [0, 1, 2]
    assert len({d["uuid"] for d in health["gpus"]}) == 3
    assert all(d["ready"] and d["queue_length"] == 0 for d in health["gpus"])
    assert health["cpu_only"] is True


def test_pinned_request_runs_on_that_device(server):
    stream = post_stream(server.url, {**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"], "device": "cpu:2"})
    assert lines_of(stream, "queued")[0]["device"] == "cpu:2"
    header = RunHeader.model_validate(lines_of(stream, "header")[0])
    assert header.device.index == 2 and header.device.label == "cpu:2"
    rows = lines_of(stream, "row")
    assert rows and all(r["device"]["label"] == "cpu:2" and r["device"]["index"] == 2 for r in rows)
    assert all(r["device"]["uuid"] == "cpu-2" for r in rows)


def test_least_busy_device_is_chosen(server):
    results = {}
    long_job = threading.Thread(
        target=lambda: results.setdefault("long", post_stream(server.url, slow_sweep([8, 16, 24])))
    )
    long_job.start()
    wait_for(lambda: any(d["busy"] for d in server.health()["gpus"]), what="long job running")
    busy = [d["label"] for d in server.health()["gpus"] if d["busy"]]
    assert busy == ["cpu:0"]  # all idle: the first device
    short = post_stream(server.url, {**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"]})
    queued = lines_of(short, "queued")[0]
    assert queued["device"] == "cpu:1" and queued["position"] == 0  # not behind the long job
    assert {r["device"]["label"] for r in lines_of(short, "row")} == {"cpu:1"}
    long_job.join(120)
    assert {r["device"]["label"] for r in lines_of(results["long"], "row")} == {"cpu:0"}


def test_split_spreads_cases_over_devices(server):
    stream = post_stream(server.url, slow_sweep([8, 16, 24, 32, 40, 48, 56, 64, 72], split=True))
    headers = lines_of(stream, "header")
    rows = lines_of(stream, "row")
    summary = lines_of(stream, "summary")[0]
    assert len(rows) == 9 and summary["complete"] and summary["ok"] == 9
    assert len({r["run_id"] for r in rows}) == 1
    used = {r["device"]["label"] for r in rows}
    assert len(used) >= 2, used  # rows tagged with the device each ran on
    assert {h["device"]["label"] for h in headers} >= used  # each device sent its own header (its own ceiling)
    assert all(h["ceiling_GBps"] > 0 for h in headers)
    assert sorted(r["M"] for r in rows) == [8, 16, 24, 32, 40, 48, 56, 64, 72]  # each case exactly once
    for label in used:  # one device never measures two cases at once
        mine = sorted((r for r in rows if r["device"]["label"] == label), key=lambda r: r["started_at"])
        for before, after in zip(mine, mine[1:]):
            assert before["ended_at"] <= after["started_at"]
    stored = httpx.get(f"{server.url}/api/runs/{rows[0]['run_id']}", timeout=10).json()
    assert len(stored["rows"]) == 9
    assert {h["device"]["label"] for h in stored["headers"]} == {h["device"]["label"] for h in headers}


def test_killed_worker_is_restarted_and_others_go_on(server):
    restarts_before = server.health()["gpus"][1]["restarts"]
    other = {}
    bystander = threading.Thread(
        target=lambda: other.setdefault("stream", post_stream(server.url, slow_sweep([8, 16, 24, 32], device="cpu:0")))
    )
    bystander.start()
    stream = post_stream(
        server.url,
        {
            **TINY_SWEEP,
            "implementations": ["crash-exit", "eager"],
            "passes": ["fwd"],
            "M": [32],
            "N": [128, 256],
            "device": "cpu:1",
        },
    )
    rows = lines_of(stream, "row")
    assert [(r["impl"], r["N"]) for r in rows] == [
        ("crash-exit", 128),
        ("eager", 128),
        ("crash-exit", 256),
        ("eager", 256),
    ]
    for row in rows:
        ResultRow.model_validate(row)
        assert row["device"]["label"] == "cpu:1"
        if row["impl"] == "crash-exit":
            assert row["status"] == "error"
            assert row["reason"].startswith("worker for cpu:1 died (exit code 3) while running crash-exit fwd")
            assert row["reason"].endswith("; restarted")
        else:
            assert row["status"] == "ok", row["reason"]  # measured by the restarted worker
    summary = lines_of(stream, "summary")[0]
    assert summary["complete"] is True and (summary["ok"], summary["error"]) == (2, 2)

    bystander.join(120)
    bystander_rows = lines_of(other["stream"], "row")
    assert len(bystander_rows) == 4 and all(r["status"] == "ok" for r in bystander_rows)
    assert all(r["device"]["label"] == "cpu:0" for r in bystander_rows)
    health = wait_for(lambda: (lambda h: h if h["gpus"][1]["ready"] else None)(server.health()), what="cpu:1 ready")
    assert health["gpus"][1]["restarts"] == restarts_before + 2
    assert health["gpus"][0]["restarts"] == 0 and health["gpus"][2]["restarts"] == 0
    stored = httpx.get(f"{server.url}/api/runs/{rows[0]['run_id']}", timeout=10).json()
    assert [r["status"] for r in stored["rows"]] == ["error", "ok", "error", "ok"]
