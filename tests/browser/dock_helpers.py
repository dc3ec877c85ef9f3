"""What the dock's browser tests share: the committed GPU run with the most rows, opening it from History,
and waiting for the dock's lanes."""

import json

from browser_paths import COMMITTED_RESULTS
from history_helpers import click_and_wait

DRAWN = {"triton-atomic", "triton-workspace", "triton-persistent"}


def biggest_run():
    """The committed result document with the most rows (several dtypes, a full M x N grid)."""
    return max((json.loads(p.read_text()) for p in COMMITTED_RESULTS), key=lambda d: len(d["rows"]))


def ok_rows(server, run_id, mode="bwd"):
    return [r for r in server.get(f"/api/runs/{run_id}")["rows"] if r["status"] == "ok" and r["pass"] == mode]


def show_only(page, names):
    for box in page.locator("#dock-impls input").all():
        box.set_checked(box.get_attribute("value") in names)


def open_run(page, run_id):
    """Open a run from History and wait until the dock uses it: named, and every lane drawn from its times (the lanes
    of the run open before are still there until the launch grids come back)."""
    click_and_wait(page, run_id)
    page.wait_for_function(
        "(id) => window.dockScene && window.dockScene.runId === id"
        " && Object.values(window.dockState || {}).every((s) => s.runId === id)",
        arg=run_id,
    )


def wait_settled(page, names, M=None, N=None, timing=None):
    """Lanes for exactly `names` (sorted), at shape (M, N) and with that timing when given."""
    page.wait_for_function(
        """([names, M, N, timing]) => {
          const s = window.dockState || {};
          const keys = Object.keys(s).sort();
          return keys.join() === names.join() && keys.every((k) => (M == null || s[k].M === M)
            && (N == null || s[k].N === N) && (timing == null || s[k].timing === timing));
        }""",
        arg=[sorted(names), M, N, timing],
    )
    return page.evaluate("window.dockState")


def slider_value(page, which):
    return int(page.locator(f"#dock-{which}-out").inner_text())
