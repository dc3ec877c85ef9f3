"""How the charts encode things: a log-y toggle (latency), IQR error bars from the stored q1/q3, a palette whose
every implementation colour has at least 3:1 contrast against the page in light and in dark mode (computed here
from the colours plotly actually drew, against the backgrounds the page actually has), and one marker shape per
implementation whatever the dtype."""

import math

import pytest
from browser_paths import COMMITTED_RESULTS
from chart_helpers import biggest_committed, contrast, drawn, layout, open_run, set_filters, stars

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]


def measured(page, panel):
    return [t for t in drawn(page, panel) if (t["meta"] or {}).get("kind") == "measured"]


def test_log_y_toggle_and_iqr_error_bars(make_page, server):
    doc = biggest_committed()
    rows = {
        (r["pass"], r["impl"], r["dtype"], r["M"], r["N"]): r
        for r in server.get(f"/api/runs/{doc['run']['run_id']}")["rows"]
    }
    page = make_page()
    open_run(page, doc["run"]["run_id"])
    page.check('input[name="view"][value="latency"]')
    page.wait_for_function("() => document.getElementById('chart-bwd').layout.yaxis.title.text.includes('latency')")
    assert {layout(page, p)["yaxis"]["type"] for p in ("fwd", "bwd")} == {"linear"}

    # IQR error bars: the upper arm reaches q3, the lower q1 (not max / min); min–max only in the hover.
    checked = 0
    for panel in ("fwd", "bwd"):
        for t in measured(page, panel):
            for i, c in enumerate(t["customdata"]):
                r = rows[(panel, c[0], c[3], c[1], c[2])]
                assert math.isclose(t["y"][i], r["median_us"], rel_tol=1e-9)
                assert math.isclose(t["error_y"]["array"][i], r["q3_us"] - r["median_us"], rel_tol=1e-6, abs_tol=1e-9)
                assert math.isclose(
                    t["error_y"]["arrayminus"][i], r["median_us"] - r["q1_us"], rel_tol=1e-6, abs_tol=1e-9
                )
                assert not math.isclose(t["error_y"]["array"][i], r["max_us"] - r["median_us"], rel_tol=1e-3)
                checked += 1
    assert checked > 20

    page.check("#chart-logy")
    page.wait_for_function(
        "() => ['fwd', 'bwd'].every((p) => document.getElementById('chart-' + p).layout.yaxis.type === 'log')"
    )
    for panel in ("fwd", "bwd"):
        lay = layout(page, panel)
        assert "(log y)" in lay["title"]
        # The ★ of each shape sits on its point on the log axis too.
        best = stars(page, panel)
        assert best
        points = {(t["meta"]["impl"], x): y for t in measured(page, panel) for x, y in zip(t["x"], t["y"])}
        for b in best:
            assert b["text"] == "★" and b["x"] == b["N"]
            assert math.isclose(b["y"], points[(b["impl"], b["N"])], rel_tol=1e-9)
    page.uncheck("#chart-logy")
    page.wait_for_function("() => document.getElementById('chart-fwd').layout.yaxis.type === 'linear'")


def page_backgrounds(page):
    """The colours behind the charts: the plot area (plotly's layout), the card, the page."""
    return page.evaluate(
        """() => ({plot: document.getElementById('chart-fwd').layout.plot_bgcolor,
                  card: getComputedStyle(document.getElementById('charts')).backgroundColor,
                  page: getComputedStyle(document.body).backgroundColor || getComputedStyle(document.documentElement).backgroundColor,
                  root: getComputedStyle(document.documentElement).backgroundColor})"""
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_palette_contrast_and_one_shape_per_implementation(make_page, scheme, shot):
    doc = biggest_committed()
    page = make_page()
    page.emulate_media(color_scheme=scheme)
    open_run(page, doc["run"]["run_id"])
    set_filters(page)  # every dtype and M: several traces per implementation
    page.wait_for_function(
        "(dark) => (document.getElementById('chart-fwd').layout.plot_bgcolor.toLowerCase() !== '#ffffff') === dark",
        arg=scheme == "dark",
    )
    bg = page_backgrounds(page)
    backgrounds = [c for c in (bg["plot"], bg["card"], bg["root"]) if c and "rgba(0, 0, 0, 0)" not in c]
    assert len(backgrounds) >= 2, bg
    colours, symbols = {}, {}
    for panel in ("fwd", "bwd"):
        for t in measured(page, panel):
            impl = t["meta"]["impl"]
            colours.setdefault(impl, set()).add(t["marker"]["color"].lower())
            symbols.setdefault(impl, set()).add(t["marker"]["symbol"])
    impls = {r["impl"] for r in doc["rows"] if r["status"] == "ok"}
    assert set(colours) == impls
    for impl, cs in colours.items():
        assert len(cs) == 1, (impl, cs)  # one colour per implementation, whatever dtype / M / pass
        for b in backgrounds:
            ratio = contrast(next(iter(cs)), b)
            assert ratio >= 3.0, f"{impl}: {next(iter(cs))} on {b} is {ratio:.2f}:1 ({scheme})"
    assert len({next(iter(c)) for c in colours.values()}) == len(colours), colours  # no two alike
    # One shape per implementation (not per dtype), and no two implementations share one.
    assert all(len(s) == 1 for s in symbols.values()), symbols
    assert len({next(iter(s)) for s in symbols.values()}) == len(symbols), symbols
    if scheme == "dark":
        ink = page.evaluate("getComputedStyle(document.body).color")
        assert contrast(ink, bg["plot"]) >= 4.5  # the text follows the dark scheme too
        page.locator("#charts").scroll_into_view_if_needed()
        shot(page.locator("#charts"), "charts-dark.png")
