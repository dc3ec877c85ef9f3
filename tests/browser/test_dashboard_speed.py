"""Issue 35, speed: the first look's charts come quickly. Absolute times depend on the machine and on what else runs
on it, so the time to the first chart (a fresh browser context: nothing cached) is measured against a reference
page's (the same plotly bundle from the service, one small chart drawn) in the same browser, interleaved, medians of a
few tries. Also what makes it fast, each checked directly: plotly's
basic bundle, compressed, asked for at high priority; every module fetched at once (modulepreload); the first GETs
and the first look's runs preloaded by the HTML, each asked for once; the charts say they are loading instead of
drawing empty axes under "No results yet"."""

import re
import statistics
import time
import urllib.request
from urllib.parse import urlparse

import pytest
from browser_paths import COMMITTED_RESULTS

from app.first_look import first_look_runs


pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]

REFERENCE = "/reference-calibration"  # answered by the browser's route below: plotly and one small chart
REFERENCE_PAGE = (
    "<!doctype html><title>reference</title><div id='c' style='width:600px;height:400px'></div>"
    "<script src='/static/vendor/plotly-basic.min.js'></script>"
    "<script>Plotly.newPlot('c', [{x: [1, 2, 3], y: [2, 1, 3], type: 'scatter'}])"
    ".then(() => { document.title = 'drawn'; });</script>"
)
TRIES = 3
REFERENCE_TRIES = 5
# Measured on the 2-core dev machine: against a blank page (40-130 ms) the ratio ran from 20 to 41 for the same page
# and failed the suite once at a bound of 35; against the reference page: quiet 2.8-3.3 (first chart 2.2-2.4 s,
# reference 0.66-0.86 s), both cores busy with other work 3.5 (3.2 s, 0.92 s). The page before issue 35 (full
# plotly.js, 4.8 MB uncompressed, modules level by level, empty axes drawn first) took 3.0-6.9 s where the reference
# would take under 1: past this bound. After the ★ became one trace and the legend band is computed (2026-12-07): first
# chart 2.1-2.2 s against a reference of 0.75 s (ratio 2.9) in the suite's server.
MAX_RATIO = 6
LOCAL_HOSTS = {"127.0.0.1", "localhost"}

# What the page showed before its first chart: recorded from the first script on (an init script).
WATCH = """(() => {
  window.__seen = {noResults: false, emptyAxes: false};
  const look = () => {
    const line = document.getElementById('chart-sources');
    if (line && line.textContent.includes('No results yet')) window.__seen.noResults = true;
    const fwd = document.getElementById('chart-fwd');
    if (fwd && fwd.querySelector('.main-svg') && !(+fwd.dataset.points > 0) && !(+document.getElementById('chart-bwd').dataset.points > 0))
      window.__seen.emptyAxes = true;
  };
  new MutationObserver(look).observe(document, {subtree: true, childList: true, characterData: true});
})()"""


def fresh_page(browser, guard, width=1440, height=900):
    context = browser.new_context(viewport={"width": width, "height": height})

    def route(r):
        url = r.request.url
        if urlparse(url).path == REFERENCE:
            return r.fulfill(status=200, content_type="text/html", body=REFERENCE_PAGE)
        if url.startswith(("data:", "blob:")) or (urlparse(url).hostname or "") in LOCAL_HOSTS:
            return r.continue_()
        guard.outside_requests.append(url)
        return r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and guard.console_errors.append(m.text))
    page.on("pageerror", lambda e: guard.console_errors.append(f"uncaught: {e}"))
    return context, page


def first_chart_s(browser, guard, server):
    context, page = fresh_page(browser, guard)
    try:
        page.add_init_script(WATCH)
        t0 = time.perf_counter()
        page.goto(server.url + "/", wait_until="commit")
        page.wait_for_function(
            "() => +document.querySelector('#chart-fwd')?.dataset.points"
            " + +document.querySelector('#chart-bwd')?.dataset.points > 0",
            polling=10,
            timeout=60_000,
        )
        elapsed = time.perf_counter() - t0
        seen = page.evaluate("window.__seen")
        resources = page.evaluate(
            "performance.getEntriesByType('resource').map((e) => ({name: e.name, start: e.startTime,"
            " end: e.responseEnd, bytes: e.transferSize, body: e.decodedBodySize}))"
        )
        page.wait_for_function("() => window.dashboardReady === true")
        return elapsed, seen, resources
    finally:
        context.close()


def reference_s(browser, guard, server):
    """A reference page's load in a fresh context: the same plotly bundle fetched from the service and one small chart
    drawn. It slows down with the machine as the dashboard does (a blank page's 40-130 ms did not: the ratio to it
    ran from 20 to 41 for the same page, a flaky bound)."""
    context, page = fresh_page(browser, guard)
    try:
        t0 = time.perf_counter()
        page.goto(server.url + REFERENCE, wait_until="commit")
        page.wait_for_function("() => document.title === 'drawn'", polling=10, timeout=60_000)
        return time.perf_counter() - t0
    finally:
        context.close()


def test_first_charts_come_quickly(browser, server, guard, capsys):
    first_chart_s(browser, guard, server)  # warm the server (its first answers compress and cache)
    references, charts, last = [], [], None
    for i in range(max(TRIES, REFERENCE_TRIES)):
        references.append(reference_s(browser, guard, server))
        if i >= TRIES:
            continue
        elapsed, seen, resources = first_chart_s(browser, guard, server)
        charts.append(elapsed)
        last = (seen, resources)
    reference, chart = statistics.median(references), statistics.median(charts)
    with capsys.disabled():
        print(
            f"\nfirst chart {chart * 1000:.0f} ms (tries {[round(c * 1000) for c in charts]}), reference page "
            f"{reference * 1000:.0f} ms ({[round(b * 1000) for b in references]}), ratio {chart / reference:.2f}"
        )
    guard.check()
    seen, resources = last
    # Never "No results yet" over empty axes while the first run loads.
    assert seen == {"noResults": False, "emptyAxes": False}, seen
    # plotly.js: the basic bundle, sent compressed.
    plotly = [r for r in resources if "plotly" in r["name"]]
    assert len(plotly) == 1 and "plotly-basic" in plotly[0]["name"], plotly
    assert plotly[0]["bytes"] < 600_000 < plotly[0]["body"], plotly
    # Every module asked for at once: none waits for another to arrive first.
    modules = [r for r in resources if "/static/js/" in r["name"]]
    assert len(modules) > 20
    first_done = min(r["end"] for r in modules)
    late = [r["name"].rsplit("/static/js/", 1)[1] for r in modules if r["start"] > first_done]
    assert not late, f"modules requested only after another arrived: {late}"
    # The page's first GETs asked for by the HTML (preload), before any module has arrived, each once: the page's
    # own fetch takes the preloaded answer instead of asking again.
    # So are the first look's runs, which the service chose (app/first_look.py) and named in the page.
    first_look = [f"/api/runs/{r['run_id']}" for r in first_look_runs(server.get("/api/runs"))]
    assert first_look
    for path in ("/api/health", "/api/implementations", "/api/presets", "/api/runs", *first_look):
        hits = [r for r in resources if urlparse(r["name"]).path == path]
        assert len(hits) == 1 and hits[0]["start"] < first_done, (path, hits, first_done)
    # plotly.js asked for at high priority (an async script's default is low: it arrived after the modules).
    html = urllib.request.urlopen(server.url + "/").read().decode()
    assert re.search(r'<script id="plotly-js"[^>]* async fetchpriority="high">', html), html[:2000]
    assert chart / reference < MAX_RATIO, (
        f"first chart {chart:.2f} s is {chart / reference:.1f}x the reference page's {reference:.2f} s"
    )
