"""The chart filters: the committed H200 run (9 implementations × fwd/bwd × 2 dtypes × 3 M × 6 N) opens with one
trace per implementation and pass (plus the copy-ceiling line) at the first dtype and its fullest M; switching
the M filter plots that M's stored rows; "all" plots every measured row; the legend never covers the x-axis
title, on a wide and on a 390 px screen."""

import copy
import math
import uuid

import pytest
from browser_paths import COMMITTED_RESULTS
from chart_helpers import biggest_committed, default_m
from history_helpers import click_and_wait

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]


def ok_rows(rows):
    return [r for r in rows if r["status"] == "ok" and r["median_us"] is not None and math.isfinite(r["median_us"])]


def traces(page, panel):
    """Every trace drawn in a panel: its name, and each point's case (from customdata) and y."""
    return page.evaluate(
        """(panel) => document.getElementById('chart-' + panel).data.map((t) => ({
             name: t.name, kind: (t.meta || {}).kind || null,
             points: (t.customdata || []).map((c, i) => ({impl: c[0], M: c[1], N: c[2], dtype: c[3], y: t.y[i]})),
           }))""",
        panel,
    )


def open_run(page, run_id):
    click_and_wait(page, run_id)
    page.wait_for_function(
        "(id) => document.querySelector(`#history-table tbody tr[data-run-id='${id}'].shown`)"
        " && +document.querySelector('#chart-fwd').dataset.points > 0",
        arg=run_id,
    )


def wait_filter(page, dtype, m):
    page.wait_for_function(
        "([d, m]) => document.querySelector('#chart-dtype').value === d && document.querySelector('#chart-m').value === m",
        arg=[dtype, str(m)],
    )


def check_panels(page, rows, dtype, m):
    """Each panel: one trace per implementation with ok rows for that pass at (dtype, M), plus the ceiling line,
    and every plotted value is the stored GB/s of its case."""
    want_points = 0
    for panel in ("fwd", "bwd"):
        at = [r for r in rows if r["pass"] == panel and r["dtype"] == dtype and r["M"] == m]
        stored = {(r["impl"], r["N"]): r["GBps"] for r in at}
        impls = {r["impl"] for r in at}
        assert impls, (panel, dtype, m)
        every = traces(page, panel)
        assert [t["kind"] for t in every].count("stars") == 1  # the ★ of each shape: one text trace
        drawn = [t for t in every if t["kind"] != "stars"]
        measured = [t for t in drawn if t["points"]]
        ceilings = [t for t in drawn if t["name"].startswith("copy ceiling")]
        assert len(ceilings) == 1 and len(drawn) == len(measured) + 1, [t["name"] for t in drawn]
        trace_impls = [t["points"][0]["impl"] for t in measured]
        assert sorted(trace_impls) == sorted(impls), (panel, trace_impls, impls)  # one trace each, none missing
        assert {t["name"] for t in measured} == impls  # a single dtype and M: the name is the implementation
        points = [p for t in measured for p in t["points"]]
        assert len(points) == len(stored)
        for p in points:
            assert (p["dtype"], p["M"]) == (dtype, m), p
            assert math.isclose(p["y"], stored[(p["impl"], p["N"])], rel_tol=1e-9), p
        assert int(page.locator(f"#chart-{panel}").get_attribute("data-traces")) == len(impls)
        want_points += len(points)
    return want_points


def legend_clear_of_axis_title(page):
    """Per panel: the legend's box and the x-axis title's box do not intersect, and the legend is inside the figure."""
    return page.evaluate(
        """() => ['fwd', 'bwd'].map((panel) => {
             const el = document.getElementById('chart-' + panel);
             const legend = el.querySelector('.legend').getBoundingClientRect();
             const title = el.querySelector('.g-xtitle').getBoundingClientRect();
             const svg = el.querySelector('.main-svg').getBoundingClientRect();
             const apart = legend.top >= title.bottom || legend.bottom <= title.top
               || legend.left >= title.right || legend.right <= title.left;
             const inside = legend.top >= svg.top && legend.bottom <= svg.bottom + 0.5
               && legend.left >= svg.left - 0.5 && legend.right <= svg.right + 0.5;
             return {panel, apart, inside, legendHeight: legend.height};
           })"""
    )


def test_committed_run_plots_one_trace_per_implementation_and_the_m_filter_switches(make_page, server, shot):
    doc = biggest_committed()
    run_id = doc["run"]["run_id"]
    stored = server.get(f"/api/runs/{run_id}")["rows"]
    rows = ok_rows(stored)
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    ms = sorted({r["M"] for r in rows})
    assert len(dtypes) > 1 and len(ms) > 1, "the committed sweep should vary dtype and M"
    first_m = default_m(stored, dtypes[0])
    other_m = ms[0] if first_m != ms[0] else ms[-1]

    page = make_page()
    open_run(page, run_id)
    # Defaults: the first dtype, the M with the most points; the options are the values present, plus "all".
    wait_filter(page, dtypes[0], first_m)
    assert page.locator("#chart-dtype option").evaluate_all("(os) => os.map((o) => o.value)") == ["all", *dtypes]
    assert page.locator("#chart-m option").evaluate_all("(os) => os.map((o) => o.value)") == ["all", *map(str, ms)]
    default_points = check_panels(page, rows, dtypes[0], first_m)
    before = {p["y"] for t in traces(page, "bwd") for p in t["points"]}

    # The M filter, reached and changed from the keyboard-focusable select: that M's stored rows are plotted.
    page.focus("#chart-m")
    page.select_option("#chart-m", str(other_m))
    wait_filter(page, dtypes[0], other_m)
    page.wait_for_function(
        "(m) => document.getElementById('chart-bwd').data.every((t) => !t.customdata || t.customdata.every((c) => c[1] === m))",
        arg=other_m,
    )
    check_panels(page, rows, dtypes[0], other_m)
    after = {p["y"] for t in traces(page, "bwd") for p in t["points"]}
    assert before.isdisjoint(after), "switching M must plot other measurements"

    # The other dtype too.
    page.select_option("#chart-dtype", dtypes[1])
    wait_filter(page, dtypes[1], other_m)
    page.wait_for_function(
        "(d) => document.getElementById('chart-fwd').data.every((t) => !t.customdata || t.customdata[0][3] === d)",
        arg=dtypes[1],
    )
    check_panels(page, rows, dtypes[1], other_m)

    # "all" and "all": every measured row, one trace per implementation × dtype × M, named by what varies.
    page.select_option("#chart-dtype", "all")
    page.select_option("#chart-m", "all")
    want = {p: sum(1 for r in rows if r["pass"] == p) for p in ("fwd", "bwd")}
    page.wait_for_function(
        "(want) => +document.querySelector('#chart-fwd').dataset.points === want.fwd"
        " && +document.querySelector('#chart-bwd').dataset.points === want.bwd",
        arg=want,
    )
    assert want["fwd"] + want["bwd"] > default_points
    groups = {(r["impl"], r["dtype"], r["M"]) for r in rows if r["pass"] == "bwd"}
    names = [t["name"] for t in traces(page, "bwd") if t["points"]]
    assert len(names) == len(set(names)) == len(groups)
    assert all("M=" in n and any(d in n for d in dtypes) for n in names), names
    assert all(v["apart"] and v["inside"] for v in legend_clear_of_axis_title(page))

    # Opening the run again starts from the defaults.
    open_run(page, run_id)
    wait_filter(page, dtypes[0], first_m)
    check_panels(page, rows, dtypes[0], first_m)
    assert all(v["apart"] and v["inside"] for v in legend_clear_of_axis_title(page))
    shot(page, "chart-filters.png")


def test_legend_stays_clear_of_the_axis_title_on_a_phone(make_page, server, shot):
    doc = biggest_committed()
    page = make_page(width=390, height=844)
    open_run(page, doc["run"]["run_id"])
    page.wait_for_timeout(300)
    layout = legend_clear_of_axis_title(page)
    assert all(v["apart"] and v["inside"] for v in layout), layout
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 1, f"the page is {overflow}px wider than a 390px screen"
    page.locator("#charts").scroll_into_view_if_needed()
    shot(page.locator("#charts"), "chart-filters-390.png")


def test_a_run_cut_short_opens_at_its_fullest_m(make_page, server):
    """A run whose largest M was measured only in part (the sweep was cut) opens at the M with the most points."""
    doc = copy.deepcopy(biggest_committed())
    ms = sorted({r["M"] for r in ok_rows(doc["rows"])})
    largest = ms[-1]
    run_id = f"cut-{uuid.uuid4().hex[:8]}"
    doc["run"]["run_id"] = run_id
    doc["rows"] = [dict(r, run_id=run_id) for r in doc["rows"] if not (r["M"] == largest and r["pass"] == "bwd")]
    server.post("/api/runs/import", doc)
    stored = server.get(f"/api/runs/{run_id}")["rows"]
    dtype = ok_rows(stored)[0]["dtype"]
    fullest = default_m(stored, dtype)
    assert fullest != largest

    page = make_page()
    page.click("#history-refresh")
    page.wait_for_selector(f'#history-table tbody tr[data-run-id="{run_id}"]')
    open_run(page, run_id)
    wait_filter(page, dtype, fullest)
    check_panels(page, ok_rows(stored), dtype, fullest)
