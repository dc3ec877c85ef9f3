"""A live sweep from the browser: the NDJSON stream is read as it arrives, the charts get traces while the
run is still going and grow until the summary, every plotted value is the stored measurement, Cancel stops
the run, and a second sweep waits with its queue position shown."""

import math

import pytest
from browser_paths import COMMITTED_RESULTS

pytestmark = [pytest.mark.browser, pytest.mark.server]

LIVE_IMPLS = ["eager", "torch-native", "torch-chunked"]  # two built-in baselines and the example plugin


def fill_sweep(page, impls, M="64", N="128, 256, 512, 1024", reps="3", passes=("fwd", "bwd"), dtypes=("bfloat16",)):
    for box in page.locator('#impl-list input[name="impl"]:enabled').all():
        box.set_checked(box.get_attribute("value") in impls)
    for box in page.locator('#sweep-form input[name="pass"]').all():
        box.set_checked(box.get_attribute("value") in passes)
    for box in page.locator('#sweep-form input[name="dtype"]').all():
        box.set_checked(box.get_attribute("value") in dtypes)
    page.fill("#m-list", M)
    page.fill("#n-list", N)
    page.fill("#reps", reps)


def points(page, panel):
    return int(page.locator(f"#chart-{panel}").get_attribute("data-points") or 0)


def plotted(page, panel):
    """{(impl, N): (GB/s, % of ceiling, µs)} as drawn, from each point's customdata."""
    return page.evaluate(
        """(panel) => {
          const out = [];
          for (const t of document.getElementById('chart-' + panel).data) {
            if (!t.customdata) continue;
            t.customdata.forEach((c, i) => out.push({impl: c[0], M: c[1], N: c[2], dtype: c[3], y: t.y[i], name: t.name}));
          }
          return out;
        }""",
        panel,
    )


def wait_done(page, timeout=180_000):
    page.wait_for_function(
        "() => document.querySelector('#start') && !document.querySelector('#start').disabled", timeout=timeout
    )


def test_live_sweep_fills_the_charts_as_rows_stream(make_page, server, shot):
    page = make_page()
    # triton-atomic has no forward pass (and on CPU runs only under the interpreter, not asked for
    # here): its cases come back skipped, with the reason shown in the table.
    fill_sweep(page, LIVE_IMPLS + ["triton-atomic"])
    planned = (len(LIVE_IMPLS) + 1) * 2 * 1 * 1 * 4
    assert page.locator("#plan-line").inner_text().endswith(f"= {planned} cases")
    page.click("#start")
    assert page.locator("#cancel").is_enabled()

    # Traces appear while the stream is still running (fewer rows received than planned) ...
    mid = page.wait_for_function(
        """(planned) => {
          // The live run's points only (the page opens with the newest stored GPU run drawn: issue 17).
          const live = (id) => (document.getElementById(id).data || []).filter((t) => t.customdata)
            .reduce((k, t) => k + t.customdata.filter((c) => String(c[9]).startsWith('live')).length, 0);
          const n = live('chart-fwd') + live('chart-bwd');
          const got = +document.querySelector('#run-progress').value;
          return n > 0 && got < planned ? n : false;
        }""",
        arg=planned,
        timeout=120_000,
    ).json_value()
    assert 0 < mid < planned
    shot(page, "sweep-streaming.png")

    # ... and grow until the summary.
    wait_done(page)
    status = page.locator("#run-status").inner_text()
    assert status.startswith("Done:"), status
    assert page.locator("#progress-text").inner_text() == f"{planned} / {planned} rows"
    assert page.locator("#rows-table tbody tr").count() == planned
    final = points(page, "fwd") + points(page, "bwd")
    ok_rows = page.locator("#rows-table tbody tr.status-ok").count()
    assert final == ok_rows > mid
    skipped = page.locator("#rows-table tbody tr.status-skipped")
    assert skipped.count() == 8
    assert "skipped: triton-atomic does not provide the fwd pass" in skipped.first.inner_text()
    assert "8 skipped" in status
    # The chart filters offer the values that streamed in, and show them.
    assert page.locator("#chart-dtype option").evaluate_all("(os) => os.map((o) => o.value)") == ["all", "bfloat16"]
    assert page.locator("#chart-m option").evaluate_all("(os) => os.map((o) => o.value)") == ["all", "64"]
    # A live run shows every M it measures (issue 17), at the dtype of its first rows.
    assert (page.input_value("#chart-dtype"), page.input_value("#chart-m")) == ("bfloat16", "all")

    # The plugin is in the chart, and every plotted value is the stored measurement of that case.
    runs = server.get("/api/runs")
    live = [r for r in runs if r["source"] == "live" and r["rows"] == planned]
    assert live, runs
    doc = server.get(f"/api/runs/{live[0]['run_id']}")
    stored = {(r["impl"], r["pass"], r["N"]): r for r in doc["rows"] if r["status"] == "ok"}
    for view, field in (("GBps", "GBps"), ("pct", "pct_of_ceiling"), ("latency", "median_us")):
        page.check(f'input[name="view"][value="{view}"]')
        for panel in ("fwd", "bwd"):
            drawn = plotted(page, panel)
            assert {p["impl"] for p in drawn} == {impl for impl, pass_, _ in stored if pass_ == panel}
            assert "torch-chunked" in {p["impl"] for p in drawn}
            for p in drawn:
                want = stored[(p["impl"], panel, p["N"])][field]
                assert math.isclose(p["y"], want, rel_tol=1e-9), (view, panel, p, want)
    page.check('input[name="view"][value="GBps"]')

    # Hovering a point names the case and its timing spread.
    # (asked until it shows: plotly throttles hovers to one per 50 ms, and the view just changed)
    page.wait_for_function(
        """() => {
          const gd = document.getElementById('chart-bwd');
          const i = gd.data.findIndex((t) => t.customdata && t.customdata[0][0] === 'torch-chunked');
          window.Plotly.Fx.hover(gd, [{curveNumber: i, pointNumber: 0}]);
          return document.querySelector('#chart-bwd .hoverlayer').textContent.includes('torch-chunked');
        }""",
        polling=100,
        timeout=10_000,
    )
    hover = page.evaluate("() => document.querySelector('#chart-bwd .hoverlayer').textContent")
    first = min(
        (r for r in stored.values() if r["impl"] == "torch-chunked" and r["pass"] == "bwd"), key=lambda r: r["N"]
    )
    assert "torch-chunked" in hover and f"M={first['M']}" in hover and f"N={first['N']}" in hover, hover
    assert (
        "bfloat16" in hover and f"median {first['median_us']:.2f} µs" in hover and "min" in hover and "max" in hover
    ), hover

    # The measured copy ceiling is drawn as a horizontal line at its value.
    ceiling = page.evaluate(
        "() => document.getElementById('chart-bwd').data.filter((t) => t.name.startsWith('copy ceiling')).map((t) => t.y)"
    )
    assert ceiling and all(math.isclose(y, doc["run"]["ceiling_GBps"], rel_tol=1e-9) for y in ceiling[0])
    # A log-2 x axis: log type, ticks at powers of two.
    ticks = page.evaluate("() => document.getElementById('chart-bwd').layout.xaxis.tickvals")
    assert page.evaluate("() => document.getElementById('chart-bwd').layout.xaxis.type") == "log"
    assert all(math.log2(t).is_integer() for t in ticks)
    page.locator("#charts").scroll_into_view_if_needed()
    shot(page, "sweep-done.png")
    page.evaluate("window.scrollTo(0, 0)")
    # The README's picture shows the committed GPU results when there are some (test_dashboard_history).
    shot(page, "dashboard.png", doc_name=None if COMMITTED_RESULTS else "dashboard.png", full_page=False)


def test_cancel_stops_the_run_and_history_keeps_it_incomplete(make_page, server):
    page = make_page()
    fill_sweep(page, ["eager", "torch-chunked"], M="64, 128", N="128, 256, 512, 1024, 2048", reps="20")
    page.click("#start")
    page.wait_for_function("() => +document.querySelector('#run-progress').value >= 1", timeout=120_000)
    page.click("#cancel")
    wait_done(page)
    assert page.locator("#run-status").inner_text().startswith("Cancelled after")
    planned = 2 * 2 * 2 * 5
    assert int(page.locator("#run-progress").get_attribute("value") or 0) < planned
    # The service keeps the partial run, marked incomplete.
    for _ in range(40):
        page.click("#history-refresh")
        row = page.locator("#history-table tbody tr", has_text="incomplete")
        if row.count():
            break
        page.wait_for_timeout(250)
    assert page.locator("#history-table tbody tr", has_text="incomplete").count() >= 1


def test_second_sweep_shows_its_queue_position(make_page, server):
    first = make_page()
    fill_sweep(first, ["eager"], M="64, 128", N="128, 256, 512, 1024, 2048", reps="30")
    first.click("#start")
    first.wait_for_function("() => +document.querySelector('#run-progress').value >= 1", timeout=120_000)

    second = make_page()
    fill_sweep(second, ["torch-chunked"], M="64", N="128", reps="3")
    second.click("#start")
    second.wait_for_function(
        "() => document.querySelector('#run-status').textContent.includes('Waiting in the queue')", timeout=30_000
    )
    assert "position 1" in second.locator("#run-status").inner_text()
    first.click("#cancel")
    wait_done(second)
    assert second.locator("#run-status").inner_text().startswith("Done:")
    wait_done(first)
