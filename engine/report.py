"""The summary table printed at the end of ``rmsnorm-dash bench``: one table per (pass, dtype), a line per
shape, a column per implementation, each cell ``GB/s``, ``% of ceiling`` and the speedup over the run's
baseline (``1.23×``); the best of a shape is marked ★. Where the rows carry a host time (CUDA, event
timing), each implementation's column is followed by its ``host µs`` next to its GPU ``µs`` (``!`` where
the host takes longer than the GPU: CPU-bound there). Skipped and failed cases show ``skip``/``error``; a
row that failed the correctness gate shows ``wrong`` with its GB/s struck through, and is never ★ (the
reasons are in the result file)."""

from __future__ import annotations

from typing import Iterable, Optional

from rich.console import Console
from rich.table import Table

from engine.models import ResultRow, RunFile, RunHeader
from engine.summary import DEFAULT_BASELINE, shape_key, summarize

BEST = "★"


Shapes = dict[tuple[int, int], dict[str, ResultRow]]


def by_pass_and_shape(rows: Iterable[ResultRow]) -> dict[tuple[str, str], Shapes]:
    """(pass, dtype) → (M, N) → implementation → row, in the rows' order (both table kinds are laid out from it)."""
    groups: dict[tuple[str, str], Shapes] = {}
    for r in rows:
        groups.setdefault((r.pass_, r.dtype), {}).setdefault((r.M, r.N), {})[r.impl] = r
    return groups


def best_impl(by_impl: dict[str, ResultRow], columns: Optional[Iterable[str]] = None) -> Optional[str]:
    """The fastest ``ok`` implementation of one shape (the ★), or None when none measured. With ``columns`` (the
    table's implementations), a shape that lacks a row of any of them (a run cut short before reaching it) has no ★:
    the fastest of those that ran is not the fastest of the table."""
    if columns is not None and any(impl not in by_impl for impl in columns):
        return None
    ok = [r for r in by_impl.values() if r.status == "ok" and r.GBps is not None]
    return max(ok, key=lambda r: r.GBps).impl if ok else None


def measured_text(row: ResultRow) -> str:
    """An ok row's cell: ``GB/s (% of ceiling)``."""
    pct = f" ({row.pct_of_ceiling:.0f}%)" if row.pct_of_ceiling is not None else ""
    return f"{gbps_text(row.GBps)}{pct}"


def summary_tables(header: RunHeader, rows: Iterable[ResultRow], speedup: Optional[dict] = None) -> list[Table]:
    """``speedup``: the summary's ``speedup`` (``{"baseline", "by_shape"}``); without it none is shown."""
    rows = list(rows)
    impls = list(dict.fromkeys(r.impl for r in rows))
    groups = by_pass_and_shape(rows)
    ceiling = f"{gbps_text(header.ceiling_GBps)} GB/s" if header.ceiling_GBps else "not measured"
    by_shape = (speedup or {}).get("by_shape") or {}
    baseline = (speedup or {}).get("baseline") or DEFAULT_BASELINE
    tables = []
    for (pass_, dtype), shapes in groups.items():
        hosts = {i for by in shapes.values() for i, r in by.items() if _host(r) is not None and r.median_us}
        note = (
            f"; ×: speedup over {baseline}" if any(shape_key(pass_, dtype, m, n) in by_shape for m, n in shapes) else ""
        )
        table = Table(
            title=f"{pass_} · {dtype} · {header.device.name} · GB/s (% of copy ceiling {ceiling}){note}; "
            f"{BEST} best per shape" + ("; GPU µs / host µs (! host slower: CPU-bound)" if hosts else ""),
            title_justify="left",
        )
        table.add_column("M×N", justify="right", no_wrap=True)
        for impl in impls:
            table.add_column(impl, justify="right")
            if impl in hosts:
                table.add_column(f"{impl} µs/host", justify="right", style="dim")
        present = [i for i in impls if any(i in by for by in shapes.values())]
        for (m, n), by_impl in shapes.items():
            best = best_impl(by_impl, present)
            ratios = by_shape.get(shape_key(pass_, dtype, m, n), {})
            cells = []
            for impl in impls:
                r = by_impl.get(impl)
                cells.append(_cell(r, r is not None and r.impl == best, ratios.get(impl)) if impl in present else "")
                if impl in hosts:
                    cells.append(host_text(r))
            table.add_row(f"{m}×{n}", *cells)
        tables.append(table)
    return tables


def host_text(row: Optional[ResultRow]) -> str:
    """``GPU µs / host µs``, with ``!`` where the host time exceeds the GPU time."""
    host = _host(row)
    if host is None or not row.median_us:
        return ""
    flag = " !" if host > row.median_us else ""
    return f"{row.median_us:.1f}/{host:.1f}{flag}"


def _host(row: Optional[ResultRow]) -> Optional[float]:
    """A row's ``host_us`` (an extra field: CUDA event timing only; older files lack it)."""
    return getattr(row, "host_us", None) if row is not None else None


def gbps_text(value: float) -> str:
    """4 significant figures at most: ``3512``, ``15.1``, ``0.263``."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _cell(row: Optional[ResultRow], best: bool, ratio: Optional[float] = None) -> str:
    if row is None:
        return "[dim]not reached[/dim]"
    if row.status == "wrong":
        timed = f" [strike]{gbps_text(row.GBps)}[/strike]" if row.GBps else ""
        return f"[bold red]wrong[/bold red]{timed}"
    if row.status != "ok":
        return "[dim]skip[/dim]" if row.status == "skipped" else "[red]error[/red]"
    text = measured_text(row) + (f" {ratio:.2f}×" if ratio is not None else "")
    return f"[bold green]{BEST} {text}[/bold green]" if best else text


def print_summary(run: RunFile, console: Optional[Console] = None) -> None:
    console = console or Console()
    s = run.summary or {}
    for table in summary_tables(run.run, run.rows, s.get("speedup")):
        console.print(table)
    baseline = (s.get("speedup") or {}).get("baseline") or DEFAULT_BASELINE
    # files written before the standings existed: the same numbers from their rows
    standings = s.get("standings") if "standings" in s else summarize(run.rows, baseline=baseline)["standings"]
    for line in standings_lines(standings, baseline):
        console.print(line, soft_wrap=True)  # one line each: the terminal wraps it, a pipe or grep keeps it whole
    if s:
        note = "" if s.get("complete", True) else " (incomplete: cancelled)"
        console.print(
            f"{s.get('rows', 0)} cases: {s.get('ok', 0)} ok, {s.get('wrong', 0)} wrong, "
            f"{s.get('skipped', 0)} skipped, {s.get('error', 0)} error{note}"
        )
    for r in run.rows:
        if r.status == "wrong":
            console.print(f"[red]wrong[/red] {r.impl} {r.pass_} {r.dtype} {r.M}×{r.N}: {r.reason}")
    modes = {r.mode for r in run.rows if r.status == "ok"}
    if "interpreter" in modes:
        console.print("[yellow]Triton interpreter timings are CPU emulation, not kernel performance.[/yellow]")


PASS_WORDS = {"fwd": "forward", "bwd": "backward"}


def ratio_text(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.2f}×"


def standings_lines(standings: Optional[dict], baseline: str) -> list[str]:
    """The footer: per pass, each implementation's shapes won / measured and its geometric-mean speedups over the
    baseline and over the best peer (the summary's ``standings``; the dashboard's summary line says the same)."""
    lines = []
    for pass_, by_impl in (standings or {}).items():
        parts = [
            f"{impl} {s['won']}/{s['measured']} won, {ratio_text(s['vs_baseline'])} {baseline}, "
            f"{ratio_text(s['vs_best_peer'])} best peer"
            for impl, s in sorted(by_impl.items(), key=lambda kv: (-kv[1]["won"], kv[0]))
        ]
        lines.append(
            f"{PASS_WORDS.get(pass_, pass_)} (geomean GB/s ratios; best peer: the fastest other "
            f"implementation of each shape): " + "; ".join(parts)
        )
    return lines


def timing_note(rows) -> str:
    """What the times are, where they are not the default (CUDA events around eager launches)."""
    if any(getattr(r, "timing", None) == "cuda-graph" for r in rows):
        return (
            " **Timing: CUDA-graph replays** (`--cuda-graph`: launch overhead left out, a separate mode, not"
            " comparable with the event-timed tables)."
        )
    return ""


def markdown_tables(run: RunFile, dtypes: Optional[Iterable[str]] = None) -> str:
    """The same tables as Markdown (the README's results section is generated by this, never typed):
    GB/s and % of the run's copy ceiling per implementation and shape, best per shape in bold with ★ (only ``ok``
    rows: a ``wrong`` one shows its GB/s as failed, never bold)."""
    header = run.run
    rows = [r for r in run.rows if dtypes is None or r.dtype in set(dtypes)]
    impls = list(dict.fromkeys(r.impl for r in rows))
    groups = by_pass_and_shape(rows)
    versions = header.versions if isinstance(header.versions, dict) else dict(header.versions)
    out = [
        f"Measured on {header.device.name} on {header.created_at[:10]} by `rmsnorm-dash bench` "
        f"(torch {versions.get('torch')}, triton {versions.get('triton')}, commit {str(header.git_commit)[:10] if header.git_commit else 'not recorded'}); "
        f"copy ceiling {gbps_text(header.ceiling_GBps or 0)} GB/s. Cells: GB/s (% of ceiling); {BEST} best per shape."
        + timing_note(rows)
    ]
    for (pass_, dtype), shapes in groups.items():
        # an implementation that does not provide this pass (every row skipped) gets no column
        used = [i for i in impls if any(i in by and by[i].status != "skipped" for by in shapes.values())]
        out.append("")
        out.append(f"**{'forward' if pass_ == 'fwd' else 'backward'}, {dtype}**")
        out.append("")
        out.append("| M×N | " + " | ".join(used) + " |")
        out.append("|---:|" + "---:|" * len(used))
        for (m, n), by_impl in shapes.items():
            best = best_impl(by_impl, used)
            cells = []
            for impl in used:
                r = by_impl.get(impl)
                if r is None:
                    cells.append("not reached")
                elif r.status == "wrong":
                    cells.append(f"wrong ({gbps_text(r.GBps)}, failed the fp64 check)" if r.GBps else "wrong")
                elif r.status != "ok":
                    cells.append(r.status)
                else:
                    text = measured_text(r)
                    cells.append(f"**{BEST} {text}**" if impl == best else text)
            out.append(f"| {m}×{n} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
