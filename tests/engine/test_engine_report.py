import pytest
from rich.console import Console

from engine import plot as plot_mod
from engine.models import RunFile
from engine.report import BEST, print_summary, summary_tables
from engine.summary import summarize


def make_run(rows):
    header = {
        "run_id": "r1",
        "created_at": "2026-12-02T14:00:00Z",
        "device": {
            "kind": "cuda",
            "index": 0,
            "name": "Test GPU",
            "uuid": "GPU-t",
            "sm_count": 4,
            "memory_bytes": 1,
            "l2_bytes": 1,
            "capability": "9.0",
        },
        "ceiling_GBps": 1000.0,
        "ceiling_method": "test",
        "versions": {"torch": "x"},
        "sweep": {},
    }
    full = []
    for impl, pass_, m, n, status, gbps in rows:
        full.append(
            {
                "run_id": "r1",
                "impl": impl,
                "pass": pass_,
                "dtype": "bfloat16",
                "M": m,
                "N": n,
                "status": status,
                "reason": None if status == "ok" else "because",
                "median_us": 10.0 if status == "ok" else None,
                "GBps": gbps,
                "pct_of_ceiling": gbps / 10 if gbps else None,
                "bytes": 1,
                "mode": "cuda",
                "device": {"index": 0, "name": "Test GPU", "uuid": "GPU-t"},
                "started_at": 0.0,
                "ended_at": 0.0,
            }
        )
    run = RunFile.model_validate({"run": header, "rows": full})
    run.summary = summarize(run.rows)
    return run


ROWS = [
    ("a", "fwd", 64, 128, "ok", 900.0),
    ("b", "fwd", 64, 128, "ok", 950.0),
    ("c", "fwd", 64, 128, "skipped", None),
    ("a", "fwd", 64, 256, "ok", 800.0),
    ("b", "fwd", 64, 256, "error", None),
    ("c", "fwd", 64, 256, "skipped", None),
    ("a", "bwd", 64, 128, "ok", 500.0),
]


def render(run):
    console = Console(record=True, width=200)
    print_summary(run, console)
    return console.export_text()


def test_table_marks_the_best_per_shape_and_shows_percent():
    text = render(make_run(ROWS))
    lines = [line for line in text.splitlines() if "64×128" in line or "64×256" in line]
    fwd_128 = lines[0]
    assert f"{BEST} 950 (95%)" in fwd_128 and f"{BEST} 900" not in fwd_128 and "skip" in fwd_128
    assert f"{BEST} 800 (80%)" in lines[1] and "error" in lines[1]
    assert "7 cases: 4 ok, 0 wrong, 2 skipped, 1 error" in text
    assert len(summary_tables(make_run(ROWS).run, make_run(ROWS).rows)) == 2  # fwd and bwd


def test_summary_best_and_counts():
    s = summarize(make_run(ROWS).rows, complete=False)
    assert s["best"]["fwd/bfloat16/64x128"]["impl"] == "b" and s["best"]["fwd/bfloat16/64x256"]["impl"] == "a"
    assert (s["rows"], s["ok"], s["skipped"], s["error"], s["complete"]) == (7, 4, 2, 1, False)


def test_figure_has_a_trace_per_impl_and_m_per_panel_and_the_ceiling():
    spec = plot_mod.figure_spec(make_run(ROWS))
    names = [(t["name"], t["xaxis"]) for t in spec["data"]]
    assert sorted(names) == [("a · M=64", "x"), ("a · M=64", "x2"), ("b · M=64", "x")]
    a_fwd = next(t for t in spec["data"] if t["name"] == "a · M=64" and t["xaxis"] == "x")
    assert a_fwd["x"] == [128, 256] and a_fwd["y"] == [900.0, 800.0]
    assert all(s["y0"] == 1000.0 for s in spec["layout"]["shapes"]) and len(spec["layout"]["shapes"]) == 2


def test_plot_without_plotly_js_is_a_clear_error(monkeypatch, tmp_path, without_plotly):
    monkeypatch.setattr(plot_mod, "REPO_PLOTLY_JS", tmp_path / "missing.js")
    monkeypatch.delenv(plot_mod.PLOTLY_JS_ENV, raising=False)
    with pytest.raises(plot_mod.PlotlyUnavailable, match="plotly.min.js"):
        plot_mod.write_plot_html(make_run(ROWS), tmp_path / "x.html")
    js = tmp_path / "plotly.min.js"
    js.write_text("window.Plotly = {newPlot: function () {}};")
    monkeypatch.setenv(plot_mod.PLOTLY_JS_ENV, str(js))
    page = plot_mod.write_plot_html(make_run(ROWS), tmp_path / "x.html").read_text()
    assert "window.Plotly = {newPlot" in page and "M=64" in page and "Plotly.newPlot" in page


def test_host_column_wrong_cell_and_speedup():
    from engine.report import host_text, summary_tables
    from engine.models import ResultRow, RunHeader
    from rich.console import Console

    header = RunHeader.model_validate(
        {
            "run_id": "r",
            "created_at": "2026-12-02T00:00:00Z",
            "ceiling_GBps": 100.0,
            "ceiling_method": "m",
            "versions": {},
            "sweep": {},
            "device": {"kind": "cuda", "name": "GPU", "sm_count": 1, "memory_bytes": 1, "l2_bytes": 1},
        }
    )
    base = {
        "run_id": "r",
        "pass": "bwd",
        "dtype": "bfloat16",
        "M": 8,
        "N": 16,
        "bytes": 1,
        "mode": "cuda",
        "device": {"name": "GPU"},
        "started_at": 0.0,
        "ended_at": 0.0,
    }
    rows = [
        ResultRow.model_validate(
            {**base, "impl": "a", "status": "ok", "GBps": 50.0, "median_us": 10.0, "host_us": 12.5}
        ),
        ResultRow.model_validate(
            {
                **base,
                "impl": "b",
                "status": "wrong",
                "GBps": 90.0,
                "median_us": 5.0,
                "host_us": 1.0,
                "reason": "wrong: dx",
            }
        ),
    ]
    assert host_text(rows[0]) == "10.0/12.5 !" and host_text(rows[1]) == "5.0/1.0"
    speedup = {"baseline": "a", "by_shape": {"bwd/bfloat16/8x16": {"a": 1.0}}}
    console = Console(width=200, record=True)
    for t in summary_tables(header, rows, speedup):
        console.print(t)
    text = console.export_text()
    assert "a µs/host" in text and "10.0/12.5 !" in text and "1.00×" in text
    assert "★ 50.0" in text and "wrong" in text and "★ 90" not in text


def test_a_shape_a_run_never_reached_has_no_star_in_either_table():
    """A run cut short (a backward that stopped half way): the shapes some implementation never reached get no ★,
    since the fastest of those that ran is not the fastest of the table; the reached ones keep theirs."""
    from engine.report import markdown_tables

    rows = [
        ("a", "bwd", 64, 128, "ok", 400.0),
        ("b", "bwd", 64, 128, "ok", 600.0),
        ("a", "bwd", 64, 256, "ok", 700.0),
    ]  # b stopped before 64×256
    run = make_run(rows)
    md = [line for line in markdown_tables(run).splitlines() if line.startswith("| 64×")]
    assert md[0] == f"| 64×128 | 400 (40%) | **{BEST} 600 (60%)** |"
    assert md[1] == "| 64×256 | 700 (70%) | not reached |"
    text = [line for line in render(run).splitlines() if "64×256" in line][0]
    assert BEST not in text and "700 (70%)" in text and "not reached" in text
    assert f"{BEST} 600" in [line for line in render(run).splitlines() if "64×128" in line][0]


def test_standings_count_wins_and_take_geomeans_over_the_baseline_and_the_best_peer():
    import math
    import random

    rng = random.Random()
    shapes = [(64, n) for n in (128, 256, 512)]
    gbps = {(impl, n): rng.uniform(100, 1000) for impl in ("a", "b", "torch-native") for _, n in shapes}
    rows = [(impl, "bwd", m, n, "ok", gbps[(impl, n)]) for impl in ("a", "b", "torch-native") for m, n in shapes]
    rows.append(("b", "fwd", 64, 128, "ok", 10.0))
    run = make_run(rows)
    st = run.summary["standings"]
    for impl in ("a", "b", "torch-native"):
        others = [i for i in ("a", "b", "torch-native") if i != impl]
        wins = sum(all(gbps[(impl, n)] > gbps[(o, n)] for o in others) for _, n in shapes)
        peer = math.prod(gbps[(impl, n)] / max(gbps[(o, n)] for o in others) for _, n in shapes) ** (1 / 3)
        base = math.prod(gbps[(impl, n)] / gbps[("torch-native", n)] for _, n in shapes) ** (1 / 3)
        got = st["bwd"][impl]
        assert (got["won"], got["measured"], got["vs_baseline_shapes"]) == (wins, 3, 3)
        assert math.isclose(got["vs_best_peer"], peer) and math.isclose(got["vs_baseline"], base)
    # alone on its shape: no peer, no baseline; it still wins it
    assert st["fwd"]["b"] == {
        "won": 1,
        "measured": 1,
        "vs_baseline": None,
        "vs_baseline_shapes": 0,
        "vs_best_peer": None,
        "vs_best_peer_shapes": 0,
    }
    text = render(run)
    a = st["bwd"]["a"]
    assert f"a {a['won']}/3 won, {a['vs_baseline']:.2f}× torch-native, {a['vs_best_peer']:.2f}× best peer" in text
    run.summary.pop("standings")  # a file written before the standings: the footer comes from its rows
    assert f"a {a['won']}/3 won, {a['vs_baseline']:.2f}× torch-native" in render(run)
