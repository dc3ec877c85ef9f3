"""A real uvicorn server on loopback with one CPU worker: incremental streaming, serialization of concurrent
requests, queue positions, 429, cancel on disconnect, restart. Measurements come from the real engine; the
test plugin ``slow-eager`` (a correct RMSNorm that sleeps 50 ms per call) makes cases last long enough to
observe a queue on a shared 2-core machine."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time

import httpx
import pytest
from service_harness import (
    TEST_PLUGINS,
    TINY_SWEEP,
    LiveServer,
    lines_of,
    post_stream,
    slow_sweep,
    wait_for,
)

from engine.models import ResultRow, RunHeader

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server(module_tmp):
    live = LiveServer(module_tmp / "data", devices="cpu", max_queue=1, plugins=TEST_PLUGINS).start()
    yield live
    live.stop()


def stored(server, run_id: str) -> dict:
    return httpx.get(f"{server.url}/api/runs/{run_id}", timeout=10).json()


def test_rows_arrive_one_by_one(server):
    stream = post_stream(server.url, TINY_SWEEP)
    kinds = [line["type"] for _, line in stream]
    assert kinds == ["queued", "header"] + ["row"] * 8 + ["summary"]
    RunHeader.model_validate(stream[1][1])
    rows = lines_of(stream, "row")
    for row in rows:
        assert ResultRow.model_validate(row).status == "ok"
    arrivals = [t for t, line in stream if line["type"] == "row"]
    # the first row was in the client's hands before the server started measuring the last case
    assert arrivals[0] < rows[-1]["started_at"]
    assert arrivals == sorted(arrivals)


def test_curl_streams_ndjson(server):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    body = json.dumps({**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"]})
    out = subprocess.run(
        ["curl", "-sN", "-X", "POST", f"{server.url}/benchmark", "-H", "content-type: application/json", "-d", body],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    lines = [line for line in lines if line["type"] != "heartbeat"]  # a slow case on a busy machine may send some
    assert [line["type"] for line in lines] == ["queued", "header", "row", "row", "summary"]


def test_two_concurrent_requests_are_serialized_and_both_kept(server):
    results: dict[str, list] = {}

    def client(name: str, body: dict) -> None:
        results[name] = post_stream(server.url, body)

    a = threading.Thread(target=client, args=("a", slow_sweep([8, 16, 24])))
    b = threading.Thread(target=client, args=("b", slow_sweep([40, 48, 56])))
    a.start()
    time.sleep(0.3)
    b.start()
    a.join(180)
    b.join(180)
    assert set(results) == {"a", "b"}
    runs = {}
    for name, stream in results.items():
        summary = lines_of(stream, "summary")[0]
        assert summary["complete"] and summary["ok"] == 3, summary
        runs[name] = lines_of(stream, "row")
    # one job at a time on the device: every measured interval of one run lies outside every one of the other
    for ra in runs["a"]:
        for rb in runs["b"]:
            assert ra["ended_at"] <= rb["started_at"] or rb["ended_at"] <= ra["started_at"]
    first, second = sorted(runs.values(), key=lambda rows: rows[0]["started_at"])
    assert max(r["ended_at"] for r in first) <= min(r["started_at"] for r in second)
    # the later one was told it waits behind one job, then that it starts
    later = [stream for stream in results.values() if lines_of(stream, "row")[0] is second[0]][0]
    positions = [line["position"] for line in lines_of(later, "queued")]
    assert positions[0] == 1 and positions[-1] == 0
    for rows in runs.values():
        run = stored(server, rows[0]["run_id"])
        assert run["summary"]["complete"] is True and len(run["rows"]) == 3


def test_full_queue_is_429_and_disconnect_cancels(server):
    """max_queue=1: one running + one waiting; a third request is refused with a reason. The running client
    hangs up after its first row: the rest of its sweep is dropped and the partial run is kept, incomplete."""
    first_row = threading.Event()
    seen: dict[str, list] = {"a": [], "b": []}

    def hang_up_after_first_row() -> None:
        with httpx.stream(
            "POST", server.url + "/benchmark", json=slow_sweep([8, 16, 24, 32, 40, 48]), timeout=120
        ) as response:
            for raw in response.iter_lines():
                if raw.strip():
                    seen["a"].append(json.loads(raw))
                    if seen["a"][-1]["type"] == "row":
                        first_row.set()
                        return  # closes the connection

    def wait_in_queue() -> None:
        seen["b"] = [line for _, line in post_stream(server.url, slow_sweep([8]))]

    a = threading.Thread(target=hang_up_after_first_row)
    a.start()
    wait_for(lambda: server.health()["gpus"][0]["busy"], what="first job running")
    b = threading.Thread(target=wait_in_queue)
    b.start()
    wait_for(lambda: server.health()["gpus"][0]["queue_length"] == 2, what="second job queued")

    refused = httpx.post(server.url + "/benchmark", json=slow_sweep([8]), timeout=30)
    assert refused.status_code == 429
    assert "queue full" in refused.json()["detail"]

    assert first_row.wait(120)
    a.join(60)
    run_id = seen["a"][0]["run_id"]
    run = wait_for(
        lambda: (lambda r: r if r["summary"].get("running") is not True else None)(stored(server, run_id)),
        timeout=60,
        what="cancelled run finalised",
    )
    assert run["summary"]["complete"] is False and run["summary"]["cancelled"] is True
    assert 1 <= len(run["rows"]) < 6  # what was measured is kept, the rest was dropped
    listed = {r["run_id"]: r for r in httpx.get(server.url + "/api/runs", timeout=10).json()}
    assert listed[run_id]["complete"] is False

    b.join(120)  # the waiting job then ran to completion
    assert [line["type"] for line in seen["b"]][-1] == "summary"
    assert seen["b"][-1]["complete"] is True
    assert server.health()["gpus"][0]["queue_length"] == 0


def test_disconnect_while_queued_drops_the_job(server):
    holder = threading.Thread(target=post_stream, args=(server.url, slow_sweep([8, 16, 24])))
    holder.start()
    wait_for(lambda: server.health()["gpus"][0]["busy"], what="first job running")
    with httpx.stream("POST", server.url + "/benchmark", json=slow_sweep([8]), timeout=60) as response:
        first = json.loads(next(response.iter_lines()))
    assert first["type"] == "queued" and first["position"] == 1
    wait_for(lambda: server.health()["gpus"][0]["queue_length"] == 1, timeout=30, what="queued job dropped")
    holder.join(120)
    assert first["run_id"] not in {r["run_id"] for r in httpx.get(server.url + "/api/runs", timeout=10).json()}


def test_one_document_request_is_cancelled_when_its_client_leaves(server):
    """``?stream=false``: the client gives up waiting; the server notices, drops the rest, keeps what it measured."""
    before = {r["run_id"] for r in httpx.get(server.url + "/api/runs", timeout=10).json()}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            server.url + "/benchmark?stream=false",
            json=slow_sweep([8, 16, 24, 32, 40, 48, 56, 64]),
            timeout=httpx.Timeout(10, read=1.5),
        )

    def finished_run():
        runs = [r for r in httpx.get(server.url + "/api/runs", timeout=10).json() if r["run_id"] not in before]
        if runs and not stored(server, runs[0]["run_id"])["summary"].get("running"):
            return stored(server, runs[0]["run_id"])

    run = wait_for(finished_run, timeout=30, what="abandoned run finalised")
    assert run["summary"]["cancelled"] is True and run["summary"]["complete"] is False
    assert len(run["rows"]) < 8
    wait_for(lambda: server.health()["gpus"][0]["queue_length"] == 0, timeout=30, what="device free again")


def test_announced_big_body_is_refused_before_it_is_sent(server):
    """Issue 12: a Content-Length of 20 MB with only 1 KiB sent is answered 413 at once. A server that read (or
    parsed) the body before refusing would wait here for 20 MB that never come."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(
            b"POST /benchmark HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 20000000\r\n\r\n" + b"[" * 1024
        )
        # the whole answer, up to the server's close (it says "connection: close"): headers and body may come in
        # separate segments. socket.timeout (10 s) if the server waits for the body instead.
        answer = b""
        while part := raw.recv(4096):
            answer += part
    assert answer.startswith(b"HTTP/1.1 413") and b"RMSNORM_MAX_BODY_BYTES" in answer, answer[:300]


def test_streamed_big_body_is_refused_at_the_cap_not_at_its_end(server):
    """Issue 12: a chunked 20 MB body sent slowly is refused 413 once the 1 MiB cap is passed; the client is
    stopped long before its end (a server that buffered the whole body first would take all 20 MB)."""
    chunk, sent = b" " * 65536, []

    def body():
        for _ in range(20_000_000 // len(chunk)):
            sent.append(len(chunk))
            time.sleep(0.003)
            yield chunk

    response = httpx.post(
        server.url + "/benchmark", content=body(), timeout=60, headers={"content-type": "application/json"}
    )
    assert response.status_code == 413 and "1048576 bytes" in response.json()["detail"]
    assert sum(sent) < 8 << 20, f"{sum(sent)} bytes taken before the 413"
    assert server.health()["gpus"][0]["ready"]


def test_restart_keeps_runs(server):
    before = httpx.get(server.url + "/api/runs", timeout=10).json()
    assert before
    server.stop()
    server.start()
    after = httpx.get(server.url + "/api/runs", timeout=10).json()
    assert {r["run_id"]: r["rows"] for r in before} == {r["run_id"]: r["rows"] for r in after}
    assert {r["run_id"]: r["complete"] for r in before} == {r["run_id"]: r["complete"] for r in after}
