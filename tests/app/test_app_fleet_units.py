"""The fleet's bookkeeping without a cluster: which devices a request may use (GPU model, node), the grouping of
``fleet: each-model``, the slots read from Ray's node list, and the Ray driver's socket kept apart from the HTTP
edge's exposure rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import edge
from app.fleet import RayFleet
from app.queues import DeviceQueues, UnknownDevice, UnknownNode

TRAITS = {
    "cuda:0": {"model": "H100", "models": ["H100", "NVIDIA H100 80GB HBM3"], "nodes": ["gpu-a", "10.0.0.1", "n1"]},
    "cuda:1": {"model": "A100-80G", "models": ["A100-80G"], "nodes": ["gpu-b", "10.0.0.2", "n2"]},
    "cuda:2": {"model": "A100-80G", "models": ["A100-80G"], "nodes": ["gpu-b", "10.0.0.2", "n2"]},
}


def test_devices_by_model_and_node():
    books = DeviceQueues(TRAITS, max_queue=4)
    traits = TRAITS.__getitem__
    assert books.devices_for("h100", traits=traits) == ["cuda:0"]
    assert books.devices_for("a100", traits=traits) == ["cuda:1", "cuda:2"]
    assert books.devices_for("hbm3", traits=traits) == ["cuda:0"]  # the device's full name counts too
    assert books.devices_for("auto", node="GPU-B", traits=traits) == ["cuda:1", "cuda:2"]
    assert books.devices_for("cuda", node="10.0.0.1", traits=traits) == ["cuda:0"]
    assert books.devices_for("cuda:2", traits=traits) == ["cuda:2"]
    with pytest.raises(UnknownDevice, match="models: A100-80G, H100"):
        books.devices_for("v100", traits=traits)
    with pytest.raises(UnknownNode, match="gpu-a, gpu-b"):
        books.devices_for("h100", node="gpu-b", traits=traits)
    assert UnknownNode("x").field == "node" and UnknownDevice("x").field == "device"
    assert books.by_model(["cuda:2", "cuda:0", "cuda:1"], traits) == {
        "A100-80G": ["cuda:2", "cuda:1"],
        "H100": ["cuda:0"],
    }


def test_slots_from_the_cluster_nodes(monkeypatch):
    nodes = [
        {
            "NodeID": "b" * 56,
            "Alive": True,
            "NodeManagerHostname": "gpu-b",
            "NodeManagerAddress": "10.0.0.2",
            "Resources": {"GPU": 2.0, "CPU": 64.0, "accelerator_type:A100-80G": 1.0},
            "Labels": {"ray.io/node-id": "b"},
        },
        {
            "NodeID": "c" * 56,
            "Alive": False,
            "NodeManagerHostname": "gpu-c",
            "NodeManagerAddress": "10.0.0.3",
            "Resources": {"GPU": 8.0},
        },
        {
            "NodeID": "a" * 56,
            "Alive": True,
            "NodeManagerHostname": "gpu-a",
            "NodeManagerAddress": "10.0.0.1",
            "Resources": {"GPU": 1.0, "accelerator_type:H100": 1.0},
            "Labels": {"rack": "r7"},
        },
        {
            "NodeID": "d" * 56,
            "Alive": True,
            "NodeManagerHostname": "cpu-only",
            "NodeManagerAddress": "10.0.0.4",
            "Resources": {"CPU": 32.0},
        },
    ]
    fleet = RayFleet("auto")
    monkeypatch.setattr(fleet, "nodes", lambda fresh=False: nodes)
    slots = fleet.discover()
    assert [(s.host, s.slot, s.model) for s in slots] == [
        ("gpu-a", 0, "H100"),
        ("gpu-b", 0, "A100-80G"),
        ("gpu-b", 1, "A100-80G"),
    ]
    assert slots[0].names() == ["gpu-a", "10.0.0.1", "a" * 56, "r7"]
    assert fleet.node_alive("a" * 56) and not fleet.node_alive("c" * 56) and not fleet.node_alive("z")
    fleet.slots = {f"cuda:{i}": slot for i, slot in enumerate(slots)}
    status = fleet.status(
        [
            {"label": "cuda:0", "node": "a" * 56, "ready": True, "queue_length": 1, "busy": True},
            {"label": "cuda:1", "node": "b" * 56, "ready": False, "queue_length": 0, "busy": False},
        ]
    )
    assert [(n["host"], n["alive"], [g["label"] for g in n["gpus"]]) for n in status["nodes"]] == [
        ("gpu-a", True, ["cuda:0"]),
        ("gpu-b", True, ["cuda:1"]),
    ]
    assert status["gpus"] == 3 and status["ready"] == 1


def test_a_socket_marked_not_http_does_not_expose_the_service(monkeypatch):
    monkeypatch.setattr(edge, "listening_sockets", lambda: {"111": "127.0.0.1", "222": "::"})
    monkeypatch.setattr(edge, "_NOT_HTTP", set())
    monkeypatch.setattr(edge, "_listening", None)  # the fake sockets' scan must not outlive this test (cached)
    edge.not_http(set())
    assert edge.reached_exposed({"server": ("127.0.0.1", 8000)})  # the '::' socket counts
    edge.not_http({"222"})  # ... unless it is a Ray driver's
    assert not edge.reached_exposed({"server": ("127.0.0.1", 8000)})
    monkeypatch.setattr(edge, "listening_sockets", lambda: {"111": "127.0.0.1", "222": "::", "333": "0.0.0.0"})
    edge.not_http(set())
    assert edge.reached_exposed({"server": ("127.0.0.1", 8000)})  # a socket bound later (uvicorn's) still counts


def test_an_address_where_nothing_listens_is_refused_at_once():
    """Not minutes of ray.init retries: `serve --ray` says what is wrong (the CLI prints it and exits 1). In a process
    of its own: a ray.init in pytest's process leaves Ray's listening sockets there, and every later service test
    would see an exposed process."""
    import subprocess
    import sys

    code = (
        "import time\nfrom app.fleet import FleetUnavailable, RayFleet\nfrom app.live_server import free_port\n"
        "started = time.monotonic()\ntry:\n    RayFleet(f'127.0.0.1:{free_port()}').connect()\n"
        "except FleetUnavailable as exc:\n    print('refused:', exc)\n    print(time.monotonic() - started)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    assert "refused:" in out.stdout and "nothing answers there" in out.stdout, (out.stdout, out.stderr[-2000:])
    assert float(out.stdout.strip().splitlines()[-1]) < 30


def test_a_ray_actor_gets_the_threads_a_local_worker_has():
    """Ray sets OMP_NUM_THREADS=1 in our actors (num_cpus=0); torch there ran its host side on one core where a local
    worker uses every core it may run on. In a fresh process with Ray's setting, torch has one thread until the
    actor's start gives it the cores."""
    import os
    import subprocess
    import sys

    cores = len(os.sched_getaffinity(0))
    code = (
        "import torch; before = torch.get_num_threads(); from app.ray_actor import use_the_node_threads; "
        "print(before, use_the_node_threads(), torch.get_num_threads())"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["1", str(cores), str(cores)], out.stdout + out.stderr
    env["OMP_NUM_THREADS"] = "3"  # set on the node by its owner: left alone (torch caps it at the cores)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    before, returned, after = out.stdout.split()
    assert before == returned == after == str(min(3, cores)), out.stdout + out.stderr


def test_a_ray_actor_measures_at_the_services_priority():
    """Ray starts workers at nice 15; the actor goes back to 0 where the process may lower its nice value (root or
    CAP_SYS_NICE), else it reports the value it stays at. Checked in a child process started at nice 15."""
    import subprocess
    import sys

    code = (
        "import os; os.nice(15 - os.nice(0)); from app.ray_actor import undo_worker_niceness; "
        "got = undo_worker_niceness(); print(got, os.nice(0))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    got, now = out.stdout.split()
    assert got == now, out.stdout
    probe = subprocess.run(
        [sys.executable, "-c", "import os; os.nice(15 - os.nice(0)); os.setpriority(os.PRIO_PROCESS, 0, 0)"],
        capture_output=True,
    )
    assert got == ("0" if probe.returncode == 0 else "15"), (got, probe.stderr[-300:])
