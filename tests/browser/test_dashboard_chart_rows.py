"""Rows the charts must tell apart, in a result file imported through the API (a committed H200 file with a few
rows changed at random): a `wrong` row (made the fastest of its shape) is a hollow marker with "wrong" and its
reason in the hover, and never gets the ★; a row whose host time exceeds its GPU time is outlined ("CPU-bound
here", host_us in the hover); profiled rows give a stacked kernel bar per implementation. History lists the file
with its label, commit, versions and its rows counted per status; a user-given label sticks; an overlay that adds
no point under the filters says why."""

import copy
import json
import math
import random
import uuid

import pytest
from browser_paths import COMMITTED_RESULTS
from chart_helpers import biggest_committed, committed_docs, drawn, open_run, set_filters, stars

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]


def small_committed():
    """The smallest committed run with ok rows of both passes (the backward's rows are the ones profiled here)."""
    both = [d for d in committed_docs() if {r["pass"] for r in d["rows"] if r["status"] == "ok"} == {"fwd", "bwd"}]
    return min(both, key=lambda d: len(d["rows"]))


@pytest.fixture(scope="module")
def poisoned(server):
    """A committed run under a new id: one random ok row made `wrong` and the fastest of its shape, host times
    set at random above / below the GPU time, three rows of one backward shape profiled."""
    rng = random.Random()
    doc = copy.deepcopy(small_committed())
    run_id = f"poisoned-{uuid.uuid4().hex[:8]}"
    doc["run"]["run_id"] = run_id
    doc["summary"] = {}
    for r in doc["rows"]:
        r["run_id"] = run_id
        if r["status"] == "ok":
            r["mode"] = "cuda"
            r["host_us"] = r["median_us"] * rng.choice([0.3, 0.6, 1.7, 3.0])
    ok = [r for r in doc["rows"] if r["status"] == "ok"]
    wrong = rng.choice(ok)
    shape = [
        r
        for r in ok
        if (r["pass"], r["dtype"], r["M"], r["N"]) == (wrong["pass"], wrong["dtype"], wrong["M"], wrong["N"])
    ]
    assert len(shape) > 1
    fastest = min(r["median_us"] for r in shape)
    scale = fastest * rng.uniform(0.3, 0.7) / wrong["median_us"]
    for key in ("median_us", "min_us", "max_us", "q1_us", "q3_us"):
        wrong[key] *= scale
    wrong["GBps"] /= scale
    wrong["pct_of_ceiling"] /= scale
    wrong.update(
        status="wrong",
        verified=False,
        reason=f"dx off the fp64 reference: max_rel_err {rng.uniform(0.02, 0.2):.3f} > 0.01",
    )
    bwd = [r for r in ok if r["pass"] == "bwd" and r is not wrong]
    pick = rng.choice(bwd)
    prof_rows = [r for r in bwd if (r["dtype"], r["M"], r["N"]) == (pick["dtype"], pick["M"], pick["N"])][:3]
    for r in prof_rows:
        kernels = [
            {"name": f"{r['impl']}_kernel_{k}_{uuid.uuid4().hex[:4]}", "median_us": rng.uniform(1, 20), "calls": 1}
            for k in range(rng.randint(1, 3))
        ]
        r["profile"] = {
            "source": "cuda",
            "kernels": kernels,
            "kernel_us": sum(k["median_us"] for k in kernels),
            "host_us": rng.uniform(5, 50),
            "gap_us": rng.uniform(0.5, 3),
            "samples": 5,
        }
        # kernels overlapping by up to 40 %; the last row (of two or more) as an older file, without busy_us
        if r is not prof_rows[-1] or len(prof_rows) == 1:
            r["profile"]["busy_us"] = r["profile"]["kernel_us"] * rng.uniform(0.6, 1.0)
    label = f"poisoned-{uuid.uuid4().hex[:6]}.json"
    req = __import__("urllib.request").request
    with req.urlopen(
        req.Request(
            f"{server.url}/api/runs/import?label={label}",
            data=json.dumps(doc).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        ),
        timeout=60,
    ) as res:
        assert json.loads(res.read())["imported"] is True
    return {"doc": doc, "wrong": wrong, "profiled": prof_rows, "label": label}


def test_wrong_row_is_hollow_never_best_and_cpu_bound_rows_are_marked(make_page, poisoned):
    doc, wrong = poisoned["doc"], poisoned["wrong"]
    page = make_page()
    open_run(page, doc["run"]["run_id"])
    set_filters(page)
    page.wait_for_function("(p) => +document.getElementById('chart-' + p).dataset.wrong === 1", arg=wrong["pass"])
    traces = drawn(page, wrong["pass"])
    hollow = [t for t in traces if (t["meta"] or {}).get("kind") == "wrong"]
    assert len(hollow) == 1 and hollow[0]["mode"] == "markers"
    t = hollow[0]
    assert t["marker"]["symbol"].endswith("-open")
    assert [c[0] for c in t["customdata"]] == [wrong["impl"]] and t["x"] == [wrong["N"]]
    assert "wrong" in t["customdata"][0][12] and wrong["reason"].split(":")[0] in t["customdata"][0][12]
    # Its implementation's line goes without it.
    line = [
        x
        for x in traces
        if (x["meta"] or {}).get("kind") == "measured"
        and x["customdata"][0][0] == wrong["impl"]
        and x["customdata"][0][3] == wrong["dtype"]
        and x["customdata"][0][1] == wrong["M"]
    ]
    assert line and wrong["N"] not in line[0]["x"]

    # ★: one per shape, on the fastest ok row, never the wrong one (although it is the fastest).
    for panel in ("fwd", "bwd"):
        best = [(b["impl"], b["dtype"], b["M"], b["N"]) for b in stars(page, panel)]
        ok = [r for r in doc["rows"] if r["pass"] == panel and r["status"] == "ok"]
        shapes = {(r["dtype"], r["M"], r["N"]) for r in ok}
        assert len(best) == len(shapes)
        for impl, dtype, m, n in best:
            at = [r for r in ok if (r["dtype"], r["M"], r["N"]) == (dtype, int(m), int(n))]
            assert impl == min(at, key=lambda r: r["median_us"])["impl"]
            if panel == wrong["pass"] and (dtype, int(m), int(n)) == (wrong["dtype"], wrong["M"], wrong["N"]):
                assert impl != wrong["impl"]

    # CPU-bound: outlined exactly where host_us > median_us, with host_us in the hover.
    rows = {(r["pass"], r["impl"], r["dtype"], r["M"], r["N"]): r for r in doc["rows"]}
    bound = 0
    for panel in ("fwd", "bwd"):
        for x in drawn(page, panel):
            if (x["meta"] or {}).get("kind") != "measured":
                continue
            for i, c in enumerate(x["customdata"]):
                r = rows[(panel, c[0], c[3], c[1], c[2])]
                is_bound = r["host_us"] > r["median_us"]
                assert (x["marker"]["line"]["width"][i] > 0) == is_bound, (c, r["host_us"], r["median_us"])
                assert ("CPU-bound here" in c[12]) == is_bound
                assert f"host {r['host_us']:.1f} µs" in c[12]
                bound += is_bound
    assert bound > 0 and "CPU-bound here" in page.locator("#chart-notes").inner_text()


def test_profiled_rows_give_a_stacked_kernel_bar_per_implementation(make_page, poisoned):
    doc, prof = poisoned["doc"], poisoned["profiled"]
    page = make_page()
    open_run(page, doc["run"]["run_id"])
    set_filters(page)
    page.wait_for_function(
        "() => !document.getElementById('chart-profile').hidden && document.getElementById('chart-profile').data"
    )
    bars = page.evaluate("""() => document.getElementById('chart-profile').data.map((t) => ({
        kind: t.meta && t.meta.kind, impl: t.meta && t.meta.impl, kernel: t.meta && t.meta.kernel, x: t.x, y: t.y}))""")
    want = {(r["impl"], k["name"]): k["median_us"] for r in prof for k in r["profile"]["kernels"]}
    got = {(b["impl"], b["kernel"]): b["y"][0] for b in bars if b["kind"] == "kernel"}
    assert got.keys() == want.keys() and all(math.isclose(got[k], want[k], rel_tol=1e-9) for k in want)
    gaps = {b["impl"]: b["y"][0] for b in bars if b["kind"] == "gap"}
    assert gaps == pytest.approx({r["impl"]: r["profile"]["gap_us"] for r in prof})
    host = [b for b in bars if b["kind"] == "host"][0]
    assert sorted(host["y"]) == pytest.approx(sorted(r["profile"]["host_us"] for r in prof))
    spans = [b for b in bars if b["kind"] == "span"]
    with_busy = [r for r in prof if "busy_us" in r["profile"]]
    assert len(spans) == 1 and sorted(spans[0]["y"]) == pytest.approx(
        sorted(r["profile"]["busy_us"] + r["profile"]["gap_us"] for r in with_busy)
    )
    caption = page.locator("#chart-profile-caption").inner_text()
    assert f"M={prof[0]['M']} N={prof[0]['N']}" in caption and "GPU span" in caption
    assert page.evaluate("document.getElementById('chart-profile').layout.barmode") == "stack"


def test_history_lists_label_commit_versions_and_counts_each_status(make_page, poisoned, server):
    doc = poisoned["doc"]
    page = make_page()
    row = page.locator(f'#history-table tbody tr[data-run-id="{doc["run"]["run_id"]}"]')
    text = row.inner_text()
    assert poisoned["label"] in text and "imported file" in text
    assert doc["run"]["git_commit"][:8] in text
    assert f"torch {doc['run']['versions']['torch']} / triton {doc['run']['versions']['triton']}" in text
    counts = {s: sum(1 for r in doc["rows"] if r["status"] == s) for s in ("ok", "skipped", "error", "wrong")}
    assert counts["skipped"] > 0 and counts["wrong"] == 1
    for status, n in counts.items():
        assert row.locator(f'.counts [data-status="{status}"]').get_attribute("data-count") == str(n)
    # The committed files are listed under their file names, graph timings badged.
    for path in COMMITTED_RESULTS:
        committed = json.loads(path.read_text())
        other = page.locator(f'#history-table tbody tr[data-run-id="{committed["run"]["run_id"]}"]')
        assert path.name in other.locator(".label-text").inner_text()
        for status in ("skipped", "error"):  # (a width scan's QuACK rows are errors at odd widths it cannot compile)
            n = sum(1 for r in committed["rows"] if r["status"] == status)
            assert other.locator(f'.counts [data-status="{status}"]').get_attribute("data-count") == str(n)
    # A label of the user's own, kept in this browser.
    mine = f"my baseline {uuid.uuid4().hex[:4]}"
    row.locator("button.label-edit").click()
    row.locator("input.label-input").fill(mine)
    row.locator("input.label-input").press("Enter")
    assert row.locator(".label-text").inner_text() == mine
    page.reload()
    page.wait_for_function("() => window.dashboardReady === true")
    assert (
        page.locator(f'#history-table tbody tr[data-run-id="{doc["run"]["run_id"]}"] .label-text').inner_text() == mine
    )
    # The count follows the store: an import through the API then Refresh.
    before = len(server.get("/api/runs"))
    assert page.locator("#history-count").inner_text() == f"{before} stored runs"
    extra = copy.deepcopy(small_committed())
    extra["run"]["run_id"] = f"extra-{uuid.uuid4().hex[:8]}"
    for r in extra["rows"]:
        r["run_id"] = extra["run"]["run_id"]
    server.post("/api/runs/import", extra)
    page.click("#history-refresh")
    page.wait_for_function(
        "(n) => document.querySelector('#history-count').textContent === `${n} stored runs`", arg=before + 1
    )


def test_an_overlay_that_adds_no_point_says_why(make_page):
    big, small = biggest_committed(), small_committed()
    page = make_page()
    open_run(page, big["run"]["run_id"])
    dtype = page.locator("#chart-dtype").input_value()
    set_filters(page, dtype, str(max(r["M"] for r in big["rows"])))  # an M the small run did not measure
    m = page.locator("#chart-m").input_value()
    assert int(m) not in {r["M"] for r in small["rows"]}
    page.locator(f'#history-table tbody tr[data-run-id="{small["run"]["run_id"]}"] button.overlay').click()
    page.wait_for_function("() => document.querySelector('#history-status').textContent.includes('adds no point')")
    status = page.locator("#history-status").inner_text()
    assert f"M={m}" in status and all(str(v) in status for v in {r["M"] for r in small["rows"]})
