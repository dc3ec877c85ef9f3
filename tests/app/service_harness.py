"""Shared pieces of the service tests: a real uvicorn server in a subprocess (`LiveServer`), NDJSON stream
reading, and tiny CPU sweeps for the real engine.

Every server and app here measures a small copy ceiling (``RMSNORM_CEILING_BYTES``), so a worker is ready in
about two seconds (importing torch and the registry)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
CEILING_BYTES = str(1 << 20)
os.environ.setdefault("RMSNORM_CEILING_BYTES", CEILING_BYTES)  # the in-process TestClient apps' workers inherit it

TEST_PLUGINS = "tests.app.slow_plugin,tests.app.crash_plugin"

TINY_SWEEP = {"implementations": ["eager", "torch-native"], "passes": ["fwd", "bwd"], "dtypes": ["bfloat16"],
              "M": [32, 64], "N": [128], "repetitions": 3, "warmup": 1}
"""8 cases of the real engine on tiny shapes: well under a second each on a shared CPU."""


def slow_sweep(cases_m: list[int], **extra) -> dict:
    """Forward cases of the test plugin ``slow-eager`` (≥ 0.05 s per call): each case lasts ~0.3 s or more."""
    return {"implementations": ["slow-eager"], "passes": ["fwd"], "dtypes": ["float32"], "M": cases_m, "N": [64],
            "repetitions": 4, "warmup": 1, **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """``serve(...)`` of app.main in its own process (and process group, so its workers go with it)."""

    def __init__(self, data_dir: Path, devices: str = "cpu", max_queue: int = 8, plugins: str = "",
                 env: dict | None = None, host: str = "127.0.0.1") -> None:
        self.data_dir = Path(data_dir)
        self.devices = devices
        self.max_queue = max_queue
        self.host = host
        self.port = free_port()
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "RMSNORM_CEILING_BYTES": CEILING_BYTES,
            "RMSNORM_PLUGINS": plugins,
            "RMSNORM_RESULTS_DIR": "",
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> "LiveServer":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        code = ("from app.main import serve; "
                f"serve(host={self.host!r}, port={self.port}, data_dir={str(self.data_dir)!r}, "
                f"devices={self.devices!r}, max_queue={self.max_queue}, log_level='warning')")
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=self.env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> dict:
        """Wait until the server answers and every worker has reported ready."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                last = httpx.get(self.url + "/api/health", timeout=5).json()
                if all(d["ready"] for d in last["gpus"]):
                    return last
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"server not ready after {timeout} s (last health: {last}):\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        try:  # workers left behind by a server that was killed
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._log.close()
        self.proc = None

    def health(self) -> dict:
        return httpx.get(self.url + "/api/health", timeout=10).json()


def read_stream(response) -> list[tuple[float, dict]]:
    """(arrival epoch seconds, line) for every NDJSON line of a streaming httpx/TestClient response."""
    out = []
    for raw in response.iter_lines():
        if raw.strip():
            out.append((time.time(), json.loads(raw)))
    return out


def lines_of(stream: list[tuple[float, dict]], kind: str) -> list[dict]:
    return [line for _, line in stream if line["type"] == kind]


def post_stream(base_url: str, body: dict, timeout: float = 120.0, **kw) -> list[tuple[float, dict]]:
    with httpx.stream("POST", base_url + "/benchmark", json=body, timeout=timeout, **kw) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("application/x-ndjson")
        return read_stream(response)


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached within {timeout} s")


