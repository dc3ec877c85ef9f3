"""Helpers the chart tests share: committed runs, opening a run from History, reading what plotly drew."""

import json
import math
from collections import Counter

from browser_paths import COMMITTED_RESULTS
from history_helpers import click_and_wait


def committed_docs():
    return [json.loads(path.read_text()) for path in COMMITTED_RESULTS]


def biggest_committed():
    """The committed result file with the most rows (the H200 sweep: 9 implementations, 2 dtypes, 3 M)."""
    return max(committed_docs(), key=lambda d: len(d["rows"]))


def default_m(rows, dtype):
    """The M the charts open a stored run at (static/js/charts.js): the one with the most timed rows of that dtype,
    the largest on a tie."""
    counts = Counter(
        r["M"]
        for r in rows
        if r["status"] in ("ok", "wrong")
        and r["dtype"] == dtype
        and r["median_us"] is not None
        and math.isfinite(r["median_us"])
    )
    return max(counts, key=lambda m: (counts[m], m))


def open_run(page, run_id):
    click_and_wait(page, run_id)
    page.wait_for_function(
        "(id) => document.querySelector(`#history-table tbody tr[data-run-id='${id}'].shown`)"
        " && +document.querySelector('#chart-fwd').dataset.points + +document.querySelector('#chart-bwd').dataset.points > 0",
        arg=run_id,
    )


def set_filters(page, dtype="all", m="all"):
    page.select_option("#chart-dtype", dtype)
    page.select_option("#chart-m", m)
    page.wait_for_function(
        "([d, m]) => document.querySelector('#chart-dtype').value === d && document.querySelector('#chart-m').value === m",
        arg=[dtype, m],
    )


def drawn(page, panel):
    """Every trace of a panel: name, meta, marker, x, y, error bars, customdata."""
    return page.evaluate(
        """(panel) => document.getElementById('chart-' + panel).data.map((t) => ({
             name: t.name, meta: t.meta || null, x: t.x, y: t.y, marker: t.marker || null,
             error_y: t.error_y || null, customdata: t.customdata || null, mode: t.mode, type: t.type}))""",
        panel,
    )


def stars(page, panel):
    """The ★ of a panel (one text trace): [{"impl", "dtype", "M", "N", "x", "y", "text"}]."""
    return page.evaluate(
        """(panel) => document.getElementById('chart-' + panel).data
             .filter((t) => t.meta && t.meta.kind === 'stars')
             .flatMap((t) => t.meta.best.map((name, i) => {
               const [impl, dtype, M, N] = name.split('|');
               return {impl, dtype, M: +M, N: +N, x: t.x[i], y: t.y[i], text: t.text[i]}; }))""",
        panel,
    )


def layout(page, panel):
    return page.evaluate(
        """(panel) => { const l = document.getElementById('chart-' + panel).layout;
             return {yaxis: {type: l.yaxis.type}, plot_bgcolor: l.plot_bgcolor, title: l.title.text,
                     annotations: (l.annotations || []).map((a) => ({name: a.name || '', text: a.text, x: a.x, y: a.y}))}; }""",
        panel,
    )


def luminance(color: str) -> float:
    """WCAG relative luminance of "#rrggbb" or "rgb(r, g, b)"."""
    color = color.strip()
    if color.startswith("#"):
        h = color[1:]
        if len(h) == 3:
            h = "".join(c * 2 for c in h)
        rgb = [int(h[i : i + 2], 16) for i in (0, 2, 4)]
    else:
        rgb = [float(v) for v in color[color.index("(") + 1 : color.index(")")].split(",")[:3]]

    def lin(c):
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)
