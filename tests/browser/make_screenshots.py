"""The README's pictures, regenerated: `python tests/browser/make_screenshots.py` starts the service as the browser
tests do (committed GPU results imported, CPU worker, the example plugin), opens the page in Debian's Chromium and
writes docs/screenshots/: dashboard.png (1440x900, the first look), dashboard-mobile.png (390x844, its results),
table.png (the per-shape table with its ★) and dock.png (the dock on the biggest committed run, atomic queue long).
Set RMSNORM_SCREENSHOT_SCHEME=dark for the dark theme, RMSNORM_SCREENSHOT_DIR=<folder> to write elsewhere (to look at
the dark pictures without replacing the README's)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from browser_paths import COMMITTED_RESULTS, DOC_SHOTS, REPO
from history_helpers import click_and_wait

CHROMIUM = os.environ.get("RMSNORM_CHROMIUM", "/usr/bin/chromium")
DRAWN = ["triton-atomic", "triton-persistent", "triton-workspace"]


def start_server(data_dir: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "RMSNORM_DATA_DIR": data_dir,
        "RMSNORM_PLUGINS": "examples.dock_plugin",
        "RMSNORM_CEILING_BYTES": str(4 << 20),
        "RMSNORM_RESULTS_DIR": str(REPO / "results"),
        "RMSNORM_DEVICES": "cpu",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [
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
        ],
        cwd=REPO,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/api/health", timeout=5) as res:
                if all(d.get("ready") for d in json.loads(res.read())["gpus"]):
                    return proc, url
        except OSError:
            pass
        time.sleep(0.3)
    proc.terminate()
    raise SystemExit("the server did not get ready in 180 s")


def main() -> None:
    from playwright.sync_api import sync_playwright

    scheme = os.environ.get("RMSNORM_SCREENSHOT_SCHEME", "light")
    shots = Path(os.environ.get("RMSNORM_SCREENSHOT_DIR", DOC_SHOTS))
    biggest = max((json.loads(p.read_text()) for p in COMMITTED_RESULTS), key=lambda d: len(d["rows"]))
    shots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as data_dir:
        proc, url = start_server(data_dir)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
                )

                def page_at(width, height):
                    page = browser.new_context(
                        viewport={"width": width, "height": height}, color_scheme=scheme
                    ).new_page()
                    page.goto(url + "/")
                    page.wait_for_function("() => window.dashboardReady === true")
                    page.wait_for_function("() => +document.querySelector('#chart-fwd').dataset.points > 0")
                    page.wait_for_timeout(800)  # plotly's last relayout
                    return page

                page = page_at(1440, 900)
                page.screenshot(path=str(shots / "dashboard.png"))
                page.locator("#shape-table").scroll_into_view_if_needed()
                page.locator("#shape-table").locator("xpath=ancestor::section[1]").screenshot(
                    path=str(shots / "table.png")
                )

                # The dock on the run that measured every strategy, part-way through its fastest lane.
                run_id = biggest["run"]["run_id"]
                for box in page.locator("#dock-impls input").all():
                    box.set_checked(box.get_attribute("value") in DRAWN)
                click_and_wait(page, run_id)
                page.wait_for_function(
                    "(names) => Object.keys(window.dockState).sort().join() === names.join()"
                    " && Object.values(window.dockState).every((s) => s.timing === 'measured')",
                    arg=DRAWN,
                )
                page.click("#dock-play")
                fastest = min(s["totalUs"] for s in page.evaluate("window.dockState").values())
                page.evaluate(f"window.dockScene.seekUs({fastest * 0.6})")
                page.locator("#dock").scroll_into_view_if_needed()
                page.locator("#dock").screenshot(path=str(shots / "dock.png"))

                # On a phone of this CPU-only service the results come first, the sweep form one tap away (issue 35):
                # the picture is the first screen, as a visitor sees it.
                mobile = page_at(390, 844)
                mobile.screenshot(path=str(shots / "dashboard-mobile.png"))
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    print("wrote", ", ".join(sorted(str(p) for p in shots.glob("*.png"))))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "tests" / "browser"))
    main()
