"""Shareable views (issue 17): the URL keeps the runs, view, dtype, M, baseline and table run, and opening it
restores them; the dock's dockM/dockN are kept; Start and the progress bar stay in view at 1440×900; the
run-vs-run view warns when the two runs were timed differently and plots the API's ratios; a live run is drawn
over the stored run that was open, every M shown."""

import json
import math
from urllib.parse import parse_qs, urlparse

import pytest
from browser_paths import COMMITTED_RESULTS
from app.first_look import first_look_runs
from history_helpers import click_and_wait

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]


def committed():
    docs = [json.loads(p.read_text()) for p in COMMITTED_RESULTS]
    timing = lambda d: d["run"]["sweep"].get("timing", "events")  # noqa: E731
    graph = next(d for d in docs if timing(d) == "cuda-graph")
    # An events-timed run with the same shapes as the graph-timed one, and another events run sharing some.
    same = next(
        d for d in docs if timing(d) == "events" and {r["M"] for r in d["rows"]} == {r["M"] for r in graph["rows"]}
    )
    other = max((d for d in docs if timing(d) == "events" and d is not same), key=lambda d: len(d["rows"]))
    return graph, same, other


def query(page):
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def alt_points(page, panel):
    return page.evaluate(
        """(panel) => document.getElementById('chart-alt-' + panel).data.filter((t) => t.customdata)
             .flatMap((t) => t.customdata.map((c, i) => ({impl: c[0], key: c[1], N: c[2], y: t.y[i]})))""",
        panel,
    )


def visible_in_viewport(page, selector):
    return page.evaluate(
        """(sel) => {
          const el = document.querySelector(sel);
          const b = el.getBoundingClientRect();
          const inside = b.top >= 0 && b.bottom <= window.innerHeight && b.left >= 0 && b.right <= window.innerWidth && b.height > 0;
          const hit = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2);
          return inside && (hit === el || el.contains(hit));
        }""",
        selector,
    )


def test_url_round_trip_restores_runs_view_filters_and_baseline(make_page, server, shot):
    graph, same, _ = committed()
    a, b = same["run"]["run_id"], graph["run"]["run_id"]
    page = make_page()
    click_and_wait(page, a)  # the open of a finished before b is laid over it (else a late open of a clears b)
    click_and_wait(page, b, "overlay")
    ms = sorted({r["M"] for r in same["rows"]})
    page.check('input[name="view"][value="speedup"]')
    page.select_option("#chart-dtype", "bfloat16")
    page.select_option("#chart-m", str(ms[0]))
    page.select_option("#baseline", "eager")
    page.select_option("#table-run", b)
    page.wait_for_function(
        "() => new URLSearchParams(location.search).get('baseline') === 'eager'"
        " && new URLSearchParams(location.search).get('table')"
    )
    q = query(page)
    assert q["runs"].split(",") == [a, b]
    assert (q["view"], q["dtype"], q["M"], q["baseline"], q["table"]) == ("speedup", "bfloat16", str(ms[0]), "eager", b)
    url = urlparse(page.url)

    again = make_page(path=f"{url.path}?{url.query}")
    assert again.locator('input[name="view"][value="speedup"]').is_checked()
    assert again.input_value("#chart-dtype") == "bfloat16" and again.input_value("#chart-m") == str(ms[0])
    assert again.input_value("#baseline") == "eager" and again.input_value("#table-run") == b
    for run_id in (a, b):
        assert again.locator(f'#history-table tbody tr[data-run-id="{run_id}"].shown').count() == 1
    assert again.locator("#alt-panels").is_visible() and not again.locator("#metric-panels").is_visible()
    again.wait_for_function("() => +document.querySelector('#chart-alt-bwd').dataset.points > 0")
    # The speedup drawn is the stored GB/s ratio over eager, for both runs.
    for panel in ("fwd", "bwd"):
        points = alt_points(again, panel)
        want = {}
        for d in (same, graph):
            ok = [r for r in d["rows"] if r["status"] == "ok" and r["pass"] == panel and r["M"] == ms[0]]
            base = {r["N"]: r["GBps"] for r in ok if r["impl"] == "eager"}
            for r in ok:
                if r["N"] in base:
                    want.setdefault((r["impl"], r["N"]), []).append(r["GBps"] / base[r["N"]])
        assert len(points) == sum(len(v) for v in want.values())
        for p in points:
            assert any(math.isclose(p["y"], w, rel_tol=1e-6) for w in want[(p["impl"], p["N"])]), p
    assert "eager" in again.evaluate("() => document.getElementById('chart-alt-fwd').layout.title.text")
    shot(again, "speedup-view.png", full_page=False)

    # A metric view and the dock's parameters round-trip too (the dock's own values are kept as they are).
    third = make_page(path=f"/?runs={a}&view=pct&M={ms[-1]}&dockM=4096&dockN=2048")
    assert third.locator('input[name="view"][value="pct"]').is_checked()
    assert third.input_value("#chart-m") == str(ms[-1])
    assert "% of" in third.evaluate("() => document.getElementById('chart-fwd').layout.title.text")
    third.check('input[name="view"][value="latency"]')
    third.wait_for_function("() => new URLSearchParams(location.search).get('view') === 'latency'")
    q = query(third)
    assert "dockM" in q and "dockN" in q and q["runs"] == a


def test_start_and_progress_stay_in_view_at_1440x900(make_page, shot):
    page = make_page(width=1440, height=900)
    assert page.evaluate("window.scrollY") == 0
    for sel in ("#start", "#run-progress", "#progress-text"):
        assert visible_in_viewport(page, sel), f"{sel} is not in view at 1440x900 without scrolling"
    shot(page, "first-look-1440.png", full_page=False)
    # Scrolled down to the per-shape table, Start is still there.
    page.evaluate("document.querySelector('#shape-section').scrollIntoView()")
    page.wait_for_function("() => window.scrollY > 300")
    for sel in ("#start", "#run-progress"):
        assert visible_in_viewport(page, sel), f"{sel} scrolled out of view"


def test_diff_view_warns_on_mixed_timing_and_plots_the_api_ratios(make_page, server, shot):
    graph, same, other = committed()
    base, new = same["run"]["run_id"], graph["run"]["run_id"]
    page = make_page(path=f"/?view=diff&base={base}&new={new}")
    warning = page.locator("#diff-warning")
    warning.wait_for(state="visible")
    assert "events" in warning.inner_text() and "cuda-graph" in warning.inner_text()
    page.wait_for_function("() => +document.querySelector('#chart-alt-bwd').dataset.points > 0")
    api = server.get(f"/api/compare?base={base}&new={new}&allow_mixed_timing=true")
    ratios = {(r["key"], r["impl"]): r["ratio"] for r in api["rows"]}
    drawn = alt_points(page, "fwd") + alt_points(page, "bwd")
    assert drawn
    for p in drawn:
        assert math.isclose(p["y"], (ratios[(p["key"], p["impl"])] - 1) * 100, rel_tol=1e-9, abs_tol=1e-9), p
    shot(page, "diff-mixed.png")

    # Two runs of one timing mode: no warning.
    page.select_option("#diff-new", other["run"]["run_id"])
    page.wait_for_function("() => document.querySelector('#diff-warning').hidden")
    page.wait_for_function("(id) => new URLSearchParams(location.search).get('new') === id", arg=other["run"]["run_id"])
    # The charts and the table now show the two runs compared, the new one first.
    page.wait_for_function(
        "(ids) => new URLSearchParams(location.search).get('runs') === ids.join(',')",
        arg=[other["run"]["run_id"], base],
    )
    assert page.locator("#table-run option").evaluate_all("(os) => os.map((o) => o.value)") == [
        other["run"]["run_id"],
        base,
    ]
    assert page.locator("#diff-base").input_value() == base
    api = server.get(f"/api/compare?base={base}&new={other['run']['run_id']}")
    assert api["rows"], "the two events runs should share shapes"
    page.wait_for_function("() => +document.querySelector('#chart-alt-fwd').dataset.points > 0")
    ratios = {(r["key"], r["impl"]): r["ratio"] for r in api["rows"]}
    for p in alt_points(page, "fwd"):
        assert math.isclose(p["y"], (ratios[(p["key"], p["impl"])] - 1) * 100, rel_tol=1e-9, abs_tol=1e-9), p


def test_a_live_run_is_drawn_over_the_open_stored_run(make_page, server):
    sweep = {
        "implementations": ["eager", "torch-native"],
        "M": [64, 128],
        "N": [128, 256],
        "repetitions": 3,
        "dtypes": ["bfloat16"],
    }
    stored = server.post("/benchmark?stream=false", sweep)
    stored_id = stored["run"]["run_id"]
    page = make_page(path=f"/?runs={stored_id}")
    assert page.input_value("#table-run") == stored_id
    for box in page.locator('#impl-list input[name="impl"]:enabled').all():
        box.set_checked(box.get_attribute("value") in sweep["implementations"])
    for box in page.locator('#sweep-form input[name="dtype"]').all():
        box.set_checked(box.get_attribute("value") == "bfloat16")
    page.fill("#m-list", "64, 128")
    page.fill("#n-list", "128, 256")
    page.fill("#reps", "3")
    page.click("#start")
    page.wait_for_function(
        "() => document.querySelector('#start').disabled === false"
        " && document.querySelector('#run-status').textContent.startsWith('Done')",
        timeout=180_000,
    )
    assert page.input_value("#chart-m") == "all"  # every M of the live run
    srcs = page.evaluate(
        "() => document.getElementById('chart-bwd').data.filter((t) => t.customdata)"
        ".flatMap((t) => t.customdata.map((c) => c[9] + '|' + c[1]))"
    )
    labels = {s.split("|")[0] for s in srcs}
    assert (
        len(labels) == 2
        and any(lb.startswith("baseline") for lb in labels)
        and any(lb.startswith("live") for lb in labels)
    )
    assert {int(s.split("|")[1]) for s in srcs} == {64, 128}
    ok = sum(1 for r in stored["rows"] if r["status"] == "ok" and r["pass"] == "bwd")
    assert len(srcs) == 2 * ok  # the baseline's bwd points and as many live ones
    # The table shows the live run, its ★ the stored summary's best; the URL names both runs.
    assert "live" in page.locator("#table-run option:checked").inner_text()
    live_id = page.input_value("#table-run")
    summary = server.get(f"/api/runs/{live_id}")["summary"]
    starred = page.evaluate(
        "() => Object.fromEntries([...document.querySelectorAll('#shape-table tbody tr.best')].map((tr) => [tr.dataset.key, tr.dataset.impl]))"
    )
    assert starred == {k: b["impl"] for k, b in summary["best"].items()} and len(starred) == 8
    page.wait_for_function(
        "(id) => (new URLSearchParams(location.search).get('runs') || '').split(',').length === 2"
        " && location.search.includes(id)",
        arg=stored_id,
    )


def test_a_bad_url_falls_back_to_the_first_look(make_page, server, guard):
    """Unknown run ids and values in the URL are ignored: the page opens the first-look run, says what it could
    not open, and never throws."""
    guard.expect_http_error(404)
    newest = first_look_runs(server.get("/api/runs"))[0]
    page = make_page(path="/?runs=no-such-run-1&view=bogus&dtype=int3&M=abc&baseline=nobody&sort=GBps.sideways")
    page.wait_for_function(
        "(id) => document.querySelector(`#history-table tbody tr[data-run-id='${id}'].shown`)", arg=newest["run_id"]
    )
    assert page.locator('input[name="view"][value="GBps"]').is_checked()
    assert page.input_value("#chart-dtype") != "int3" and page.input_value("#chart-m") != "abc"
    assert page.input_value("#baseline") != "nobody"
    q = query(page)
    assert q.get("runs") == ",".join(r["run_id"] for r in first_look_runs(server.get("/api/runs")))
    assert q.get("baseline") is None
    assert int(page.evaluate("document.querySelectorAll('#shape-table tbody tr').length")) > 0
