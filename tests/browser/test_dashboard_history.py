"""History: a result file made by a real CPU run and imported (through the API, and through the page's file
input) is listed, opens into the charts with its measured values, overlays with another run, offers CSV and
JSON downloads, and sets the dock's speeds to its measured backward times."""

import copy
import json
import math
import uuid

import pytest
from browser_paths import COMMITTED_RESULTS
from chart_helpers import default_m
from app.first_look import first_look_runs
from history_helpers import click_and_wait, opens

pytestmark = [pytest.mark.browser, pytest.mark.server]

SHAPE = {"M": [64], "N": [128, 256]}


@pytest.fixture(scope="module")
def result_file(server):
    """A valid result file with real (CPU) measurements: one run through the service, as a document."""
    doc = server.post(
        "/benchmark?stream=false",
        {"implementations": ["eager", "torch-chunked"], **SHAPE, "repetitions": 3, "dtypes": ["bfloat16"]},
    )
    assert doc["summary"]["ok"] == 8, doc["summary"]
    return doc


def as_imported(doc, tag):
    """The same measurements under a new run id (a file from elsewhere)."""
    out = copy.deepcopy(doc)
    run_id = f"{tag}-{uuid.uuid4().hex[:8]}"
    out["run"]["run_id"] = run_id
    for row in out["rows"]:
        row["run_id"] = run_id
    out["summary"]["run_id"] = run_id
    return out


def drawn(page, panel):
    return page.evaluate(
        """(panel) => document.getElementById('chart-' + panel).data.filter((t) => t.customdata)
             .flatMap((t) => t.customdata.map((c, i) => ({impl: c[0], N: c[2], y: t.y[i], name: t.name, src: c[9]})))""",
        panel,
    )


def test_history_opens_an_imported_result_file(make_page, server, result_file, tmp_path, shot):
    doc = as_imported(result_file, "imported")
    answer = server.post("/api/runs/import", doc)
    assert answer["run_id"] == doc["run"]["run_id"]

    page = make_page()
    # Show the two implementations this run measured in the dock, then open the run.
    for box in page.locator("#dock-impls input").all():
        box.set_checked(box.get_attribute("value") in ("eager", "torch-chunked"))
    row = page.locator(f'#history-table tbody tr[data-run-id="{doc["run"]["run_id"]}"]')
    assert row.count() == 1
    assert "imported file" in row.inner_text()
    row.locator("button.open").click()
    page.wait_for_function("() => +document.querySelector('#chart-bwd').dataset.points === 4")
    assert "shown" in (row.get_attribute("class") or "")

    stored = {(r["impl"], r["pass"], r["N"]): r["GBps"] for r in doc["rows"]}
    for panel in ("fwd", "bwd"):
        points = drawn(page, panel)
        assert len(points) == 4
        for p in points:
            assert math.isclose(p["y"], stored[(p["impl"], panel, p["N"])], rel_tol=1e-9)
    assert doc["run"]["device"]["name"] in page.locator("#chart-sources").inner_text()

    # Downloads: CSV and JSON of the same run, served by this host.
    csv_href = row.locator("a", has_text="CSV").get_attribute("href")
    json_href = row.locator("a", has_text="JSON").get_attribute("href")
    csv = page.request.get(f"{server.url}/{csv_href}")
    assert csv.ok and csv.text().count("\n") >= len(doc["rows"])
    got = page.request.get(f"{server.url}/{json_href}").json()
    assert got["run"]["run_id"] == doc["run"]["run_id"] and len(got["rows"]) == len(doc["rows"])

    # The dock now runs at the measured backward times of this run, at a shape it measured.
    page.wait_for_function(
        "() => window.dockState && Object.keys(window.dockState).sort().join() === 'eager,torch-chunked'"
        " && window.dockState.eager.timing === 'measured'"
    )
    state = page.evaluate("window.dockState")
    m, n = state["eager"]["M"], state["eager"]["N"]
    assert (m, n) in {(64, 128), (64, 256)}
    measured = {r["impl"]: r["median_us"] for r in doc["rows"] if r["pass"] == "bwd" and r["M"] == m and r["N"] == n}
    for impl in ("eager", "torch-chunked"):
        assert math.isclose(state[impl]["totalUs"], measured[impl], rel_tol=1e-9)
    assert "measured" in page.locator("#dock-timing").inner_text()
    shot(page, "history-opened.png")


def test_import_through_the_page_and_overlay_two_runs(make_page, server, result_file, tmp_path, shot):
    first = as_imported(result_file, "first")
    server.post("/api/runs/import", first)
    second = as_imported(result_file, "second")
    path = tmp_path / "second.json"
    path.write_text(json.dumps(second))

    page = make_page()
    page.set_input_files("#history-import", str(path))
    page.wait_for_function(
        f"() => document.querySelector('#history-table tbody tr[data-run-id=\"{second['run']['run_id']}\"].shown')"
    )
    assert "Showing" in page.locator("#history-status").inner_text()
    assert len(drawn(page, "bwd")) == 4

    for run_id in (first["run"]["run_id"], second["run"]["run_id"]):
        page.locator(f'#history-table tbody tr[data-run-id="{run_id}"] input.pick').check()
    page.click("#history-overlay")
    page.wait_for_function("() => +document.querySelector('#chart-bwd').dataset.points === 8")
    points = drawn(page, "bwd")
    assert len({p["src"] for p in points}) == 2, "the two runs must be told apart"
    names = {p["name"] for p in points}
    assert len(names) == 4 and all("[" in name for name in names)
    shot(page, "history-overlay.png")


def test_a_bad_file_is_refused_readably(make_page, guard, tmp_path):
    guard.expect_http_error(422)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps({"run": {"run_id": "x"}, "rows": "not a list"}))
    page = make_page()
    page.set_input_files("#history-import", str(path))
    page.wait_for_function("() => document.querySelector('#history-status').textContent.startsWith('Could not import')")
    assert "rows" in page.locator("#history-status").inner_text()


@pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet")
def test_reopening_the_shown_run_counts_only_when_drawn(make_page, server):
    """Open on the run already shown (the first look's): the row is `.shown` before the click's fetch returns, so
    only the table's open count says that the open finished; a filter set after it is not reset by a late open."""
    run_id = first_look_runs(server.get("/api/runs"))[0]["run_id"]
    page = make_page()
    held = []  # the run's fetch, held at the route until the test lets it go
    page.route(f"**/api/runs/{run_id}", lambda route: held.append(route))
    before = opens(page)
    page.locator(f'#history-table tbody tr[data-run-id="{run_id}"] button.open').click()
    for _ in range(200):
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the open should fetch the run"
    assert page.locator(f'#history-table tbody tr[data-run-id="{run_id}"].shown').count() == 1  # shown already
    assert page.locator("#history-status").inner_text().startswith("Opening")
    assert opens(page) == before  # held at the route: not counted
    held[0].continue_()
    page.wait_for_function("(n) => +document.querySelector('#history-table tbody').dataset.opens > n", arg=before)
    assert page.evaluate("() => document.querySelector('#history-table tbody').dataset.lastOpened") == run_id
    page.select_option("#chart-m", "all")
    page.wait_for_timeout(300)
    assert page.input_value("#chart-m") == "all"


@pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet")
def test_committed_results_are_listed_and_open(make_page, shot):
    """The result files committed under results/ are imported at start and open under History."""
    page = make_page()
    docs = [json.loads(path.read_text()) for path in COMMITTED_RESULTS]
    for doc in docs:
        row = page.locator(f'#history-table tbody tr[data-run-id="{doc["run"]["run_id"]}"]')
        assert row.count() == 1, doc["run"]["run_id"]
        assert "imported file" in row.inner_text()
        graphs = doc["rows"][0].get("timing") == "cuda-graph"
        assert ("CUDA-graph timings" in row.inner_text()) == graphs  # a graph-timed run is never mistaken
    doc = max(docs, key=lambda d: len(d["rows"]))
    click_and_wait(page, doc["run"]["run_id"])
    # The charts open at the first dtype and its fullest M (test_dashboard_chart_filters covers the filters).
    ok = [r for r in doc["rows"] if r["status"] == "ok"]
    dtype = ok[0]["dtype"]
    m = default_m(doc["rows"], dtype)
    want = {p: sum(1 for r in ok if r["pass"] == p and r["dtype"] == dtype and r["M"] == m) for p in ("fwd", "bwd")}
    page.wait_for_function(
        "(want) => +document.querySelector('#chart-fwd').dataset.points === want.fwd"
        " && +document.querySelector('#chart-bwd').dataset.points === want.bwd",
        arg=want,
    )
    assert doc["run"]["device"]["name"] in page.locator("#chart-sources").inner_text()
    page.wait_for_timeout(500)
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "committed-results.png", doc_name="dashboard.png", full_page=False)
