"""The commands of ``rmsnorm-dash`` that read result files: ``table``, ``compare``, ``plot`` and ``merge`` (the parser
that dispatches to them is rmsnorm_dash.cli). Each gets its subparser, so errors name the subcommand."""

from __future__ import annotations

import argparse
from pathlib import Path


def _wide_console():
    """Rich's console; 160 columns when writing to a file or pipe (rich would assume 80)."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)


def _read_run_file(parser: argparse.ArgumentParser, path: Path):
    from pydantic import ValidationError

    from engine.models import RunFile, format_validation_error

    try:
        return RunFile.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        parser.error(f"cannot read {path}: {exc.strerror or exc}")
    except ValidationError as exc:
        parser.error(f"{path} is not a result file:\n" + format_validation_error(exc)[:2000])


def cmd_table(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from engine.report import markdown_tables, print_summary

    runs = sorted((_read_run_file(parser, path) for path in args.files), key=lambda run: run.run.created_at)
    for i, run in enumerate(runs):
        if args.markdown:
            print(("\n" if i else "") + markdown_tables(run, args.dtype), end="")
            continue
        if args.dtype:
            run = run.model_copy(update={"rows": [r for r in run.rows if r.dtype in set(args.dtype)]})
        print_summary(run, _wide_console())
    return 0


def cmd_compare(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Exit 0: every ratio at or above ``--fail-below``; 1: some below, or nothing measured in both (a CI gate
    must not pass on no data); 2: bad files or mixed timing modes."""
    import json

    from engine.compare import MixedTiming, below, compare_runs, format_comparison

    base, new = _read_run_file(parser, args.base), _read_run_file(parser, args.new)
    try:
        doc = compare_runs(base, new, allow_mixed_timing=args.allow_mixed_timing)
    except MixedTiming as exc:
        parser.error(str(exc))
    print(json.dumps(doc, indent=1) if args.json else format_comparison(doc, args.fail_below))
    return 1 if below(doc, args.fail_below) or not doc["rows"] else 0


def cmd_plot(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from engine.plot import PlotlyUnavailable, write_plot_html

    run = _read_run_file(parser, args.file)
    out = args.out or args.file.with_suffix(".html")
    try:
        print(f"wrote {write_plot_html(run, out)}")
    except PlotlyUnavailable as exc:
        parser.error(str(exc))
    return 0


def cmd_merge(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from engine.merge import merge_runs

    try:
        merged = merge_runs([_read_run_file(parser, path) for path in args.files])
    except ValueError as exc:
        parser.error(str(exc))
    try:
        args.out.write_text(merged.model_dump_json(indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        parser.error(f"cannot write {args.out}: {exc.strerror or exc}")
    s = merged.summary
    print(f"wrote {args.out}: {s['rows']} rows ({s['ok']} ok), {'complete' if s['complete'] else 'incomplete'}")
    return 0
