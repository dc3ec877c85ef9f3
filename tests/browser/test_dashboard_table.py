"""The first look and the per-shape table (issue 17): a first visit opens the first-look run (the newest day's
broadest GPU run, app/first_look.py), the page names and preloads it; the table's ★
is the API summary's `best` for every shape; a `wrong` row (the engine's correctness gate) is marked and never
starred even when it is the fastest; skipped rows are hidden; GB/s and speedups are the stored values; sorting."""

import copy
import json
import math
import random
import uuid

import pytest
from browser_paths import COMMITTED_RESULTS
from history_helpers import click_and_wait

from app.first_look import first_look_runs
from engine.summary import summarize

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]


SPEEDUP = 10  # the speedup column: pass, dtype, M, N, impl, GB/s, %, latency µs, host µs, peak MiB, speedup, status


def sig3(v):
    """The table's numbers: three significant digits, whole numbers from 100 up (shape_table.js sig3)."""
    if v is None:
        return "–"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:#.3g}".rstrip(".")


def first_look(server):
    runs = first_look_runs(server.get("/api/runs"))
    assert runs, "the committed GPU runs should be stored"
    return runs[0]


def set_filters(page, dtype="all", m="all"):
    page.select_option("#chart-dtype", dtype)
    page.select_option("#chart-m", m)
    page.wait_for_function(
        "([d, m]) => document.querySelector('#shape-status').textContent.includes(d === 'all' ? 'every dtype' : d)"
        " && document.querySelector('#shape-status').textContent.includes(m === 'all' ? 'every M' : 'M=' + m)",
        arg=[dtype, m],
    )


def table_lines(page):
    return page.evaluate(
        """() => [...document.querySelectorAll('#shape-table tbody tr')].map((tr) => ({
             key: tr.dataset.key, impl: tr.dataset.impl, best: tr.classList.contains('best'),
             status: tr.className.match(/status-(\\w+)/)[1],
             cells: [...tr.cells].map((td) => td.textContent.trim()),
           }))"""
    )


def open_run(page, run_id):
    click_and_wait(page, run_id)
    page.wait_for_function(
        "(id) => document.querySelector('#table-run').value === id"
        " && document.querySelector(`#history-table tbody tr[data-run-id='${id}'].shown`)",
        arg=run_id,
    )


def check_stars(page, doc):
    """Every starred line is the summary's best of its shape, and every shape of the summary has its star."""
    lines = table_lines(page)
    starred = {ln["key"]: ln["impl"] for ln in lines if ln["best"]}
    assert len(starred) == sum(1 for ln in lines if ln["best"]), "one ★ per shape"
    # A file imported without a summary (test_dashboard_chart_rows imports one) is stored without one: the engine's
    # summary of its rows is the reference then.
    best = (doc.get("summary") or {}).get("best")
    want = {key: b["impl"] for key, b in (best if best is not None else summarize(doc["rows"])["best"]).items()}
    assert starred == want
    assert all(ln["cells"][4].endswith("★") == ln["best"] for ln in lines)
    return lines


def test_first_visit_opens_the_first_look_run(make_page, server):
    newest = first_look(server)
    # The listing's word for what the run measured is its rows' (the rule ranks by it).
    doc = server.get(f"/api/runs/{newest['run_id']}")
    ok = [r for r in doc["rows"] if r["status"] == "ok"]
    assert newest["implementations"] == sorted({r["impl"] for r in ok}) and newest["passes"] == sorted(
        {r["pass"] for r in ok}
    )
    page = make_page()
    page.wait_for_function("() => +document.querySelector('#chart-fwd').dataset.points > 0")
    for run in first_look_runs(server.get("/api/runs")):  # the session's other file is overlaid
        assert page.locator(f'#history-table tbody tr[data-run-id="{run["run_id"]}"].shown').count() == 1
    assert page.input_value("#table-run") == newest["run_id"]
    assert newest["device_name"] in page.locator("#chart-sources").inner_text()
    # What is drawn is that run's stored rows at the default filters.
    drawn = page.evaluate(
        "() => document.getElementById('chart-bwd').data.filter((t) => t.customdata)"
        ".flatMap((t) => t.customdata.map((c, i) => [c[0], c[1], c[2], c[3], t.y[i]]))"
    )
    stored = {
        (r["impl"], r["M"], r["N"], r["dtype"]): r["GBps"]
        for r in doc["rows"]
        if r["pass"] == "bwd" and r["status"] == "ok"
    }
    assert drawn and all(math.isclose(y, stored[(i, m, n, d)], rel_tol=1e-9) for i, m, n, d, y in drawn)


def test_the_first_look_over_the_committed_runs_is_complete_and_of_the_newest_device(server):
    """Over the stored listing: every run the first look opens is complete, of the device of the newest complete GPU
    run or session that measured both passes (a one-pass side run on another card does not switch it), and together
    they measured both passes."""
    runs = server.get("/api/runs")
    chosen = first_look_runs(runs)
    gpu = [r for r in runs if r["kind"] == "cuda" and r["counts"]["ok"] and r["complete"]]

    def session(r):
        return (r["device_name"], r["git_commit"], r["created_at"][:10], json.dumps(r["shapes"], sort_keys=True))

    both = {session(r) for r in gpu if set(r["passes"]) == {"fwd"}} & {
        session(r) for r in gpu if set(r["passes"]) == {"bwd"}
    }
    newest = max(
        (r for r in gpu if set(r["passes"]) == {"fwd", "bwd"} or session(r) in both), key=lambda r: r["created_at"]
    )
    assert chosen and all(r["complete"] and r["device_name"] == newest["device_name"] for r in chosen)
    assert {p for r in chosen for p in r["passes"]} == {"fwd", "bwd"}


def test_table_stars_match_the_api_summary_for_every_shape(make_page, server, shot):
    page = make_page()
    runs = [r for r in server.get("/api/runs") if r["kind"] == "cuda" and r["rows"] > 0]
    for run in runs:
        doc = server.get(f"/api/runs/{run['run_id']}")
        open_run(page, run["run_id"])
        set_filters(page)
        lines = check_stars(page, doc)
        # Skipped rows ("does not provide this pass") are hidden; every other row has its line.
        assert len(lines) == sum(1 for r in doc["rows"] if r["status"] != "skipped")
        assert "skipped" not in {ln["status"] for ln in lines}
    shot(page, "shape-table.png")


def test_values_speedup_baseline_picker_and_sorting(make_page, server):
    doc = max((json.loads(p.read_text()) for p in COMMITTED_RESULTS), key=lambda d: len(d["rows"]))
    run_id = doc["run"]["run_id"]
    page = make_page()
    open_run(page, run_id)
    ok = [r for r in doc["rows"] if r["status"] == "ok"]
    dtype = random.choice(sorted({r["dtype"] for r in ok}))
    m = random.choice(sorted({r["M"] for r in ok}))
    set_filters(page, dtype, str(m))
    assert page.input_value("#baseline") == "torch-native"  # the default baseline
    for baseline in ("torch-native", random.choice(sorted({r["impl"] for r in ok} - {"torch-native"}))):
        page.select_option("#baseline", baseline)
        page.wait_for_function(
            "(b) => document.querySelector('#shape-table thead').textContent.includes('vs ' + b)", arg=baseline
        )
        base = {
            (r["pass"], r["N"]): r["GBps"] for r in ok if r["impl"] == baseline and r["dtype"] == dtype and r["M"] == m
        }
        lines = table_lines(page)
        assert lines and {ln["key"].split("/")[1] for ln in lines} == {dtype}
        by_case = {(r["pass"], r["N"], r["impl"]): r for r in ok if r["dtype"] == dtype and r["M"] == m}
        for ln in lines:
            pass_, _, shape = ln["key"].split("/")
            n = int(shape.split("x")[1])
            row = by_case.get((pass_, n, ln["impl"]))
            if row is None:
                continue  # an error row: no GB/s
            assert ln["cells"][5] == sig3(row["GBps"]) and ln["cells"][6] == sig3(row["pct_of_ceiling"])
            # latency and host time per call, three significant digits (issue 35)
            assert ln["cells"][7] == sig3(row["median_us"]) and ln["cells"][8] == sig3(row.get("host_us"))
            b = base.get((pass_, n))
            assert ln["cells"][SPEEDUP] == ("–" if not b else f"{sig3(row['GBps'] / b)}×"), (ln, b)
        assert any(ln["cells"][SPEEDUP] == "1.00×" for ln in lines if ln["impl"] == baseline)
    # Sorting: GB/s (fastest first), then again (slowest first), then by N ascending.
    page.locator('#shape-table th[data-column="GBps"] button').click()
    gbps = [float(ln["cells"][5]) for ln in table_lines(page) if ln["cells"][5] != "–"]
    assert gbps == sorted(gbps, reverse=True) and len(set(gbps)) > 1
    assert page.get_attribute('#shape-table th[data-column="GBps"]', "aria-sort") == "descending"
    page.locator('#shape-table th[data-column="GBps"] button').click()
    gbps = [float(ln["cells"][5]) for ln in table_lines(page) if ln["cells"][5] != "–"]
    assert gbps == sorted(gbps)
    page.locator('#shape-table th[data-column="N"] button').click()
    ns = [int(ln["cells"][3]) for ln in table_lines(page)]
    assert ns == sorted(ns)


def test_a_wrong_row_is_marked_and_never_starred(make_page, server):
    """A doctored copy of a committed run: the fastest row of some shapes turns `wrong` (fast but off the reference).
    Its summary is the engine's; the table stars what the API's summary says, never the wrong row."""
    src = min((json.loads(p.read_text()) for p in COMMITTED_RESULTS), key=lambda d: len(d["rows"]))
    doc = copy.deepcopy(src)
    run_id = f"wrong-{uuid.uuid4().hex[:8]}"
    doc["run"]["run_id"] = run_id
    for r in doc["rows"]:
        r["run_id"] = run_id
    old_best = summarize(doc["rows"])["best"]
    doomed = random.sample(sorted(old_best), 3)
    for key in doomed:
        row = next(
            r
            for r in doc["rows"]
            if f"{r['pass']}/{r['dtype']}/{r['M']}x{r['N']}" == key
            and r["impl"] == old_best[key]["impl"]
            and r["status"] == "ok"
        )
        row.update(
            status="wrong",
            verified=False,
            max_rel_err=0.01,
            tolerance=0.002,
            reason="max relative error 1.0e-02 above the tolerance 2.0e-03",
        )
    doc["summary"] = {**summarize(doc["rows"]), "run_id": run_id}
    server.post("/api/runs/import", doc)
    api = server.get(f"/api/runs/{run_id}")

    page = make_page()
    page.click("#history-refresh")
    page.locator(f'#history-table tbody tr[data-run-id="{run_id}"]').wait_for()
    open_run(page, run_id)
    set_filters(page)
    lines = check_stars(page, api)
    for key in doomed:
        wrong = [ln for ln in lines if ln["key"] == key and ln["impl"] == old_best[key]["impl"]]
        assert len(wrong) == 1 and wrong[0]["status"] == "wrong" and not wrong[0]["best"]
        assert wrong[0]["cells"][SPEEDUP + 1].startswith("✗ wrong")
        starred = [ln for ln in lines if ln["key"] == key and ln["best"]]
        assert len(starred) == 1 and starred[0]["impl"] != old_best[key]["impl"]
    assert "3 wrong" in page.locator("#shape-status").inner_text()
