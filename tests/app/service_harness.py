"""Shared pieces of the service tests: a real uvicorn server in a subprocess (`LiveServer`, from app/live_server.py,
the launcher bench/service_figures.py uses too), NDJSON stream reading, and tiny CPU sweeps for the real engine.

Every server and app here measures a small copy ceiling (``RMSNORM_CEILING_BYTES``), so a worker is ready in
about two seconds (importing torch and the registry)."""

from __future__ import annotations

import json
import os
import time

import httpx

from app.live_server import CEILING_BYTES, REPO, LiveServer, free_port  # noqa: F401  (the tests import them here)

os.environ.setdefault("RMSNORM_CEILING_BYTES", CEILING_BYTES)  # the in-process TestClient apps' workers inherit it

TEST_PLUGINS = "tests.app.slow_plugin,tests.app.crash_plugin"

TINY_SWEEP = {
    "implementations": ["eager", "torch-native"],
    "passes": ["fwd", "bwd"],
    "dtypes": ["bfloat16"],
    "M": [32, 64],
    "N": [128],
    "repetitions": 3,
    "warmup": 1,
}
"""8 cases of the real engine on tiny shapes: well under a second each on a shared CPU."""


def slow_sweep(cases_m: list[int], **extra) -> dict:
    """Forward cases of the test plugin ``slow-eager`` (≥ 0.05 s per call): each case lasts ~0.3 s or more."""
    return {
        "implementations": ["slow-eager"],
        "passes": ["fwd"],
        "dtypes": ["float32"],
        "M": cases_m,
        "N": [64],
        "repetitions": 4,
        "warmup": 1,
        **extra,
    }


def read_stream(response, heartbeats: bool = False) -> list[tuple[float, dict]]:
    """(arrival epoch seconds, line) for every NDJSON line of a streaming httpx/TestClient response; ``heartbeat``
    lines (sent when a case keeps the stream silent for a few seconds, as on a busy machine) only if asked for."""
    out = []
    for raw in response.iter_lines():
        if raw.strip():
            line = json.loads(raw)
            if heartbeats or line.get("type") != "heartbeat":
                out.append((time.time(), line))
    return out


def lines_of(stream: list[tuple[float, dict]], kind: str) -> list[dict]:
    return [line for _, line in stream if line["type"] == kind]


def post_stream(
    base_url: str, body: dict, timeout: float = 120.0, heartbeats: bool = False, **kw
) -> list[tuple[float, dict]]:
    with httpx.stream("POST", base_url + "/benchmark", json=body, timeout=timeout, **kw) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("application/x-ndjson")
        return read_stream(response, heartbeats)


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached within {timeout} s")
