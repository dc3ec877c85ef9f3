"""A standalone HTML chart of a result file: GB/s against N, one panel per (dtype, pass), one line per
implementation and M, the measured copy ceiling as a dashed line. Opens in a browser with no server.

The figure is built here as plain plotly JSON, so the only thing taken from plotly is ``plotly.min.js``,
inlined into the page: from the ``plotly`` Python package if it is installed (it is not on the GPU image),
else from the file named by env ``RMSNORM_PLOTLY_JS``, else from the repository's committed
``static/vendor/plotly-basic.min.js`` (plotly.js's basic bundle: the scatter lines and shapes drawn here; so the GPU
image writes charts too). With none of them, `write_plot_html` raises `PlotlyUnavailable`
saying what to do.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any, Union

from engine.models import RunFile

PLOTLY_JS_ENV = "RMSNORM_PLOTLY_JS"
REPO_PLOTLY_JS = Path(__file__).resolve().parents[1] / "static" / "vendor" / "plotly-basic.min.js"
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]


class PlotlyUnavailable(RuntimeError):
    pass


def plotly_js() -> str:
    try:
        from plotly.offline import get_plotlyjs

        return get_plotlyjs()
    except ImportError:
        pass
    candidates = [os.environ.get(PLOTLY_JS_ENV), REPO_PLOTLY_JS]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate).read_text(encoding="utf-8")
    raise PlotlyUnavailable(
        "cannot write the chart: plotly.min.js was not found (install the 'plotly' Python package, "
        f"or point {PLOTLY_JS_ENV} at a plotly.min.js file)"
    )


def figure_spec(run: RunFile) -> dict[str, Any]:
    """The plotly figure (data + layout) as JSON-ready dicts."""
    rows = [r for r in run.rows if r.status == "ok" and r.GBps is not None]
    dtypes = list(dict.fromkeys(r.dtype for r in run.rows)) or ["bfloat16"]
    passes = [p for p in ("fwd", "bwd") if any(r.pass_ == p for r in run.rows)] or ["fwd"]
    impls = list(dict.fromkeys(r.impl for r in run.rows))
    ms = sorted({r.M for r in run.rows})
    n_rows, n_cols = len(dtypes), len(passes)
    gap_x, gap_y = 0.08, 0.12
    width = (1 - gap_x * (n_cols - 1)) / n_cols
    height = (1 - gap_y * (n_rows - 1)) / n_rows
    layout: dict[str, Any] = {
        "title": {"text": f"RMSNorm effective bandwidth · {run.run.device.name} · run {run.run.run_id}"},
        "hovermode": "closest",
        "legend": {"title": {"text": "implementation · M"}},
        "annotations": [],
        "shapes": [],
        "height": 420 * n_rows + 80,
    }
    data: list[dict[str, Any]] = []
    all_n = sorted({r.N for r in run.rows})
    for ri, dtype in enumerate(dtypes):
        for ci, pass_ in enumerate(passes):
            k = ri * n_cols + ci + 1
            suffix = "" if k == 1 else str(k)
            x0 = ci * (width + gap_x)
            y1 = 1 - ri * (height + gap_y)
            layout[f"xaxis{suffix}"] = {
                "domain": [x0, x0 + width],
                "anchor": f"y{suffix}",
                "type": "log",
                "tickvals": all_n,
                "ticktext": [str(n) for n in all_n],
                "title": {"text": "N (row length)"},
            }
            panel_max = max(
                [r.GBps for r in rows if r.dtype == dtype and r.pass_ == pass_] + [run.run.ceiling_GBps or 0, 1e-9]
            )
            layout[f"yaxis{suffix}"] = {
                "domain": [y1 - height, y1],
                "anchor": f"x{suffix}",
                "title": {"text": "GB/s"},
                "range": [0, panel_max * 1.12],
            }
            layout["annotations"].append(
                {
                    "text": f"<b>{pass_} · {dtype}</b>",
                    "x": x0 + width / 2,
                    "y": y1,
                    "xref": "paper",
                    "yref": "paper",
                    "xanchor": "center",
                    "yanchor": "bottom",
                    "yshift": 6,
                    "showarrow": False,
                }
            )
            if run.run.ceiling_GBps:
                layout["shapes"].append(
                    {
                        "type": "line",
                        "xref": f"x{suffix} domain",
                        "yref": f"y{suffix}",
                        "x0": 0,
                        "x1": 1,
                        "y0": run.run.ceiling_GBps,
                        "y1": run.run.ceiling_GBps,
                        "line": {"dash": "dash", "color": "#555", "width": 1},
                    }
                )
                layout["annotations"].append(
                    {
                        "text": "copy ceiling",
                        "x": 0.01,
                        "y": run.run.ceiling_GBps,
                        "xref": f"x{suffix} domain",
                        "yref": f"y{suffix}",
                        "xanchor": "left",
                        "yanchor": "bottom",
                        "showarrow": False,
                        "font": {"size": 10, "color": "#555"},
                    }
                )
            for ii, impl in enumerate(impls):
                for mi, m in enumerate(ms):
                    pts = sorted(
                        (r for r in rows if r.impl == impl and r.M == m and r.dtype == dtype and r.pass_ == pass_),
                        key=lambda r: r.N,
                    )
                    if not pts:
                        continue
                    data.append(
                        {
                            "type": "scatter",
                            "mode": "lines+markers",
                            "name": f"{impl} · M={m}",
                            "legendgroup": impl,
                            "xaxis": f"x{suffix}",
                            "yaxis": f"y{suffix}",
                            "x": [r.N for r in pts],
                            "y": [r.GBps for r in pts],
                            "customdata": [[r.M, r.pct_of_ceiling, r.median_us] for r in pts],
                            "hovertemplate": f"{html.escape(impl)}<br>M=%{{customdata[0]}} N=%{{x}}<br>%{{y:.0f}} GB/s"
                            "<br>%{customdata[1]:.1f}% of ceiling<br>median %{customdata[2]:.2f} µs<extra></extra>",
                            "line": {"color": COLORS[ii % len(COLORS)], "dash": DASHES[mi % len(DASHES)]},
                        }
                    )
    # one legend entry per (impl, M) across panels
    seen: set[str] = set()
    for trace in data:
        trace["showlegend"] = trace["name"] not in seen
        seen.add(trace["name"])
    return {"data": data, "layout": layout}


def write_plot_html(run: Union[RunFile, dict], path: Union[str, Path]) -> Path:
    run = run if isinstance(run, RunFile) else RunFile.model_validate(run)
    script = plotly_js()
    spec = json.dumps(figure_spec(run)).replace("</", "<\\/")
    title = html.escape(f"RMSNorm bandwidth · {run.run.device.name} · {run.run.created_at}")
    ceiling = f"{run.run.ceiling_GBps:.0f} GB/s" if run.run.ceiling_GBps else "not measured"
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<script>{script}</script></head>
<body style="font-family: system-ui, sans-serif; margin: 1rem">
<h1 style="font-size: 1.2rem">{title}</h1>
<p>Effective bandwidth = minimum bytes of the pass / median time. Dashed line: measured copy ceiling
({html.escape(ceiling)}; {html.escape(run.run.ceiling_method)}). torch {html.escape(str(run.run.versions.get("torch")))},
triton {html.escape(str(run.run.versions.get("triton")))}, commit {html.escape(str(run.run.git_commit))}.</p>
<div id="chart" style="width: 100%"></div>
<script>const fig = {spec}; Plotly.newPlot("chart", fig.data, fig.layout, {{responsive: true}});</script>
</body></html>
"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
