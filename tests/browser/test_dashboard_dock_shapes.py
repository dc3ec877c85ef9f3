"""The dock's data: with a run selected its sliders take only the shapes that run measured (the cost model only
when the user ticks it), its dtype follows the chart's dtype filter and is stated, the run it uses is named,
a CPU run that finishes is offered rather than taken, and its shape lives in the URL (dockM, dockN)."""

import math
from urllib.parse import parse_qs, urlparse

import pytest
from browser_paths import COMMITTED_RESULTS
from dock_helpers import DRAWN, biggest_run, ok_rows, open_run, show_only, slider_value, wait_settled

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/"),
]

SHOWN = sorted(DRAWN)


def walk(page, which, key="ArrowRight", timing="measured"):
    """Every value the slider takes from Home to End, with the dock's state at each."""
    slider = page.locator(f"#dock-{which}")
    slider.focus()
    page.keyboard.press("Home")
    out = []
    for _ in range(64):
        v = slider_value(page, which)
        M, N = slider_value(page, "m"), slider_value(page, "n")
        out.append((v, wait_settled(page, SHOWN, M, N, timing=timing)))
        before = page.evaluate(f"document.querySelector('#dock-{which}').value")
        page.keyboard.press(key)
        if page.evaluate(f"document.querySelector('#dock-{which}').value") == before:
            break
    return out


def test_sliders_take_only_the_measured_shapes_unless_the_model_is_asked(make_page, server):
    doc = biggest_run()
    run_id = doc["run"]["run_id"]
    page = make_page()
    show_only(page, SHOWN)
    open_run(page, run_id)
    dtype = page.evaluate("window.dockScene.dtype")
    rows = [r for r in ok_rows(server, run_id) if r["dtype"] == dtype and r["impl"] in DRAWN]
    Ms = sorted({r["M"] for r in rows})
    assert len(Ms) >= 2

    # M: exactly the measured values, in order; at each, every lane runs at its measured time.
    seen = walk(page, "m")
    assert [v for v, _ in seen] == Ms
    for M, state in seen:
        Ns_here = sorted({r["N"] for r in rows if r["M"] == M})
        assert page.evaluate("window.dockScene.nValues") == Ns_here, M
        for name in SHOWN:
            s = state[name]
            want = next(r["median_us"] for r in rows if r["impl"] == name and r["M"] == s["M"] and r["N"] == s["N"])
            assert s["timing"] == "measured" and math.isclose(s["totalUs"], want, rel_tol=1e-9), (name, s)

    # N at the last M: the Ns measured there.
    Ns = [v for v, _ in walk(page, "n")]
    assert Ns == sorted({r["N"] for r in rows if r["M"] == Ms[-1]})

    # The cost model, asked for: the sliders span powers of two as well; a shape the run did not measure
    # is drawn from the model, and said so.
    page.check("#dock-model")
    m_values = page.evaluate("window.dockScene.mValues")
    assert set(Ms) < set(m_values) and min(m_values) < min(Ms)
    page.locator("#dock-m").focus()
    page.keyboard.press("Home")
    wait_settled(page, SHOWN, min(m_values), timing="model")
    assert "cost model" in page.locator("#dock-timing").inner_text()
    page.uncheck("#dock-model")
    assert page.evaluate("window.dockScene.mValues") == Ms
    wait_settled(page, SHOWN, Ms[0], timing="measured")


def test_dtype_follows_the_chart_filter_and_the_run_is_named(make_page, server):
    doc = biggest_run()
    run_id = doc["run"]["run_id"]
    rows = ok_rows(server, run_id)
    dtypes = sorted({r["dtype"] for r in rows})
    assert len(dtypes) >= 2, "the biggest committed run should have two dtypes"
    page = make_page()
    show_only(page, SHOWN)
    open_run(page, run_id)

    # The run is named: device, date, id.
    said = page.locator("#dock-source .dock-run").inner_text()
    run = doc["run"]
    assert run["device"]["name"] in said and run_id in said and run["created_at"][:10] in said, said
    assert run["created_at"][11:16] in said, said

    # The dock's dtype is the chart's filter, whatever it is set to; the lanes run at that dtype's times.
    assert page.evaluate("window.dockScene.dtype") == page.input_value("#chart-dtype")
    for dtype in dtypes[::-1] + dtypes:
        page.select_option("#chart-dtype", dtype)
        page.wait_for_function("(d) => window.dockScene.dtype === d", arg=dtype)
        state = page.wait_for_function(
            "(d) => { const s = Object.values(window.dockState); return s.length === 3 && s.every((x) => x.dtype === d)"
            " && s.every((x) => x.timing === 'measured') ? window.dockState : false; }",
            arg=dtype,
        ).json_value()
        assert dtype in page.locator("#dock-source .dock-dtype").inner_text()
        assert dtype in page.locator("#dock-timing").inner_text()
        for name, s in state.items():
            want = next(
                r["median_us"]
                for r in rows
                if r["impl"] == name and r["dtype"] == dtype and r["M"] == s["M"] and r["N"] == s["N"]
            )
            assert math.isclose(s["totalUs"], want, rel_tol=1e-9), (name, dtype)
    # "all" in the chart: the dock shows one (bf16 first) and says why.
    page.select_option("#chart-dtype", "all")
    page.wait_for_function(
        "() => document.querySelector('#dock-source .dock-dtype').textContent.includes('every dtype')"
    )
    assert page.evaluate("window.dockScene.dtype") == ("bfloat16" if "bfloat16" in dtypes else dtypes[0])


def test_a_finished_cpu_run_is_offered_not_taken(make_page, server):
    doc = biggest_run()
    run_id = doc["run"]["run_id"]
    page = make_page()
    show_only(page, SHOWN)
    open_run(page, run_id)
    before = wait_settled(page, SHOWN, timing="measured")

    # A small CPU sweep from the page, to its end.
    for box in page.locator('#impl-list input[name="impl"]:enabled').all():
        box.set_checked(box.get_attribute("value") == "eager")
    page.fill("#m-list", "64")
    page.fill("#n-list", "128")
    page.fill("#reps", "2")
    page.click("#start")
    page.wait_for_function("() => window.dockScene.offered", timeout=180_000)
    offered = page.evaluate("window.dockScene.offered")
    assert offered != run_id
    assert server.get(f"/api/runs/{offered}")["run"]["device"]["kind"] == "cpu"

    # The dock still uses the GPU run, at the same times.
    page.wait_for_timeout(300)
    assert page.evaluate("window.dockScene.runId") == run_id
    after = page.evaluate("window.dockState")
    assert {k: v["totalUs"] for k, v in after.items()} == {k: v["totalUs"] for k, v in before.items()}
    assert doc["run"]["device"]["name"] in page.locator("#dock-source .dock-run").inner_text()

    # Only when the user asks does it switch.
    page.locator("#dock-source button.dock-offer").click()
    page.wait_for_function("(id) => window.dockScene.runId === id", arg=offered)
    assert page.evaluate("window.dockScene.offered") is None
    assert "cpu" in page.locator("#dock-source .dock-run").inner_text()


def dock_query(page):
    q = parse_qs(urlparse(page.url).query)
    return {k: v[0] for k, v in q.items()}


def test_dock_shape_round_trips_through_the_url(make_page, server):
    doc = biggest_run()
    run_id = doc["run"]["run_id"]
    rows = [r for r in ok_rows(server, run_id) if r["impl"] in DRAWN]
    Ms = sorted({r["M"] for r in rows})
    Ns = sorted({r["N"] for r in rows if r["M"] == Ms[0]})
    M, N = Ms[0], Ns[len(Ns) // 2]

    # A shared link (the page writes the runs shown into it too): the sliders and the lanes come up at its shape;
    # other parameters are kept.
    page = make_page(path=f"/?keep=yes&runs={run_id}&dockM={M}&dockN={N}")
    show_only(page, SHOWN)
    wait_settled(page, SHOWN, M, N)
    assert (slider_value(page, "m"), slider_value(page, "n")) == (M, N)
    open_run(page, run_id)
    wait_settled(page, SHOWN, M, N, timing="measured")

    # Moving a slider writes the URL (replaceState: no new history entry), keeping other parameters.
    length = page.evaluate("history.length")
    page.locator("#dock-m").focus()
    page.keyboard.press("End")
    wait_settled(page, SHOWN, Ms[-1])
    q = dock_query(page)
    assert q["dockM"] == str(Ms[-1]) and q["dockN"] == str(slider_value(page, "n")) and q["keep"] == "yes", q
    assert page.evaluate("history.length") == length

    # Reopening that URL restores the shape.
    url = page.url
    again = make_page(path=url[url.index("/", len("http://")) :])
    show_only(again, SHOWN)
    wait_settled(again, SHOWN, Ms[-1], int(q["dockN"]))
    open_run(again, run_id)
    wait_settled(again, SHOWN, Ms[-1], int(q["dockN"]), timing="measured")

    # A shape the run did not measure snaps to the nearest measured one, and the URL says which.
    odd = make_page(path=f"/?dockM={Ms[0] + 1}&dockN={N + 3}")
    show_only(odd, SHOWN)
    open_run(odd, run_id)
    wait_settled(odd, SHOWN, Ms[0], N, timing="measured")
    assert dock_query(odd)["dockM"] == str(Ms[0]) and dock_query(odd)["dockN"] == str(N)
