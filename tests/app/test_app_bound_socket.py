"""Issue 12.1: started as the module docstring says (``uvicorn --factory app.main:create_app --host 0.0.0.0``),
RMSNORM_HOST keeps its default 127.0.0.1, yet the socket bound is reachable from other machines: writes need the
token, and /api/health says so, even for a request that came in over loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest
from service_harness import REPO, free_port

pytestmark = pytest.mark.server


def test_factory_bound_to_all_addresses_refuses_token_less_writes(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "RMSNORM_DATA_DIR": str(tmp_path),
        "RMSNORM_RESULTS_DIR": "",
        "RMSNORM_DEVICES": "cpu",
        "RMSNORM_START_WORKERS": "0",
    }
    env.pop("RMSNORM_HOST", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "app.main:create_app",
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                health = httpx.get(f"{url}/api/health", timeout=5).json()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None, "server did not start"
                time.sleep(0.5)
        assert health["token_required"] is True
        response = httpx.delete(f"{url}/api/runs/some-run", timeout=10)
        assert response.status_code == 403 and "RMSNORM_API_TOKEN" in response.json()["detail"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
