"""The charts' toolbar: an allow-list of mode-bar buttons (no cloud upload / sharing, PNG export kept, our CSV
button), none of them in the tab order; the page's "CSV of this view" gives exactly the plotted points; on a
phone and on a wide screen the mode bar never covers a chart's title; the CPU-only notice shows once."""

import csv
import io
import math
import re

import pytest
from browser_paths import COMMITTED_RESULTS
from chart_helpers import biggest_committed, drawn, open_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]

FORBIDDEN = re.compile(r"cloud|share|studio|json|edit in|plotly", re.I)


def modebar_buttons(page):
    return page.evaluate(
        """() => [...document.querySelectorAll('.modebar')].map((bar) => ({
             chart: bar.closest('.chart')?.id,
             buttons: [...bar.querySelectorAll('button, a')].map((b) => ({
               title: b.getAttribute('data-title') || '', attr: b.getAttribute('data-attr') || '',
               val: b.getAttribute('data-val') || '', tabindex: b.getAttribute('tabindex'),
               href: b.getAttribute('href') || ''}))}))"""
    )


def test_mode_bar_is_an_allow_list_out_of_the_tab_order(make_page):
    page = make_page()
    open_run(page, biggest_committed()["run"]["run_id"])
    page.hover("#chart-fwd .plot-container")
    bars = modebar_buttons(page)
    assert {b["chart"] for b in bars} >= {"chart-fwd", "chart-bwd"}, bars
    for bar in bars:
        titles = [b["title"] for b in bar["buttons"]]
        assert bar["buttons"], bar
        for b in bar["buttons"]:
            assert not FORBIDDEN.search(b["title"] + " " + b["attr"] + " " + b["href"]), (bar["chart"], b)
            assert b["tabindex"] == "-1", (bar["chart"], b)
        assert any(t.lower() == "download plot as a png" for t in titles), titles  # PNG export kept
        assert "Download the CSV of this view" in titles, titles
    # Every redraw (a view switch) keeps the allow-list and the tab order.
    page.check('input[name="view"][value="latency"]')
    page.wait_for_function("() => document.getElementById('chart-fwd').layout.yaxis.title.text.includes('latency')")
    assert all(b["tabindex"] == "-1" for bar in modebar_buttons(page) for b in bar["buttons"])

    # Tab through the whole page: focus never lands in a mode bar, and reaches our own CSV button.
    page.evaluate("document.activeElement && document.activeElement.blur()")
    seen, first, reached_csv = 0, None, False
    for _ in range(400):
        page.keyboard.press("Tab")
        info = page.evaluate(
            """() => { const a = document.activeElement;
                 return {key: a ? (a.id || a.outerHTML.slice(0, 80)) : '', inModebar: !!(a && a.closest('.modebar')),
                         csv: a && a.id === 'chart-csv'}; }"""
        )
        assert not info["inModebar"], info
        reached_csv |= bool(info["csv"])
        if first is None:
            first = info["key"]
        elif info["key"] == first:
            break
        seen += 1
    assert seen > 10 and reached_csv


def test_csv_of_the_view_holds_the_plotted_points(make_page, server):
    doc = biggest_committed()
    page = make_page()
    open_run(page, doc["run"]["run_id"])
    page.check('input[name="view"][value="pct"]')
    page.wait_for_function("() => document.getElementById('chart-bwd').layout.yaxis.title.text.includes('%')")
    want = {}
    for panel in ("fwd", "bwd"):
        for t in drawn(page, panel):
            for c, y in zip(t["customdata"] or [], t["y"]):
                want[(panel, c[0], c[3], c[1], c[2])] = y
    assert want
    with page.expect_download() as info:
        page.click("#chart-csv")
    download = info.value
    assert download.suggested_filename.endswith(".csv")
    table = list(csv.DictReader(io.StringIO(open(download.path()).read())))
    assert len(table) == len(want)
    stored = {(r["pass"], r["impl"], r["dtype"], r["M"], r["N"]): r for r in doc["rows"]}
    for line in table:
        key = (line["pass"], line["impl"], line["dtype"], int(line["M"]), int(line["N"]))
        assert line["view"] == "pct"
        assert math.isclose(float(line["value"]), want[key], rel_tol=1e-9), line
        assert math.isclose(float(line["median_us"]), stored[key]["median_us"], rel_tol=1e-9)
        assert math.isclose(float(line["q1_us"]), stored[key]["q1_us"], rel_tol=1e-9)


def boxes_apart(page):
    """Per chart: the mode bar's box and the title's box do not intersect (and both exist)."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.chart')].filter((el) => !el.hidden && el.querySelector('.gtitle'))
             .map((el) => {
               const bar = el.querySelector('.modebar').getBoundingClientRect();
               const title = el.querySelector('.gtitle').getBoundingClientRect();
               const apart = bar.bottom <= title.top || title.bottom <= bar.top || bar.right <= title.left
                 || title.right <= bar.left;
               return {chart: el.id, apart, bar: [bar.left, bar.top, bar.right, bar.bottom],
                       title: [title.left, title.top, title.right, title.bottom], barWidth: bar.width};
             })"""
    )


@pytest.mark.parametrize("width,height", [(390, 844), (1440, 900)])
def test_toolbar_never_covers_a_chart_title(make_page, width, height, shot):
    page = make_page(width=width, height=height)
    open_run(page, biggest_committed()["run"]["run_id"])
    for view in ("GBps", "pct", "latency"):
        page.check(f'input[name="view"][value="{view}"]')
        page.wait_for_timeout(200)
        found = boxes_apart(page)
        assert {f["chart"] for f in found} >= {"chart-fwd", "chart-bwd"}, found
        assert all(f["apart"] and f["barWidth"] > 50 for f in found), (view, found)
    # The CPU-only notice (this test server has no GPU) is said once.
    text = page.locator("body").inner_text()
    assert text.count("CPU only") == 1, text[:600]
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 1
    page.locator("#charts").scroll_into_view_if_needed()
    shot(page.locator("#charts"), f"charts-toolbar-{width}.png")
