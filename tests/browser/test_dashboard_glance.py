"""Issue 35, the data half: the summary line per pass equals the API summary's standings (for any baseline);
partial runs say so wherever a run is named; the dock names the lanes its run lacks; the trends view flags a
planted regression; the fwd+bwd view adds the two passes' stored times; run vs run reads forward in time, warns on
other devices and shows in its filters what it draws; a CPU sweep's kernel breakdown speaks of CPU operators."""

import math
import random
import uuid

import pytest
from browser_paths import COMMITTED_RESULTS
from app.first_look import first_look_runs

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]


def standings_on_page(page):
    return page.evaluate(
        """() => [...document.querySelectorAll('#summary-lines .summary-line')].map((line) => ({
             pass: line.dataset.pass, run: line.dataset.run, baseline: line.dataset.baseline, text: line.textContent,
             impls: Object.fromEntries([...line.querySelectorAll('.standing')].map((s) => [s.dataset.impl, {
               won: +s.dataset.won, measured: +s.dataset.measured,
               vs_baseline: s.dataset.vsBaseline === '' ? null : +s.dataset.vsBaseline,
               vs_best_peer: s.dataset.vsBestPeer === '' ? null : +s.dataset.vsBestPeer}]))}))"""
    )


def check_against_api(server, lines, baseline):
    assert {ln["pass"] for ln in lines} == {"fwd", "bwd"}
    for ln in lines:
        api = server.get(f"/api/runs/{ln['run']}?baseline={baseline}")["summary"]["standings"][ln["pass"]]
        assert set(ln["impls"]) == set(api)
        for impl, got in ln["impls"].items():
            want = api[impl]
            assert (got["won"], got["measured"]) == (want["won"], want["measured"]), impl
            for k in ("vs_baseline", "vs_best_peer"):
                assert (got[k] is None) == (want[k] is None) and (
                    got[k] is None or math.isclose(got[k], want[k], rel_tol=1e-9)
                ), (impl, k)
            text = f"{impl} wins {want['won']}/{want['measured']}"
            if impl != baseline:
                text += (
                    f", {want['vs_baseline']:.2f}× {baseline}" if want["vs_baseline"] is not None else f", – {baseline}"
                )
            assert text in ln["text"], (text, ln["text"])


def test_the_summary_line_equals_the_api_for_the_default_and_a_picked_baseline(make_page, server, shot):
    page = make_page()
    page.wait_for_function("() => document.querySelectorAll('#summary-lines .summary-line').length === 2")
    lines = standings_on_page(page)
    assert {ln["run"] for ln in lines} <= {r["run_id"] for r in first_look_runs(server.get("/api/runs"))}
    assert all(ln["baseline"] == "torch-native" for ln in lines)
    check_against_api(server, lines, "torch-native")
    shot(page.locator("#charts"), "summary-line.png")
    other = random.choice(sorted({i for ln in lines for i in ln["impls"]} - {"torch-native"}))
    page.select_option("#baseline", other)
    page.wait_for_function(
        "(b) => [...document.querySelectorAll('#summary-lines .summary-line')].every((l) => l.dataset.baseline === b)",
        arg=other,
    )
    check_against_api(server, standings_on_page(page), other)


def test_a_partial_run_says_so_wherever_it_is_named(make_page, server):
    runs = server.get("/api/runs")
    partial = next(r for r in runs if r["kind"] == "cuda" and not r["complete"] and {"fwd", "bwd"} <= set(r["passes"]))
    whole = next(r for r in runs if r["kind"] == "cuda" and r["complete"] and r["run_id"] != partial["run_id"])
    page = make_page(path=f"/?runs={partial['run_id']},{whole['run_id']}&view=diff")
    row = page.locator(f'#history-table tbody tr[data-run-id="{partial["run_id"]}"]')
    assert row.locator(".badge.partial").inner_text() == "partial"
    assert "(partial)" in row.inner_text()
    page.wait_for_function(
        "(id) => [...document.querySelectorAll('#diff-base option')].some((o) => o.value === id)", arg=partial["run_id"]
    )
    named = {
        "header": page.locator("#chart-sources").inner_text(),
        "table picker": page.locator(f'#table-run option[value="{partial["run_id"]}"]').inner_text(),
        "base picker": page.locator(f'#diff-base option[value="{partial["run_id"]}"]').inner_text(),
        "new picker": page.locator(f'#diff-new option[value="{partial["run_id"]}"]').inner_text(),
        "dock": page.locator("#dock-source").inner_text(),
    }
    for where, text in named.items():
        assert "(partial)" in text, (where, text)
    # One naming scheme: the pickers say what History says.
    history_name = row.locator(".label-text").inner_text()
    assert named["base picker"].startswith(history_name) and named["table picker"].startswith(history_name)
    whole_option = page.locator(f'#diff-base option[value="{whole["run_id"]}"]').inner_text()
    assert "(partial)" not in whole_option


def test_the_dock_names_the_lanes_its_run_lacks(make_page, server):
    page = make_page()
    run_id = page.evaluate("window.dockScene.runId")
    lanes = page.locator("#dock-impls input:checked").evaluate_all("(xs) => xs.map((x) => x.value)")
    doc = server.get(f"/api/runs/{run_id}")
    have = {r["impl"] for r in doc["rows"] if r["status"] == "ok" and r["pass"] == "bwd"}
    lacking = [lane for lane in lanes if lane not in have]
    text = page.locator("#dock-source").inner_text()
    if lacking:
        assert f"no measured time of {', '.join(lacking)}" in text
    else:
        assert page.locator("#dock-source .dock-lacks").count() == 0
    # No complete GPU run covers more of the lanes than the run the dock took.
    cover = lambda r: len(set(lanes) & set(r["implementations"]))  # noqa: E731
    runs = [r for r in server.get("/api/runs") if r["kind"] == "cuda" and r["complete"] and r["counts"]["ok"]]
    chosen = next(r for r in server.get("/api/runs") if r["run_id"] == run_id)
    assert cover(chosen) >= max(map(cover, runs))


@pytest.mark.parametrize(
    "lanes, runs, chosen",
    [
        (["a", "b", "c"], [("new", "X", ["a"], True), ("old", "Y", ["a", "b", "c"], True)], "old"),
        (["a", "b"], [("partial", "X", ["a", "b"], False), ("whole", "X", ["a"], True)], "whole"),
        (["a"], [("other-device", "Y", ["a"], True), ("same-device", "X", ["a"], True)], "same-device"),
        (["z"], [("new", "X", ["a"], True)], None),
    ],
)
def test_the_dock_run_rule(make_page, lanes, runs, chosen):
    listing = [
        {
            "run_id": i,
            "device_name": d,
            "implementations": impls,
            "complete": c,
            "kind": "cuda",
            "counts": {"ok": 5},
            "created_at": f"2026-12-0{9 - n}T00:00:00Z",
        }
        for n, (i, d, impls, c) in enumerate(runs)
    ]
    page = make_page()
    got = page.evaluate(
        "async ([runs, lanes]) => (await import('/static/js/dock_data.js')).dockRunFor(runs, lanes, 'X')?.run_id ?? null",
        [listing, lanes],
    )
    assert got == chosen


def trend_doc(run_id, created_at, device, gbps):
    rows = [
        {
            "run_id": run_id,
            "impl": impl,
            "pass": p,
            "dtype": "bfloat16",
            "M": 4096,
            "N": n,
            "status": "ok",
            "median_us": 10.0,
            "GBps": g,
            "bytes": 1,
            "mode": "cuda",
            "device": {"name": device},
            "started_at": 0.0,
            "ended_at": 0.0,
            "timing": "events",
        }
        for (impl, p, n), g in gbps.items()
    ]
    return {
        "run": {
            "run_id": run_id,
            "created_at": created_at,
            "ceiling_method": "m",
            "ceiling_GBps": 4000.0,
            "versions": {"torch": "t", "triton": "t"},
            "sweep": {"timing": "events"},
            "git_commit": uuid.uuid4().hex,
            "device": {"kind": "cuda", "name": device, "sm_count": 132, "memory_bytes": 1, "l2_bytes": 1},
        },
        "rows": rows,
        "summary": {},
    }


def test_the_trends_view_flags_a_planted_regression(make_page, server, shot):
    device = f"Planted GPU {uuid.uuid4().hex[:6]}"
    cases = [
        (impl, p, n) for impl, p in (("fast", "bwd"), ("steady", "bwd"), ("steady", "fwd")) for n in (1024, 4096, 8192)
    ]
    first = {c: random.uniform(1000, 3000) for c in cases}
    second = {c: g * random.uniform(0.995, 1.005) for c, g in first.items()}
    drop = random.uniform(0.7, 0.9)
    third = {c: g * (drop if c[0] == "fast" else 1.0) for c, g in second.items()}
    ids = []
    for day, gbps in zip((1, 2, 3), (first, second, third)):
        doc = trend_doc(f"planted-{day}-{uuid.uuid4().hex[:6]}", f"2026-11-0{day}T12:00:00Z", device, gbps)
        server.post("/api/runs/import", doc)
        ids.append(doc["run"]["run_id"])
    page = make_page(path=f"/?view=trend&trendDevice={device.replace(' ', '%20')}")
    page.wait_for_function("() => document.querySelectorAll('#view-note .regression').length > 0")
    flagged = page.locator("#view-note .regression").evaluate_all(
        "(xs) => xs.map((x) => ({impl: x.dataset.impl, pass: x.dataset.pass, run: x.dataset.run, ratio: +x.dataset.ratio}))"
    )
    assert [(f["impl"], f["pass"], f["run"]) for f in flagged] == [("fast", "bwd", ids[2])]
    assert math.isclose(flagged[0]["ratio"], drop, rel_tol=1e-9)
    assert page.input_value("#trend-device") == device
    marked = page.evaluate(
        "() => document.getElementById('chart-alt-bwd').data.flatMap((t) => (t.customdata || [])"
        ".filter((c) => c[2]).map((c) => [c[0], c[1]]))"
    )
    assert marked == [["fast", ids[2]]]
    assert page.evaluate("+document.getElementById('chart-alt-fwd').dataset.regressions") == 0
    shot(page.locator("#charts"), "trends.png")


def test_the_fwd_bwd_view_adds_the_stored_times_of_each_pair(make_page, server):
    chosen = first_look_runs(server.get("/api/runs"))
    docs = [server.get(f"/api/runs/{r['run_id']}") for r in chosen]
    rows = {
        (r["pass"], r["impl"], r["dtype"], r["M"], r["N"]): r["median_us"]
        for d in docs
        for r in d["rows"]
        if r["status"] == "ok"
    }
    page = make_page(path="/?view=step")
    page.wait_for_function("() => +document.getElementById('chart-alt-fwd').dataset.points > 0")
    pairs = page.locator("#step-pairs .pair").evaluate_all("(xs) => xs.map((x) => x.dataset.pair)")
    fwd = {k[1] for k in rows if k[0] == "fwd"}
    bwd = {k[1] for k in rows if k[0] == "bwd"}
    want = sorted(f"{i}+{i}" for i in fwd & bwd) + sorted(f"triton+{i}" for i in bwd - fwd if "triton" in fwd)
    assert pairs == want
    dtype, m = page.input_value("#chart-dtype"), page.input_value("#chart-m")
    points = page.evaluate(
        "() => document.getElementById('chart-alt-fwd').data.filter((t) => t.customdata)"
        ".flatMap((t) => t.customdata.map((c, i) => ({name: t.name, key: c[1], y: t.y[i]})))"
    )
    assert points
    for p in points:
        f, b = (p["name"].split(" + ") + [p["name"]])[:2] if " + " in p["name"] else (p["name"], p["name"])
        d, shape = p["key"].split("/")
        mm, n = map(int, shape.split("x"))
        assert d == dtype and str(mm) == m
        assert math.isclose(p["y"], rows[("fwd", f, d, mm, n)] + rows[("bwd", b, d, mm, n)], rel_tol=1e-9)
    # A picked pair goes into the URL and comes back from it.
    page.select_option("#step-fwd", "liger")
    page.select_option("#step-bwd", "triton-persistent")
    page.click("#step-add")
    page.wait_for_function(
        "() => (new URLSearchParams(location.search).get('pairs') || '').includes('liger+triton-persistent')"
    )
    again = make_page(path="/" + page.url.split("/", 3)[3])
    again.wait_for_function(
        "() => document.querySelector('#step-pairs [data-pair=\"liger+triton-persistent\"]') !== null"
    )


def test_run_vs_run_reads_forward_in_time_and_warns_on_another_device(make_page, server):
    runs = [r for r in server.get("/api/runs") if r["kind"] == "cuda" and r["complete"]]
    devices = sorted({r["device_name"] for r in runs})
    assert len(devices) >= 2, "the committed results have H100 and H200 runs"
    a = next(r for r in runs if r["device_name"] == devices[0])
    b = next(r for r in runs if r["device_name"] == devices[1])
    older, newer = sorted((a, b), key=lambda r: r["created_at"])
    page = make_page(path=f"/?runs={older['run_id']},{newer['run_id']}&view=diff")
    page.wait_for_function("() => !document.querySelector('#diff-warning').hidden")
    assert page.input_value("#diff-base") == older["run_id"] and page.input_value("#diff-new") == newer["run_id"]
    warning = page.locator("#diff-warning").inner_text()
    assert "devices differ" in warning and older["device_name"] in warning and newer["device_name"] in warning
    # The filters show what the diff draws.
    compare = server.get(f"/api/compare?base={older['run_id']}&new={newer['run_id']}&allow_mixed_timing=true")
    if compare["rows"]:
        page.wait_for_function(
            "() => +document.getElementById('chart-alt-fwd').dataset.points"
            " + +document.getElementById('chart-alt-bwd').dataset.points > 0"
        )
        drawn = page.evaluate(
            "() => ['fwd', 'bwd'].flatMap((p) => document.getElementById('chart-alt-' + p).data"
            ".filter((t) => t.customdata).flatMap((t) => t.customdata.map((c) => c[1])))"
        )
        ms = {int(k.split("/")[2].split("x")[0]) for k in drawn}
        dts = {k.split("/")[1] for k in drawn}
        m, dt = page.input_value("#chart-m"), page.input_value("#chart-dtype")
        assert m == "all" or ms == {int(m)}
        assert dt == "all" or dts == {dt}


def test_a_cpu_profile_is_labelled_as_cpu_operators(make_page, server):
    page = make_page()
    for box in page.locator('#impl-list input[name="impl"]:enabled').all():
        box.set_checked(box.get_attribute("value") == "eager")
    for box in page.locator('#sweep-form input[name="dtype"]').all():
        box.set_checked(box.get_attribute("value") == "float32")
    page.fill("#m-list", "64")
    page.fill("#n-list", "256")
    page.fill("#reps", "3")
    page.check("#profile")
    page.click("#start")
    page.wait_for_function(
        "() => document.querySelector('#start').disabled === false"
        " && document.querySelector('#run-status').textContent.startsWith('Done')",
        timeout=180_000,
    )
    caption = page.locator("#chart-profile-caption")
    caption.wait_for(state="visible")
    text = caption.inner_text()
    assert "CPU-operator breakdown" in text and "GPU" not in text.replace("no GPU kernels", "")
    names = page.evaluate(
        "() => document.getElementById('chart-profile').data.filter((t) => t.meta && t.meta.kind === 'kernel')"
        ".map((t) => t.meta.kernel)"
    )
    assert names and not any(n.startswith("autograd::") for n in names)
    assert any(n.endswith("Backward0") or n.startswith("aten::") for n in names)
    # The table's peak memory of a CPU row: "–", saying why (the engine measures it on CUDA only).
    peak = page.locator("#shape-table tbody tr.status-ok td:nth-child(10)").first
    assert peak.inner_text() == "–" and "not measured on CPU" in peak.get_attribute("title")
