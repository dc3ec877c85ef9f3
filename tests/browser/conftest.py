"""Browser-test fixtures: a real uvicorn server on a free loopback port (tmp data dir, the example plugins,
a small copy ceiling), Debian's Chromium driven by Playwright, and a page that fails the test on any
console error or any request that would leave the host."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from browser_paths import ARTIFACTS, DOC_SHOTS, REPO

CHROMIUM = os.environ.get("RMSNORM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as res:
        return json.loads(res.read())


class Server:
    def __init__(self, url: str, proc: subprocess.Popen, log_path: Path, data_dir: Path):
        self.url = url
        self.proc = proc
        self.log_path = log_path
        self.data_dir = data_dir

    def get(self, path: str):
        return _get_json(self.url + path)

    def post(self, path: str, body: dict, timeout: float = 120.0):
        req = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return json.loads(res.read())

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The real service (`app.main:create_app`) under uvicorn, as a user would start it."""
    data_dir = tmp_path_factory.mktemp("data")
    log_path = data_dir / "server.log"
    port = _free_port()
    env = {
        **os.environ,
        "RMSNORM_DATA_DIR": str(data_dir),
        "RMSNORM_PLUGINS": "examples.dock_plugin,examples.cuda_rmsnorm",  # the Python and the CUDA examples
        "RMSNORM_CEILING_BYTES": str(4 << 20),
        "RMSNORM_RESULTS_DIR": str(REPO / "results"),  # the committed GPU results, imported at start as in production
        "RMSNORM_DEVICES": "cpu",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "app.main:create_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    srv = Server(f"http://127.0.0.1:{port}", proc, log_path, data_dir)
    deadline = time.monotonic() + 180
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited with {proc.returncode}:\n{srv.log()}")
            try:
                health = srv.get("/api/health")
                if all(d.get("ready") for d in health["gpus"]):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the server did not get ready in 180 s:\n{srv.log()}")
            time.sleep(0.3)
        yield srv
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip(f"Chromium is not installed at {CHROMIUM} (make chromium installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


class PageGuard:
    """What a page did that a test must not allow: console errors, uncaught exceptions, outside requests."""

    def __init__(self):
        self.console_errors: list[str] = []
        self.outside_requests: list[str] = []
        self.expected_statuses: set[int] = set()

    def expect_http_error(self, status: int) -> None:
        """A test that provokes an error answer on purpose: Chromium logs it as a console error."""
        self.expected_statuses.add(status)

    def check(self):
        assert not self.outside_requests, f"requests tried to leave the host: {self.outside_requests}"
        expected = tuple(f"the server responded with a status of {s} " for s in self.expected_statuses)
        errors = [
            e
            for e in self.console_errors
            if not (expected and "Failed to load resource" in e and any(x in e for x in expected))
        ]
        assert not errors, f"console errors: {errors}"


@pytest.fixture
def guard():
    return PageGuard()


@pytest.fixture
def make_page(browser, server, guard):
    """``make_page(width=1400)`` → a fresh page on the dashboard, every non-local request aborted and recorded."""
    contexts = []

    def make(width: int = 1400, height: int = 900, path: str = "/"):
        context = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=True)
        contexts.append(context)

        def route(r):
            host = urlparse(r.request.url).hostname or ""
            if r.request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
                r.continue_()
            else:
                guard.outside_requests.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.on("console", lambda m: m.type == "error" and guard.console_errors.append(m.text))
        page.on("pageerror", lambda e: guard.console_errors.append(f"uncaught: {e}"))
        page.goto(server.url + path)
        page.wait_for_function("() => window.dashboardReady === true")
        return page

    yield make
    for context in contexts:
        context.close()
    guard.check()


@pytest.fixture(scope="session")
def shot():
    """``shot(page_or_locator, "name.png", doc_name=None)``: a screenshot under test-artifacts/; with
    RMSNORM_DOC_SCREENSHOTS=1 also copied to docs/screenshots/<doc_name> (the README's pictures)."""

    def save(page_or_locator, name: str, doc_name: str | None = None, full_page: bool = True) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / name
        kwargs = {"full_page": full_page} if hasattr(page_or_locator, "goto") else {}
        page_or_locator.screenshot(path=str(path), **kwargs)
        if doc_name and os.environ.get("RMSNORM_DOC_SCREENSHOTS") == "1":
            DOC_SHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, DOC_SHOTS / doc_name)
        return path

    return save
