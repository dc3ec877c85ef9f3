"""The loading dock: one lane per registered backward (the example plugin too) drawn from the real launch
grids; the animation advances (frames and canvas pixels change) and pauses; the atomic strategy's queue at
its one dock is longer than the workspace's for the same configuration and grows with the block count."""

import json
import math

import pytest
from browser_paths import COMMITTED_RESULTS
from history_helpers import click_and_wait

pytestmark = [pytest.mark.browser, pytest.mark.server]

DRAWN = {"triton-atomic", "triton-workspace", "triton-persistent", "torch-chunked"}


def lanes(page):
    return set(page.locator("#dock-lanes figure.lane").evaluate_all("(els) => els.map((e) => e.dataset.impl)"))


def wait_lanes(page, names):
    page.wait_for_function(
        "(names) => window.dockState && names.every((n) => n in window.dockState)", arg=sorted(names)
    )


def sample_queues(page, ms=1500):
    """The largest queue each lane showed while the animation ran for `ms` milliseconds."""
    return page.evaluate(
        """(ms) => new Promise((done) => {
          const best = {};
          const t0 = performance.now();
          const step = () => {
            for (const [name, s] of Object.entries(window.dockState)) best[name] = Math.max(best[name] ?? 0, s.queueLength);
            if (performance.now() - t0 < ms) requestAnimationFrame(step); else done(best);
          };
          requestAnimationFrame(step);
        })""",
        ms,
    )


def test_dock_draws_every_backward_with_the_plugin_and_animates(make_page, server, shot):
    page = make_page()
    backward = {i["name"] for i in server.get("/api/implementations") if "bwd" in i["passes"]}
    # Every registered backward can be shown (a checkbox each), the plugin included.
    offered = set(page.locator("#dock-impls input").evaluate_all("(els) => els.map((e) => e.value)"))
    assert offered == backward and "torch-chunked" in offered
    # The first look opens the newest stored GPU run, which need not have measured these strategies (nor ever the
    # plugin): the cost model draws every lane it did not measure (issue 35: never one it measured).
    page.check("#dock-model")
    page.wait_for_function(
        "(names) => names.every((n) => window.dockState[n] && window.dockState[n].timing !== 'unmeasured')",
        arg=sorted(DRAWN | {"torch-chunked"}),
    )
    assert page.evaluate("window.dockState['torch-chunked'].timing") == "model"
    wait_lanes(page, DRAWN)
    assert DRAWN <= lanes(page)

    # Drawn from the real launch grids of /api/launch.
    state = page.evaluate("window.dockState")
    m, n, sm = state["triton-atomic"]["M"], state["triton-atomic"]["N"], state["triton-atomic"]["smCount"]
    launch = server.get(f"/api/launch?M={m}&N={n}&sm_count={sm}")
    for name in DRAWN:
        assert state[name]["programs"] == launch[name]["programs"], name
        assert state[name]["kind"] == server_family(server, name)
    assert state["torch-chunked"]["programs"] == -(-m // 64)

    # The atomic strategy queues at one dock; the workspace one unloads at its own bays.
    assert state["triton-atomic"]["maxQueueLength"] > state["triton-workspace"]["maxQueueLength"]
    seen = sample_queues(page)
    assert seen["triton-atomic"] > seen["triton-workspace"], seen

    # Frames advance and the canvas pixels change.
    canvas = page.locator('#dock-lanes figure.lane[data-impl="triton-atomic"] canvas')
    canvas.scroll_into_view_if_needed()
    frame1 = page.evaluate("window.dockState['triton-atomic'].frame")
    img1 = canvas.screenshot()
    page.wait_for_timeout(400)
    img2 = canvas.screenshot()
    frame2 = page.evaluate("window.dockState['triton-atomic'].frame")
    assert frame2 > frame1
    assert img1 != img2, "the dock canvas did not change between two screenshots"

    # Pause freezes it; Play resumes.
    page.click("#dock-play")
    assert page.get_attribute("#dock-play", "aria-pressed") == "false"
    page.wait_for_timeout(100)
    f1, p1 = page.evaluate("window.dockState['triton-atomic'].frame"), canvas.screenshot()
    page.wait_for_timeout(400)
    f2, p2 = page.evaluate("window.dockState['triton-atomic'].frame"), canvas.screenshot()
    assert f1 == f2 and p1 == p2
    page.click("#dock-play")
    page.wait_for_function(f"() => window.dockState['triton-atomic'].frame > {f2}")

    # A chosen moment for the picture: half-way through the fastest lane, when the atomic queue is long.
    page.click("#dock-play")
    fastest = min(s["totalUs"] for s in page.evaluate("window.dockState").values())
    page.evaluate(f"window.dockScene.seekUs({fastest * 0.6})")
    state = page.evaluate("window.dockState")
    assert state["triton-atomic"]["queueLength"] > state["triton-workspace"]["queueLength"] == 0
    page.locator("#dock").scroll_into_view_if_needed()
    # The README's picture shows the committed GPU run's measured times when there is one (below).
    shot(page.locator("#dock"), "dock.png", doc_name=None if COMMITTED_RESULTS else "dock.png")


@pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet")
def test_dock_runs_at_the_committed_gpu_runs_measured_backward_times(make_page, server, shot):
    """Opening the committed GPU run sets the dock's lanes to its measured backward times, at a shape it measured,
    with its GPU's SM count; the atomic strategy still queues at its one dock."""
    doc = max((json.loads(p.read_text()) for p in COMMITTED_RESULTS), key=lambda d: len(d["rows"]))
    rows = [
        r for r in server.get(f"/api/runs/{doc['run']['run_id']}")["rows"] if r["status"] == "ok" and r["pass"] == "bwd"
    ]
    measured = {r["impl"] for r in rows}
    page = make_page()
    wait_lanes(page, DRAWN)
    # Show the drawn strategies this run measured (the example plugin was not in it).
    shown = sorted(DRAWN & measured)
    assert {"triton-atomic", "triton-workspace"} <= set(shown), measured
    for box in page.locator("#dock-impls input").all():
        box.set_checked(box.get_attribute("value") in shown)
    click_and_wait(page, doc["run"]["run_id"])
    page.wait_for_function(
        "([names, id]) => window.dockState && Object.keys(window.dockState).sort().join() === names.join()"
        " && Object.values(window.dockState).every((s) => s.timing === 'measured' && s.runId === id)",
        arg=[shown, doc["run"]["run_id"]],
    )
    state = page.evaluate("window.dockState")
    m, n, sm = state["triton-atomic"]["M"], state["triton-atomic"]["N"], state["triton-atomic"]["smCount"]
    assert sm == doc["run"]["device"]["sm_count"]
    # The dtype is the chart's filter (stated in the dock), the times that dtype's medians.
    dtype = page.input_value("#chart-dtype")
    assert page.evaluate("window.dockScene.dtype") == dtype and dtype in page.locator("#dock-source").inner_text()
    for name in shown:
        at = [r for r in rows if r["impl"] == name and r["M"] == m and r["N"] == n]
        want = next(r["median_us"] for r in at if r["dtype"] == dtype)
        assert math.isclose(state[name]["totalUs"], want, rel_tol=1e-9), (name, state[name]["totalUs"], want)
    launch = server.get(f"/api/launch?M={m}&N={n}&sm_count={sm}")
    for name in shown:
        assert state[name]["programs"] == launch[name]["programs"], name
    timing = page.locator("#dock-timing").inner_text()
    assert "measured" in timing and doc["run"]["device"]["name"] in timing, timing
    assert state["triton-atomic"]["maxQueueLength"] > state["triton-workspace"]["maxQueueLength"]

    # A chosen moment for the picture: part-way through the fastest lane, when the atomic queue is long.
    page.click("#dock-play")
    fastest = min(s["totalUs"] for s in state.values())
    page.evaluate(f"window.dockScene.seekUs({fastest * 0.6})")
    state = page.evaluate("window.dockState")
    assert state["triton-atomic"]["queueLength"] > state["triton-workspace"]["queueLength"] == 0
    page.locator("#dock").scroll_into_view_if_needed()
    shot(page.locator("#dock"), "dock-measured.png", doc_name="dock.png")


def server_family(server, name):
    fam = {i["name"]: i["family"] for i in server.get("/api/implementations")}[name]
    return fam if fam in ("atomic", "workspace", "persistent") else "generic"


def test_dock_queue_grows_with_the_block_count(make_page):
    page = make_page()
    wait_lanes(page, DRAWN)
    # On the cost model the M slider spans every M at the N it holds. (Kept to the open run's measured shapes,
    # Home and End snap to its smallest and largest measured M, whose N may differ: the newest committed run
    # measured its largest M only at narrow rows, so its time there can be the smaller.)
    page.check("#dock-model")
    slider = page.locator("#dock-m")
    slider.focus()

    def at(key):
        before = page.evaluate("window.dockState['triton-atomic'].M")
        page.keyboard.press(key)
        page.wait_for_function(
            f"() => window.dockState['triton-atomic'] && window.dockState['triton-atomic'].M !== {before}"
        )
        return page.evaluate("window.dockState")

    small = at("Home")
    large = at("End")
    assert large["triton-atomic"]["programs"] > small["triton-atomic"]["programs"]
    assert large["triton-atomic"]["maxQueueLength"] > small["triton-atomic"]["maxQueueLength"]
    assert large["triton-atomic"]["N"] == small["triton-atomic"]["N"]
    assert large["triton-atomic"]["totalUs"] > small["triton-atomic"]["totalUs"]
    assert page.locator("#dock-m-out").inner_text() == str(large["triton-atomic"]["M"])
    for state in (small, large):
        assert state["triton-atomic"]["maxQueueLength"] > state["triton-workspace"]["maxQueueLength"]


def test_dock_forward_mode_and_generic_lanes(make_page, server):
    page = make_page()
    wait_lanes(page, DRAWN)
    page.select_option("#dock-mode", "fwd")
    forward = sorted(
        i["name"]
        for i in server.get("/api/implementations")
        if "fwd" in i["passes"] and i["available"] and i["family"] != "baseline"
    )
    assert "torch-chunked" in forward
    page.wait_for_function(
        "(names) => Object.keys(window.dockState).sort().join() === names.join()"
        " && Object.values(window.dockState).every((s) => s.mode === 'fwd')",
        arg=forward,
    )
    state = page.evaluate("window.dockState")
    assert all(s["kind"] == "forward" and s["maxQueueLength"] == 0 for s in state.values()), state
    page.select_option("#dock-mode", "bwd")
    # A baseline with no published grid gets the generic drawing, labelled with its name.
    page.locator('#dock-impls input[value="eager"]').check()
    page.wait_for_function("() => window.dockState.eager && window.dockState.eager.mode === 'bwd'")
    assert page.evaluate("window.dockState.eager.kind") == "generic"
