"""engine.plot: the standalone HTML chart of a result file (one panel per dtype × pass, one trace per
implementation × M, the ceiling as a dashed line), and where plotly.min.js comes from."""

import json
import random

import pytest

from engine import plot
from engine.models import RunFile


def run_file(ceiling=2000.0):
    rows = []
    for impl in ("triton", "eager"):
        for pass_ in ("fwd", "bwd"):
            for M in (64, 128):
                for N in (512, 1024, 256):
                    gbps = random.uniform(10, 1500)
                    rows.append(
                        {
                            "run_id": "r1",
                            "impl": impl,
                            "pass": pass_,
                            "dtype": "bfloat16",
                            "M": M,
                            "N": N,
                            "bytes": 1,
                            "status": "ok",
                            "mode": "cpu",
                            "device": {"name": "cpu"},
                            "started_at": 0.0,
                            "ended_at": 0.0,
                            "median_us": 1.0,
                            "GBps": gbps,
                            "pct_of_ceiling": 100 * gbps / ceiling,
                        }
                    )
    rows.append({**rows[0], "impl": "broken", "status": "error", "GBps": None, "reason": "boom"})
    header = {
        "run_id": "r1",
        "created_at": "2026-12-03T00:00:00Z",
        "sweep": {},
        "device": {"kind": "cpu", "name": "Test <CPU>", "sm_count": 2, "memory_bytes": 1, "l2_bytes": 1},
        "versions": {"torch": "x"},
        "ceiling_GBps": ceiling,
        "ceiling_method": "memcpy",
    }
    return RunFile.model_validate({"run": header, "rows": rows})


def test_figure_has_one_panel_per_dtype_and_pass_and_one_trace_per_impl_and_m():
    run = run_file()
    spec = plot.figure_spec(run)
    assert {"xaxis", "xaxis2", "yaxis", "yaxis2"} <= set(spec["layout"]) and "xaxis3" not in spec["layout"]
    names = [t["name"] for t in spec["data"]]
    assert len(names) == 2 * 2 * 2  # impl × M × pass; the errored row draws nothing
    assert all("broken" not in n for n in names)
    for trace in spec["data"]:
        assert trace["x"] == sorted(trace["x"]) == [256, 512, 1024]
        pass_ = "fwd" if trace["xaxis"] == "x" else "bwd"
        impl, m = trace["name"].split(" · M=")
        want = {r.N: r.GBps for r in run.rows if r.impl == impl and r.M == int(m) and r.pass_ == pass_}
        assert trace["y"] == [want[n] for n in trace["x"]]
    assert sum(t["showlegend"] for t in spec["data"]) == 4  # one legend entry per (impl, M) across panels
    lines = [s for s in spec["layout"]["shapes"] if s["type"] == "line"]
    assert len(lines) == 2 and all(s["y0"] == 2000.0 and s["line"]["dash"] == "dash" for s in lines)
    top = max(r.GBps for r in run.rows if r.GBps and r.pass_ == "fwd")
    assert spec["layout"]["yaxis"]["range"][1] == pytest.approx(max(top, 2000.0) * 1.12)


def test_write_plot_html_inlines_the_script_and_escapes(tmp_path, monkeypatch):
    monkeypatch.setattr(plot, "plotly_js", lambda: "/*plotly*/")
    run = run_file()
    path = plot.write_plot_html(run.model_dump(by_alias=True), tmp_path / "sub" / "chart.html")
    page = path.read_text(encoding="utf-8")
    assert "<script>/*plotly*/</script>" in page and "Test &lt;CPU&gt;" in page and "2000 GB/s" in page
    fig = json.loads(page.split("const fig = ", 1)[1].split("; Plotly.newPlot", 1)[0].replace("<\\/", "</"))
    assert fig == json.loads(json.dumps(plot.figure_spec(run)))


def test_plotly_js_sources_in_order(tmp_path, monkeypatch, without_plotly):
    js = tmp_path / "p.js"
    js.write_text("/*from env*/", encoding="utf-8")
    monkeypatch.setenv(plot.PLOTLY_JS_ENV, str(js))
    assert plot.plotly_js() == "/*from env*/"
    monkeypatch.setenv(plot.PLOTLY_JS_ENV, str(tmp_path / "missing.js"))
    monkeypatch.setattr(plot, "REPO_PLOTLY_JS", tmp_path / "also-missing.js")
    with pytest.raises(plot.PlotlyUnavailable, match="plotly.min.js was not found"):
        plot.plotly_js()


def test_the_repository_copy_is_looked_for_under_static_vendor():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    assert plot.REPO_PLOTLY_JS == repo / "static" / "vendor" / "plotly-basic.min.js"
    assert plot.REPO_PLOTLY_JS.is_file(), (
        "the vendored bundle is committed (issue 35): the GPU image has no plotly package"
    )
