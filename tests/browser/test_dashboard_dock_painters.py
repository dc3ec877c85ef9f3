"""One painter per dγ family (static/js/dock_painters/): each draws its own picture from the real launch grid
(atomic: one door; workspace and persistent: one bay per partial row up to the cap, persistent trucks going back
and forth while loading; the default: a box with the name), the page picks the painter by the family the API
gives (`dgamma_family` first), and on a phone (390x844) no two lane labels overlap."""

import math

import pytest
from browser_paths import COMMITTED_RESULTS
from dock_helpers import DRAWN, biggest_run, open_run, show_only, wait_settled

pytestmark = [pytest.mark.browser, pytest.mark.server]

# The dock at M=16384, N=4096: with the committed runs, the biggest one open (it measured that shape: the sliders
# snap to a run's measured shapes, and the first look's run need not have it); without them, the cost model's.
AT_16K_4K = (f"runs={biggest_run()['run']['run_id']}&" if COMMITTED_RESULTS else "") + "dockM=16384&dockN=4096"

PAINT = """async ({impls, M, N, sm}) => {
  const idx = await import('/static/js/dock_painters/index.js');
  const lanes = await import('/static/js/dock_painters/lane.js');
  const out = {};
  for (const {name, family, launch} of impls) {
    const canvas = document.createElement('canvas');
    canvas.width = 600; canvas.height = 216;
    const ctx = canvas.getContext('2d');
    const calls = [];
    for (const fn of ['fillRect', 'strokeRect', 'fillText', 'arc']) {
      const orig = ctx[fn].bind(ctx);
      ctx[fn] = (...a) => { calls.push({fn, a, fill: ctx.fillStyle, stroke: ctx.strokeStyle}); return orig(...a); };
    }
    const schedule = idx.scheduleFor({family, launch, M, N, smCount: sm, mode: 'bwd'});
    const painter = idx.painterFor(family, launch, 'bwd');
    const lane = {impl: {name, family}, launch, schedule, w: 600, h: 216, pos: new Map()};
    const g = lanes.geometry(lane, {top: 20, bottomPad: 8});
    const t = schedule.consolidation ? (schedule.consolidation.start + schedule.consolidation.end) / 2 : schedule.total / 2;
    painter.paint(ctx, lane, g, t, '#123456', []);
    // Where a truck is half-way through its loading, against its parking place.
    const tr = schedule.trucks[0];
    const park = lanes.parkPos(g, 0, schedule.trucks.length);
    const during = painter.loading ? painter.loading(lane, g, tr, tr.loadStart + 0.25 * (tr.loadEnd - tr.loadStart), park) : park;
    out[name] = {
      kind: painter.kind, bays: schedule.bays, trucks: schedule.trucks.length, programs: schedule.programs,
      door: calls.filter((c) => c.fn === 'fillRect' && c.fill === '#f2a900').length,
      bayRects: calls.filter((c) => c.fn === 'strokeRect' && c.stroke === '#9a978c').length,
      box: calls.filter((c) => c.fn === 'strokeRect' && c.stroke === '#6b6960').length,
      texts: calls.filter((c) => c.fn === 'fillText').map((c) => c.a[0]),
      packets: calls.filter((c) => c.fn === 'arc').length,
      loadingMoves: during.x < park.x - 1,
    };
  }
  return out;
}"""


def trucks_for(programs):
    return min(programs, 64, max(16, math.ceil(math.sqrt(programs))))


def test_each_family_painter_draws_its_own_picture_from_the_real_grid(make_page, server):
    page = make_page()
    M, N, sm = 16384, 4096, 132
    launch = server.get(f"/api/launch?M={M}&N={N}&sm_count={sm}")
    families = {i["name"]: i["family"] for i in server.get("/api/implementations")}
    names = ["triton-atomic", "triton-workspace", "triton-persistent", "torch-chunked", "eager"]
    impls = [{"name": n, "family": families[n], "launch": launch[n]} for n in names]
    got = page.evaluate(PAINT, {"impls": impls, "M": M, "N": N, "sm": sm})

    atomic = got["triton-atomic"]
    assert (
        atomic["kind"] == "atomic" and atomic["door"] == 1 and "1 door" in atomic["texts"] and "dγ" in atomic["texts"]
    )
    assert atomic["bayRects"] == 0 and atomic["box"] == 0 and not atomic["loadingMoves"]
    for name in ("triton-workspace", "triton-persistent", "torch-chunked"):
        s, grid = got[name], launch[name]
        want_bays = max(1, min(grid["partial_rows"], trucks_for(grid["programs"]), 14))
        assert s["kind"] == families[name] and s["programs"] == grid["programs"], name
        assert s["bays"] == want_bays and s["bayRects"] == want_bays, (name, s, grid)
        assert s["door"] == 0 and s["box"] == 0 and s["packets"] == want_bays, (
            name
        )  # mid-consolidation: a packet per bay
    assert got["triton-persistent"]["loadingMoves"] and not got["triton-workspace"]["loadingMoves"]
    assert got["triton-persistent"]["trucks"] < got["triton-workspace"]["trucks"]  # few trucks, many rows each
    eager = got["eager"]
    assert launch["eager"] is None and eager["kind"] == "generic" and eager["box"] == 1
    assert (
        "eager" in eager["texts"] and "grid not published" in eager["texts"] and eager["door"] == eager["bayRects"] == 0
    )


def test_lanes_take_the_painter_of_the_family_the_api_gives(make_page, server):
    """A `dgamma_family` key, when the service sends one, wins over `family`: the plugin drawn as atomic then
    queues at one door with its own grid; with no grid published the default painter draws it."""

    def route(r):
        res = r.fetch()
        impls = res.json()
        for i in impls:
            if i["name"] == "torch-chunked":
                i["dgamma_family"] = "atomic"
            if i["name"] == "eager":
                i["dgamma_family"] = "persistent"
        r.fulfill(response=res, json=impls)

    page = make_page(path=f"/?{AT_16K_4K}")
    page.route("**/api/implementations", route)
    page.reload()
    page.wait_for_function("() => window.dashboardReady === true")
    show_only(page, ["torch-chunked", "eager", "triton-workspace"])
    state = wait_settled(page, ["eager", "torch-chunked", "triton-workspace"], 16384, 4096)
    grid = server.get("/api/launch?M=16384&N=4096&sm_count=132")
    assert (
        state["torch-chunked"]["kind"] == "atomic"
        and state["torch-chunked"]["programs"] == grid["torch-chunked"]["programs"]
    )
    assert state["torch-chunked"]["maxQueueLength"] > state["triton-workspace"]["maxQueueLength"] == 0
    assert state["eager"]["kind"] == "generic"
    kinds = page.locator("#dock-lanes figure.lane").evaluate_all(
        "(els) => els.map((e) => [e.dataset.impl, e.dataset.kind])"
    )
    assert dict(kinds) == {"torch-chunked": "atomic", "eager": "generic", "triton-workspace": "workspace"}


def test_lane_labels_state_the_real_grid_and_the_pictures_differ(make_page, server):
    page = make_page(path=f"/?{AT_16K_4K}")
    show_only(page, sorted(DRAWN) + ["eager"])
    state = wait_settled(page, sorted(DRAWN) + ["eager"], 16384, 4096)
    grid = server.get("/api/launch?M=16384&N=4096&sm_count=132")
    for name in DRAWN:
        text = page.locator(f'#dock-lanes figure[data-impl="{name}"] .lane-grid').inner_text()
        g = grid[name]
        n = lambda count, noun: f"{count} {noun}" + ("" if count == 1 else "s")  # noqa: E731 (issue 35: "1 row")
        want = (
            f"{n(g['programs'], 'program')} × {n(g['rows_per_program'], 'row')} · {n(g['partial_rows'], 'partial row')}"
        )
        assert text.startswith(want), text
        assert state[name]["kind"] == name.removeprefix("triton-")
    page.click("#dock-play")  # pause, then show one moment in every lane
    fastest = min(s["totalUs"] for s in state.values())
    page.evaluate(f"window.dockScene.seekUs({fastest * 0.6})")
    pictures = {
        n: page.locator(f'#dock-lanes figure[data-impl="{n}"] canvas').evaluate("(c) => c.toDataURL()") for n in state
    }
    assert len(set(pictures.values())) == len(pictures)


def overlaps(a, b, slack=0.5):
    """Two boxes ({x, y, w, h} or DOMRect's {x, y, width, height}) share more than `slack` px each way."""
    aw, ah, bw, bh = (
        a.get("w", a.get("width")),
        a.get("h", a.get("height")),
        b.get("w", b.get("width")),
        b.get("h", b.get("height")),
    )
    return (
        a["x"] + slack < b["x"] + bw
        and b["x"] + slack < a["x"] + aw
        and a["y"] + slack < b["y"] + bh
        and b["y"] + slack < a["y"] + ah
    )


LABEL_BOXES = """() => [...document.querySelectorAll('#dock-lanes figure.lane')].map((f) => ({
  impl: f.dataset.impl, fig: f.getBoundingClientRect().toJSON(),
  labels: [...f.querySelectorAll('.lane-label')].filter((e) => e.textContent.trim())
    .map((e) => ({cls: e.className, text: e.textContent, ...e.getBoundingClientRect().toJSON()})),
}))"""


@pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/")
def test_mobile_lane_labels_never_overlap(make_page, shot):
    page = make_page(width=390, height=844)
    names = sorted(DRAWN) + ["eager"]
    show_only(page, names)
    doc = biggest_run()
    open_run(page, doc["run"]["run_id"])
    state = wait_settled(page, names, timing="measured")
    page.click("#dock-play")
    page.locator("#dock").scroll_into_view_if_needed()
    width = page.evaluate("document.documentElement.clientWidth")
    for moment in (0.0, 0.6, 1.0):
        page.evaluate(f"window.dockScene.seekUs({max(s['totalUs'] for s in state.values()) * moment})")
        lanes = page.evaluate(LABEL_BOXES)
        assert {lane["impl"] for lane in lanes} == set(names)
        for lane in lanes:
            fig, labels = lane["fig"], lane["labels"]
            assert len(labels) >= 5, lane
            assert fig["right"] <= width + 0.5, lane["impl"]
            for i, a in enumerate(labels):
                assert fig["left"] - 0.5 <= a["left"] and a["right"] <= fig["right"] + 0.5, (lane["impl"], a)
                for b in labels[i + 1 :]:
                    assert not overlaps(a, b), (lane["impl"], a["text"], b["text"])
        # The labels drawn on the canvases (dγ, 1 door, the default box's) stay apart and inside it.
        for name, s in page.evaluate("window.dockState").items():
            boxes = s["labels"]
            for i, a in enumerate(boxes):
                assert a["x"] >= 0 and a["x"] + a["w"] <= s["canvasW"] and a["y"] >= 0, (name, a)
                for b in boxes[i + 1 :]:
                    assert not overlaps(a, b), (name, a, b)
    # The dock's controls do not overlap either.
    controls = page.locator("#dock .dock-controls > label, #dock .dock-controls > button").evaluate_all(
        "(els) => els.map((e) => ({text: e.textContent, ...e.getBoundingClientRect().toJSON()}))"
    )
    for i, a in enumerate(controls):
        assert a["right"] <= width + 0.5, a
        for b in controls[i + 1 :]:
            assert not overlaps(a, b), (a["text"], b["text"])
    shot(page.locator("#dock"), "dock-mobile.png")
