"""`LiveServer`: the service started for a harness, the one launcher the service tests (tests/app/service_harness.py)
and the service figures (bench/service_figures.py) share.

``app.main.serve(...)`` in a subprocess on loopback (by default), in its own process group so that its workers go
with it, in a data folder of the caller's, ``results/`` not imported, a small copy ceiling (a worker is ready in
about two seconds). Data flows one way: tests and bench import this module; it imports nothing of theirs, and
nothing of the service itself (the server is another process), only httpx to ask it whether it is ready."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
CEILING_BYTES = str(1 << 20)
"""The copy ceiling's buffer (RMSNORM_CEILING_BYTES): 1 MiB, measured in well under a second on a CPU."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """``serve(...)`` of app.main in its own process; ``with LiveServer(...) as live:`` or ``.start()`` / ``.stop()``.
    ``env`` adds RMSNORM_* settings (or anything else) to the server's environment."""

    def __init__(
        self,
        data_dir: Path,
        devices: str = "cpu",
        max_queue: int = 8,
        plugins: str = "",
        env: dict | None = None,
        host: str = "127.0.0.1",
    ) -> None:
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
        code = (
            "from app.main import serve; "
            f"serve(host={self.host!r}, port={self.port}, data_dir={str(self.data_dir)!r}, "
            f"devices={self.devices!r}, max_queue={self.max_queue}, log_level='warning')"
        )
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> "LiveServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

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

    def log(self, tail: int | None = 6000) -> str:
        """The server's output (its last ``tail`` characters; all of it for None)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return text if tail is None else text[-tail:]

    def server_errors_logged(self) -> int:
        """How many unexpected errors (the 500 handler's log line) the server wrote."""
        return self.log(tail=None).count("unexpected error")

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
