"""The fleet (``serve --ray ADDRESS``, issue 37): a real two-node Ray cluster started here, with fake GPUs (``num_gpus``
declared on this CPU machine, their models through ``accelerator_type:<model>`` resources, as Ray sets them on an
NVIDIA node), and a real uvicorn server pointed at it. The actors run the engine on the CPU (no CUDA here) and say
so in every row. One cluster and one server for the whole module: Ray's start-up is the slow part.

    node-h100   1 fake GPU, accelerator_type:H100
    node-a100   2 fake GPUs, accelerator_type:A100   (left last: a node that leaves the cluster mid-sweep)
"""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
from service_harness import REPO, TEST_PLUGINS, TINY_SWEEP, LiveServer, lines_of, post_stream, slow_sweep, wait_for

from engine.models import ResultRow, RunHeader

ray = pytest.importorskip("ray", reason="the fleet extra (pip install -e '.[fleet]'): make setup installs it")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.server

NODE_ARGS = {"num_cpus": 1, "object_store_memory": 80 << 20}
"""Small nodes: the actors ask for a GPU and no CPU, and nothing big goes through Ray's object store."""


@pytest.fixture(scope="module")
def cluster():
    # Ray's processes (and so the actors) take the environment of the process that starts the nodes: this
    # checkout's code, whatever the virtual environment's editable install points at
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), saved]))
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                **NODE_ARGS,
                "num_gpus": 1,
                "resources": {"accelerator_type:H100": 1},
                "labels": {"name": "node-h100"},
                "include_dashboard": False,
            },
        )
        cluster.add_node(**NODE_ARGS, num_gpus=2, resources={"accelerator_type:A100": 1}, labels={"name": "node-a100"})
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    yield cluster
    cluster.shutdown()


@pytest.fixture(scope="module")
def server(cluster, module_tmp):
    live = LiveServer(module_tmp / "data", plugins=TEST_PLUGINS, env={"RMSNORM_RAY_ADDRESS": cluster.address})
    live.start(timeout=300)
    yield live
    live.stop()


def by_label(health: dict) -> dict[str, dict]:
    return {d["label"]: d for d in health["gpus"]}


def labels_of(health: dict, model: str) -> set[str]:
    return {d["label"] for d in health["gpus"] if d["model"] == model}


def test_health_lists_the_fleet(server):
    health = server.health()
    gpus = health["gpus"]
    assert [d["label"] for d in gpus] == ["cuda:0", "cuda:1", "cuda:2"]
    assert sorted(d["model"] for d in gpus) == ["A100", "A100", "H100"]
    assert all(d["ready"] and d["queue_length"] == 0 and d["kind"] == "cpu" for d in gpus)
    assert all("no CUDA" in d["name"] and d["host"] for d in gpus)  # fake GPUs: every name says CPU
    assert len({d["uuid"] for d in gpus}) == 3
    assert all(d["ceiling_GBps"] is None or d["ceiling_GBps"] > 0 for d in gpus)
    nodes = health["fleet"]["nodes"]
    assert len(nodes) == 2 and all(node["alive"] for node in nodes)
    assert sorted(len(node["gpus"]) for node in nodes) == [1, 2]
    assert {tuple(node["models"]) for node in nodes} == {("H100",), ("A100",)}
    assert health["fleet"]["ready"] == 3 and "Ray fleet: 3 GPU(s) on 2 node(s)" in health["message"]
    # the driver's own Ray socket listens on every address; the service's HTTP socket is loopback: no token
    assert health["token_required"] is False
    assert health["triton_native"] is False  # the actors measure on the CPU: the page offers the interpreter


def test_placement_by_gpu_model_and_node(server):
    health = server.health()
    h100, a100 = labels_of(health, "H100"), labels_of(health, "A100")
    one = {**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"]}
    stream = post_stream(server.url, {**one, "device": "H100"})
    rows = [ResultRow.model_validate(r) for r in lines_of(stream, "row")]
    header = RunHeader.model_validate(lines_of(stream, "header")[0])
    assert {r.device.label for r in rows} == h100 and header.device.label in h100
    slot = by_label(health)[header.device.label]
    for row in rows:  # each row says where in the fleet it was measured
        assert row.mode == "cpu" and row.status == "ok"
        assert (row.device.host, row.device.index, row.device.name, row.device.uuid) == (
            slot["host"],
            slot["index"],
            slot["name"],
            slot["uuid"],
        )
    assert header.sweep["device"] == "h100"

    stream = post_stream(server.url, {**one, "device": "a100", "split": True})
    assert {r["device"]["label"] for r in lines_of(stream, "row")} <= a100

    stream = post_stream(server.url, {**one, "node": "node-a100"})
    assert {r["device"]["label"] for r in lines_of(stream, "row")} <= a100

    for change, field in (
        ({"device": "v100"}, "device"),
        ({"node": "elsewhere"}, "node"),
        ({"device": "h100", "node": "node-a100"}, "node"),
        ({"node": "a b"}, "node"),
    ):
        response = httpx.post(server.url + "/benchmark", json={**one, **change}, timeout=30)
        assert response.status_code == 422, (change, response.text)
        assert any(field in err["loc"] for err in response.json()["detail"]), response.text


def test_the_services_write_rules_hold_on_a_fleet(server):
    one = {**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"], "M": [8]}
    response = httpx.post(server.url + "/benchmark", json=one, headers={"Host": "rebound.example"}, timeout=30)
    assert response.status_code == 403 and "Host" in response.json()["detail"]  # no DNS rebinding
    response = httpx.post(
        server.url + "/benchmark",
        content=b"{" + b" " * (2 << 20) + b"}",
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 413
    response = httpx.post(server.url + "/benchmark", json={**one, "ray_address": "10.9.9.9:6379"}, timeout=30)
    assert response.status_code == 422 and "ray_address" in response.text  # configuration, never a request's


def test_split_across_actors_each_row_tagged(server):
    ms = [8, 16, 24, 32, 40, 48]
    stream = post_stream(server.url, slow_sweep(ms, split=True))
    rows, headers = lines_of(stream, "row"), lines_of(stream, "header")
    summary = lines_of(stream, "summary")[0]
    assert summary["complete"] and summary["ok"] == len(ms)
    assert sorted(r["M"] for r in rows) == ms  # each case exactly once
    used = {r["device"]["label"] for r in rows}
    assert len(used) >= 2, used
    assert {h["device"]["label"] for h in headers} >= used  # each actor's own header, its own ceiling
    assert all(h["ceiling_GBps"] and h["ceiling_GBps"] > 0 for h in headers)
    assert all(r["device"]["host"] and r["device"]["uuid"] and r["device"]["index"] is not None for r in rows)
    for label in used:  # one actor measures one case at a time
        mine = sorted((r for r in rows if r["device"]["label"] == label), key=lambda r: r["started_at"])
        assert all(a["ended_at"] <= b["started_at"] for a, b in zip(mine, mine[1:]))
    stored = httpx.get(f"{server.url}/api/runs/{rows[0]['run_id']}", timeout=10).json()
    assert len(stored["rows"]) == len(ms)
    assert {h["device"]["label"] for h in stored["headers"]} == {h["device"]["label"] for h in headers}


def test_each_model_gives_linked_runs(server):
    health = server.health()
    body = {**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"], "fleet": "each-model"}
    stream = post_stream(server.url, body)
    headers, summaries = lines_of(stream, "header"), lines_of(stream, "summary")
    runs = {h["run_id"] for h in headers}
    assert len(runs) == 2 and {s["run_id"] for s in summaries} == runs and all(s["complete"] for s in summaries)
    assert len({h["group_id"] for h in headers}) == 1
    assert all(sorted(h["linked_runs"]) == sorted(runs) for h in headers)
    for header in headers:
        rows = [r for r in lines_of(stream, "row") if r["run_id"] == header["run_id"]]
        assert len(rows) == 2
        assert {r["device"]["label"] for r in rows} <= labels_of(health, header["gpu_model"])
        stored = httpx.get(f"{server.url}/api/runs/{header['run_id']}", timeout=10).json()
        assert stored["run"]["group_id"] == header["group_id"] and len(stored["rows"]) == 2
    document = httpx.post(server.url + "/benchmark?stream=false", json=body, timeout=120).json()
    assert len(document["runs"]) == 2 and document["group_id"].startswith("group-")
    assert {run["run"]["gpu_model"] for run in document["runs"]} == {"H100", "A100"}


KILL_ACTOR = """
import sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith(f"rmsnorm-{sys.argv[2]}-")]
ray.kill(ray.get_actor(max(names, key=lambda n: int(n.rsplit("-", 1)[1])), namespace="rmsnorm-dashboard"), no_restart=True)
"""


def _kill_actor(address: str, label: str) -> None:
    """Kill the newest actor of GPU ``label`` from a driver of its own: a driver in this process (ray.init) would leave
    Ray's listening sockets behind in it, and the service tests that follow would see an exposed process."""
    subprocess.run(
        [sys.executable, "-c", KILL_ACTOR, address, label],
        check=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))},
    )


def test_actor_killed_mid_sweep_gives_an_error_row_and_the_sweep_completes(server, cluster):
    ms = [8, 16, 24, 32, 40, 48, 56, 64, 72]
    result = {}
    with httpx.stream("POST", server.url + "/benchmark", json=slow_sweep(ms, split=True), timeout=180) as response:
        lines = []
        for raw in response.iter_lines():
            if not raw.strip():
                continue
            line = httpx.Response(200, content=raw).json()
            lines.append(line)
            if line["type"] == "row" and "killed" not in result:
                # an actor that is measuring (or about to take) one of the cases left
                victim = line["device"]["label"]
                result["restarts"] = by_label(server.health())[victim]["restarts"]
                _kill_actor(cluster.address, victim)
                result["killed"] = victim
    victim = result["killed"]
    rows = [line for line in lines if line["type"] == "row"]
    summary = lines_of([(0, line) for line in lines], "summary")[0]
    assert sorted(r["M"] for r in rows) == ms and summary["rows"] == len(ms)  # every case accounted for
    errors = [r for r in rows if r["status"] == "error"]
    assert len(errors) == 1, [(r["status"], r["reason"]) for r in rows]
    assert errors[0]["device"]["label"] == victim
    assert f"worker for {victim} died" in errors[0]["reason"] and "restarted" in errors[0]["reason"]
    assert summary["ok"] == len(ms) - 1 and summary["complete"] is True
    stored = httpx.get(f"{server.url}/api/runs/{rows[0]['run_id']}", timeout=10).json()
    assert len(stored["rows"]) == len(ms)  # nothing measured is lost
    health = wait_for(
        lambda: (h := server.health()) and by_label(h)[victim]["ready"] and h,
        timeout=120,
        what="the killed actor's GPU back",
    )
    assert by_label(health)[victim]["restarts"] == result["restarts"] + 1


@pytest.mark.browser
def test_the_page_lists_the_fleet(server):
    from playwright.sync_api import sync_playwright

    health = server.health()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=os.environ.get("RMSNORM_CHROMIUM", "/usr/bin/chromium"),
            args=["--no-sandbox", "--disable-gpu"],
        )
        try:
            page = browser.new_page()
            page.goto(server.url + "/")
            fleet = page.locator("#fleet")
            fleet.locator("summary").wait_for(state="visible", timeout=60_000)
            assert fleet.locator("summary").inner_text() == "Fleet: 2 nodes, 3 GPUs (3 ready)"
            fleet.locator("summary").click()
            rows = [row.split("\t") for row in fleet.locator("tbody tr").all_inner_texts()]
            assert sorted(row[1] for row in rows) == ["cuda:0", "cuda:1", "cuda:2"]
            assert all(row[-1] == "ready" for row in rows), rows
            assert sorted(row[3].rsplit("[", 1)[1].rstrip("]") for row in rows) == ["A100", "A100", "H100"]
            options = page.locator("#device option").all_inner_texts()
            assert {"any H100 (the least busy)", "any A100 (the least busy)"} <= set(options)
            assert all(any(o.startswith(d["label"] + ":") and d["host"] in o for o in options) for d in health["gpus"])
        finally:
            browser.close()


def test_node_leaving_mid_sweep_errors_its_cases_and_the_rest_goes_on(server, cluster):
    """Last in the module: it takes node-a100 out of the cluster."""
    health = server.health()
    a100, h100 = labels_of(health, "A100"), labels_of(health, "H100")
    node = next(n for n in cluster.worker_nodes)
    ms = [8, 16, 24, 32, 40, 48, 56, 64]
    lines = []
    with httpx.stream("POST", server.url + "/benchmark", json=slow_sweep(ms, split=True), timeout=300) as response:
        for raw in response.iter_lines():
            if raw.strip():
                lines.append((0, httpx.Response(200, content=raw).json()))
                if lines[-1][1]["type"] == "row" and node is not None:
                    cluster.remove_node(node, allow_graceful=False)  # mid-sweep: its two actors are measuring
                    node = None
    result = {"stream": lines}
    rows = lines_of(result["stream"], "row")
    assert sorted(r["M"] for r in rows) == ms  # every case has its row
    lost = [r for r in rows if r["status"] == "error"]
    assert lost and all(r["device"]["label"] in a100 for r in lost), [(r["device"]["label"], r["reason"]) for r in lost]
    assert all("died" in r["reason"] for r in lost)
    assert all(r["status"] == "ok" for r in rows if r not in lost)
    assert any(r["device"]["label"] in h100 and r["status"] == "ok" for r in rows)  # the rest went on
    health = wait_for(
        lambda: (h := server.health()) and not all(n["alive"] for n in h["fleet"]["nodes"]) and h,
        timeout=60,
        what="the node marked gone",
    )
    gone = next(n for n in health["fleet"]["nodes"] if not n["alive"])
    assert {g["label"] for g in gone["gpus"]} == a100
    # a request pinned to the gone node's model is answered: error rows saying why, not a hang
    stream = post_stream(
        server.url,
        {**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"], "M": [8], "device": "a100"},
        timeout=120,
    )
    rows = lines_of(stream, "row")
    assert len(rows) == 1 and rows[0]["status"] == "error", rows
    assert "not in the Ray cluster" in rows[0]["reason"] or "could not" in rows[0]["reason"], rows[0]["reason"]
