"""Model widths on the page (issue 15): the N axis of a stored models-preset run names the models of its widths
(tick texts and hover, from GET /api/presets), and the run panel's preset picker fills M and N from the API."""

import json

import pytest
from browser_paths import COMMITTED_RESULTS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.skipif(not COMMITTED_RESULTS, reason="no committed result file under results/ yet"),
]


def models_run():
    """The first committed models-preset run with a forward pass (the test reads the forward chart; a run may hold
    only the backward)."""
    for path in COMMITTED_RESULTS:
        doc = json.loads(path.read_text())
        if doc["run"]["sweep"].get("preset") == "models" and "fwd" in doc["run"]["sweep"]["passes"]:
            return doc
    pytest.skip("no committed forward run of the models preset")


def test_model_names_on_the_n_axis_and_in_the_hover(make_page, server):
    doc = models_run()
    presets = {p["name"]: p for p in server.get("/api/presets")}
    labels = {int(n): names for n, names in presets["models"]["labels"].items()}
    page = make_page(width=1440, path=f"/?runs={doc['run']['run_id']}&M=all")
    axis = page.evaluate(
        "() => { const l = document.getElementById('chart-fwd').layout.xaxis;"
        " return {vals: l.tickvals, text: l.ticktext}; }"
    )
    widths = sorted({r["N"] for r in doc["rows"] if r["pass"] == "fwd" and r["status"] == "ok"})
    assert set(widths) <= set(axis["vals"]), "every measured model width is a tick"
    named = {v: t for v, t in zip(axis["vals"], axis["text"]) if " · " in t}
    assert len(named) >= 5, axis
    for v, t in named.items():
        assert t.split(" · ", 1)[1] == labels[v][0], (v, t)  # the API's first model name, not a guess
    assert 16384 in named and "405B" in named[16384]
    # the hover of every point names all the models of its width
    hovers = page.evaluate("""() => document.getElementById('chart-fwd').data
        .filter((t) => t.meta && t.meta.kind === 'measured')
        .flatMap((t) => t.customdata.map((c) => [c[2], c[12]]))""")
    assert hovers
    for n, extra in hovers:
        if n in labels:
            assert ", ".join(labels[n]) in extra, (n, extra)


def test_preset_picker_fills_the_sweep(make_page, server):
    presets = {p["name"]: p for p in server.get("/api/presets")}
    page = make_page(width=1440)
    options = page.eval_on_selector_all("#preset option", "os => os.map((o) => o.value)")
    assert set(presets) <= set(options) and "" in options
    page.select_option("#preset", "models")
    assert [int(v) for v in page.input_value("#m-list").split(",")] == presets["models"]["M"]
    assert [int(v) for v in page.input_value("#n-list").split(",")] == presets["models"]["N"]
    page.fill("#n-list", "4096")  # an edit makes it custom again
    page.dispatch_event("#n-list", "input")
    assert page.input_value("#preset") == ""
