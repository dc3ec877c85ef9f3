"""Issue 35, the charts' axes and captions: the x axis is N or M (a control, kept in the URL with log y); a log y
axis ticks at 1, 2, 5 × 10^k; no two tick labels overlap (their drawn boxes, rotation included, measured at
1440x900 and 390x844); the speedup and run-vs-run views' caption explains only what they draw."""

import json
import math
from urllib.parse import parse_qs, urlparse

import pytest
from browser_paths import COMMITTED_RESULTS
from chart_helpers import biggest_committed, drawn, open_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]

# Each tick label's four corners on screen: its box in its own coordinates through its transform (plotly rotates
# slanted labels), so a slanted label is measured as drawn, not by its axis-aligned hull.
LABEL_BOXES = """(ids) => ids.flatMap((id) => [...document.querySelectorAll(`#${id} .xtick text, #${id} .ytick text`)]
  .filter((t) => t.textContent.trim())
  .map((t) => { const b = t.getBBox(); const m = t.getScreenCTM();
    const pt = (x, y) => { const p = new DOMPoint(x, y).matrixTransform(m); return [p.x, p.y]; };
    return {id, axis: t.closest('.xtick') ? 'x' : 'y', text: t.textContent,
            corners: [pt(b.x, b.y), pt(b.x + b.width, b.y), pt(b.x + b.width, b.y + b.height), pt(b.x, b.y + b.height)]}; }))"""


def overlap(a, b, slack=0.5):
    """Two convex quadrilaterals overlap by more than `slack` px (separating-axis test)."""
    for poly in (a, b):
        for i in range(4):
            (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % 4]
            nx, ny = y2 - y1, x1 - x2
            norm = math.hypot(nx, ny) or 1
            pa = [(x * nx + y * ny) / norm for x, y in a]
            pb = [(x * nx + y * ny) / norm for x, y in b]
            if max(pa) <= min(pb) + slack or max(pb) <= min(pa) + slack:
                return False
    return True


def collisions(page, ids):
    labels = page.evaluate(LABEL_BOXES, ids)
    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            if a["id"] == b["id"] and a["axis"] == b["axis"] and overlap(a["corners"], b["corners"]):
                out.append((a["id"], a["text"], b["text"]))
    return labels, out


def models_run():
    for path in COMMITTED_RESULTS:
        doc = json.loads(path.read_text())
        if doc["run"]["sweep"].get("preset") == "models":
            return doc
    pytest.skip("no committed run of the models preset")


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)])
def test_no_tick_labels_overlap(make_page, size):
    """The models preset's widths (2880 next to 3072, 4096 next to 4608 ...) with their model names, log y, and the
    speedup view: every tick label stands clear of the others."""
    width, height = size
    doc = models_run()
    page = make_page(width=width, height=height, path=f"/?runs={doc['run']['run_id']}&M=all")
    page.wait_for_function(
        "() => +document.querySelector('#chart-fwd').dataset.points + +document.querySelector('#chart-bwd').dataset.points > 0"
    )
    page.wait_for_timeout(300)  # the legend band's relayout
    labels, hits = collisions(page, ["chart-fwd", "chart-bwd"])
    named = [t for t in labels if " · " in t["text"]]
    assert named, "the models run's N axis names no model"
    assert not hits, f"{width}px: tick labels overlap: {hits[:5]}"
    # Every measured width is still a tick (a dropped label keeps its mark).
    for panel in ("fwd", "bwd"):
        widths = {r["N"] for r in doc["rows"] if r["status"] == "ok" and r["pass"] == panel}
        vals = set(page.evaluate(f"() => [...document.getElementById('chart-{panel}').layout.xaxis.tickvals]"))
        assert widths <= vals, (panel, sorted(widths - vals))
    page.check("#chart-logy")
    page.wait_for_function("() => document.getElementById('chart-bwd').layout.yaxis.type === 'log'")
    page.wait_for_timeout(300)
    _, hits = collisions(page, ["chart-fwd", "chart-bwd"])
    assert not hits, f"{width}px, log y: tick labels overlap: {hits[:5]}"
    page.check('input[name="view"][value="speedup"]')
    page.wait_for_function("() => +document.querySelector('#chart-alt-bwd').dataset.points > 0")
    page.wait_for_timeout(300)
    _, hits = collisions(page, ["chart-alt-fwd", "chart-alt-bwd"])
    assert not hits, f"{width}px, speedup: tick labels overlap: {hits[:5]}"


def test_x_axis_choice_and_log_y_are_kept_in_the_url(make_page, server):
    doc = biggest_committed()
    run_id = doc["run"]["run_id"]
    page = make_page()
    open_run(page, run_id)
    page.select_option("#chart-x", "M")
    page.wait_for_function("() => document.getElementById('chart-bwd').layout.xaxis.title.text.startsWith('M (rows')")
    # Along M: each line is one implementation at one N (the N filter's), its points the run's Ms there.
    assert page.locator("#chart-n").is_visible() and not page.locator("#chart-m").is_visible()
    n = int(page.input_value("#chart-n"))
    dtype = page.input_value("#chart-dtype")
    for t in drawn(page, "bwd"):
        if (t["meta"] or {}).get("kind") != "measured":
            continue
        impl = t["meta"]["impl"]
        want = sorted(
            r["M"]
            for r in doc["rows"]
            if r["impl"] == impl and r["pass"] == "bwd" and r["N"] == n and r["dtype"] == dtype and r["status"] == "ok"
        )
        assert t["x"] == want, (impl, t["x"], want)
        assert all(c[2] == n for c in t["customdata"])
    page.check("#chart-logy")
    page.wait_for_function("() => document.getElementById('chart-bwd').layout.yaxis.type === 'log'")
    # Log y: ticks at 1, 2, 5 × 10^k, written in full.
    axis = page.evaluate(
        "() => { const a = document.getElementById('chart-bwd').layout.yaxis; return {v: a.tickvals, t: a.ticktext}; }"
    )
    assert axis["v"] and all(round(v / 10 ** math.floor(math.log10(v) + 1e-9), 6) in (1, 2, 5) for v in axis["v"]), axis
    assert all(t.replace("k", "").replace(".", "").replace("M", "").isdigit() for t in axis["t"]), axis["t"]
    page.wait_for_function("() => location.search.includes('logy=1') && location.search.includes('x=M')")
    query = parse_qs(urlparse(page.url).query)
    assert query["x"] == ["M"] and query["logy"] == ["1"] and query["N"] == [str(n)]

    # The URL restores both.
    again = make_page(path="/" + page.url.split("/", 3)[3])
    again.wait_for_function(
        "() => document.getElementById('chart-bwd').layout"
        " && document.getElementById('chart-bwd').layout.yaxis.type === 'log'"
        " && document.getElementById('chart-bwd').layout.xaxis.title.text.startsWith('M (rows')"
    )
    assert again.input_value("#chart-x") == "M" and again.is_checked("#chart-logy")
    assert int(again.input_value("#chart-n")) == n
    # Back to N: the M filter again, the URL forgets x and N.
    again.select_option("#chart-x", "N")
    again.wait_for_function(
        "() => document.getElementById('chart-bwd').layout.xaxis.title.text.startsWith('N (hidden')"
    )
    again.wait_for_function("() => !location.search.includes('x=M')")
    assert again.locator("#chart-m").is_visible() and not again.locator("#chart-n").is_visible()


def test_caption_explains_only_what_the_view_draws(make_page):
    doc = biggest_committed()
    page = make_page()
    open_run(page, doc["run"]["run_id"])
    notes = page.locator("#chart-notes")
    assert "★" in notes.inner_text()  # the metric views draw stars (and say so)
    for view, says in (("speedup", "1×"), ("diff", "0 %")):
        page.check(f'input[name="view"][value="{view}"]')
        page.wait_for_function("(s) => document.querySelector('#chart-notes').textContent.includes(s)", arg=says)
        text = notes.inner_text()
        for mark in ("★", "hollow", "outlined", "error bars"):
            assert mark not in text, (view, text)
    page.check('input[name="view"][value="GBps"]')
    page.wait_for_function("() => document.querySelector('#chart-notes').textContent.includes('★')")
