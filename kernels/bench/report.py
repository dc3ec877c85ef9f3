"""The summary table printed at the end of ``rmsnorm-dash bench``: one table per (pass, dtype), a line per
shape, a column per implementation, each cell ``GB/s`` and ``% of ceiling``; the best of a shape is
marked ★. Skipped and failed cases show ``skip``/``error`` (the reasons are in the result file)."""

from __future__ import annotations

from typing import Iterable, Optional

from rich.console import Console
from rich.table import Table

from kernels.bench.models import ResultRow, RunFile, RunHeader

BEST = "★"


def summary_tables(header: RunHeader, rows: Iterable[ResultRow]) -> list[Table]:
    rows = list(rows)
    impls = list(dict.fromkeys(r.impl for r in rows))
    groups: dict[tuple[str, str], dict[tuple[int, int], dict[str, ResultRow]]] = {}
    for r in rows:
        groups.setdefault((r.pass_, r.dtype), {}).setdefault((r.M, r.N), {})[r.impl] = r
    ceiling = f"{gbps_text(header.ceiling_GBps)} GB/s" if header.ceiling_GBps else "not measured"
    tables = []
    for (pass_, dtype), shapes in groups.items():
        table = Table(
            title=f"{pass_} · {dtype} · {header.device.name} · GB/s (% of copy ceiling {ceiling}); {BEST} best per shape",
            title_justify="left",
        )
        table.add_column("M×N", justify="right", no_wrap=True)
        for impl in impls:
            table.add_column(impl, justify="right")
        for (m, n), by_impl in shapes.items():
            ok = [r for r in by_impl.values() if r.status == "ok" and r.GBps is not None]
            best = max(ok, key=lambda r: r.GBps).impl if ok else None
            cells = []
            for impl in impls:
                r = by_impl.get(impl)
                cells.append(_cell(r, r is not None and r.impl == best))
            table.add_row(f"{m}×{n}", *cells)
        tables.append(table)
    return tables


def gbps_text(value: float) -> str:
    """4 significant figures at most: ``3512``, ``15.1``, ``0.263``."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _cell(row: Optional[ResultRow], best: bool) -> str:
    if row is None:
        return ""
    if row.status != "ok":
        return "[dim]skip[/dim]" if row.status == "skipped" else "[red]error[/red]"
    pct = f" ({row.pct_of_ceiling:.0f}%)" if row.pct_of_ceiling is not None else ""
    text = f"{gbps_text(row.GBps)}{pct}"
    return f"[bold green]{BEST} {text}[/bold green]" if best else text


def print_summary(run: RunFile, console: Optional[Console] = None) -> None:
    console = console or Console()
    for table in summary_tables(run.run, run.rows):
        console.print(table)
    s = run.summary or {}
    if s:
        note = "" if s.get("complete", True) else " (incomplete: cancelled)"
        console.print(f"{s.get('rows', 0)} cases: {s.get('ok', 0)} ok, {s.get('skipped', 0)} skipped, {s.get('error', 0)} error{note}")
    modes = {r.mode for r in run.rows if r.status == "ok"}
    if "interpreter" in modes:
        console.print("[yellow]Triton interpreter timings are CPU emulation, not kernel performance.[/yellow]")
