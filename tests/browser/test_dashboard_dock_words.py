"""Issue 35, the dock's words and its cost-model box: the box draws only the lanes (and shapes) the run did not
measure, never replacing a measured time; the forward mode speaks of the forward; counts agree with their nouns;
each lane says in one line what to conclude from it."""

import math

import pytest
from browser_paths import COMMITTED_RESULTS
from dock_helpers import DRAWN, biggest_run, ok_rows, open_run, show_only, wait_settled

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]

PLUGIN = "torch-chunked"  # the example plugin: registered here, never in a committed GPU run


def test_cost_model_box_leaves_measured_times_alone(make_page, server):
    doc = biggest_run()
    run_id = doc["run"]["run_id"]
    page = make_page()
    shown = sorted(DRAWN | {PLUGIN})
    show_only(page, shown)
    open_run(page, run_id)
    state = wait_settled(page, shown)
    assert {s["timing"] for n, s in state.items() if n in DRAWN} == {"measured"}
    assert state[PLUGIN]["timing"] == "unmeasured"
    dtype = page.evaluate("window.dockScene.dtype")
    M, N = state["triton-atomic"]["M"], state["triton-atomic"]["N"]
    want = {
        r["impl"]: r["median_us"]
        for r in ok_rows(server, run_id)
        if r["dtype"] == dtype and r["M"] == M and r["N"] == N
    }

    page.check("#dock-model")
    state = page.wait_for_function(
        "(p) => window.dockState[p] && window.dockState[p].timing === 'model' ? window.dockState : false", arg=PLUGIN
    ).json_value()
    for name in DRAWN:  # still the run's medians, not the model's times
        assert state[name]["timing"] == "measured", name
        assert math.isclose(state[name]["totalUs"], want[name], rel_tol=1e-9), (
            name,
            state[name]["totalUs"],
            want[name],
        )
    timing = page.locator("#dock-timing").inner_text()
    assert "Measured" in timing and PLUGIN in timing and "cost model" in timing, timing
    assert "cost model" in state[PLUGIN]["what"] and "measured" in state["triton-atomic"]["what"]


def test_forward_words_plurals_and_what_you_see(make_page, server):
    page = make_page()
    show_only(page, DRAWN)
    page.check("#dock-model")  # every lane drawn: measured by the first look's run, else from the model
    page.wait_for_function(
        "(names) => names.every((n) => window.dockState[n] && window.dockState[n].timing !== 'unmeasured')",
        arg=sorted(DRAWN),
    )

    # One line per lane saying what to conclude: its family's mechanism, and where its time stands among the lanes.
    state = page.evaluate("window.dockState")
    words = {"triton-atomic": "door", "triton-workspace": "second pass", "triton-persistent": "registers"}
    for name, word in words.items():
        what = state[name]["what"]
        assert what.startswith("What you see:") and word in what, (name, what)
        shown = page.locator(f'#dock-lanes figure.lane[data-impl="{name}"] .lane-what')
        assert shown.is_visible() and shown.inner_text() == what
    drawn = [s for s in state.values() if s["timing"] != "unmeasured"]
    if len(drawn) > 1:
        fastest = min(drawn, key=lambda s: s["totalUs"])
        assert sum("the fastest of the" in s["what"] for s in drawn) == 1 and "the fastest of the" in fastest["what"]

    # Counts agree with their nouns (a single program / row / partial row is singular).
    texts = page.evaluate(
        """async () => { const m = await import('/static/js/dock_lanes.js');
             return [m.gridText({programs: 1, rowsPerProgram: 1, partialRows: 1, blocksPerTruck: 1}),
                     m.gridText({programs: 2, rowsPerProgram: 3, partialRows: 2, blocksPerTruck: 1})]; }"""
    )
    assert texts == ["1 program × 1 row · 1 partial row", "2 programs × 3 rows · 2 partial rows"]
    for lane in page.locator("#dock-lanes .lane-grid").all_inner_texts():
        assert "1 rows" not in lane and "1 programs" not in lane and "1 partial rows" not in lane, lane

    # The forward mode's legend is about the forward: no dγ, no dock; each lane says nothing waits.
    legend = page.locator(".dock-legend")
    assert "dγ vector is the dock" in legend.inner_text()
    page.select_option("#dock-mode", "fwd")
    page.wait_for_function(
        "() => Object.values(window.dockState).length"
        " && Object.values(window.dockState).every((s) => s.kind === 'forward')"
    )
    text = legend.inner_text()
    assert "dγ" not in text and "dock" not in text.split("/api/launch")[0] and "y" in text, text
    whats = {n: s["what"] for n, s in page.evaluate("window.dockState").items()}
    assert all("nothing waits" in w for w in whats.values()), whats
    page.select_option("#dock-mode", "bwd")
    assert "dγ vector is the dock" in legend.inner_text()
