"""``rmsnorm-dash``: the command line.

    rmsnorm-dash list                       the registry: every implementation, available here or why not
    rmsnorm-dash check [...]                correctness against the fp64 reference (engine.check)
    rmsnorm-dash bench [--impl a,b] [--pass fwd,bwd] [--dtype bf16,fp16] [--m 4096,...] [--n ...]
                       [--reps N] [--warmup N] [--device cpu|cuda|cuda:1] [--interpreter] [--cuda-graph]
                       [--preset models] [--profile] [--no-verify] [--baseline torch-native]
                       [--out FILE] [--plot FILE.html] [--plugin mod:obj] [--ceiling-bytes B]
    rmsnorm-dash compare BASE.json NEW.json [--fail-below 0.97] [--allow-mixed-timing] [--json]
                                            exit 1 when any NEW/BASE GB/s ratio is below the threshold
    rmsnorm-dash plot FILE.json --out FILE.html
    rmsnorm-dash table FILE.json [FILE.json ...] [--markdown] [--dtype bfloat16]
    rmsnorm-dash train-bench [...]          training-step time and loss of a small Llama (bench/train_bench.py)
    rmsnorm-dash serve [--host 127.0.0.1] [--port 8000] [--data DIR] [--devices cuda:0,cuda:1] [--ray ADDRESS]

Nothing heavy is imported at module level: torch, Triton and the engine load inside the commands, and the
web stack only inside ``serve``. Bad arguments exit with status 2 and a short message naming the field.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

CPU_DEFAULT_M = [256, 1024]
CPU_DEFAULT_N = [512, 2048]
CPU_DEFAULT_REPS = 20


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _int_list(text: str) -> list[int]:
    try:
        return [int(part.replace("_", ""), 0) for part in _csv(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _plugins(args: argparse.Namespace) -> list[str]:
    return [p for item in (getattr(args, "plugin", None) or []) for p in _csv(item)]


def _load_registry(parser: argparse.ArgumentParser, args: argparse.Namespace):
    from engine.catalog import load_registry

    try:
        return load_registry(_plugins(args))
    except (ValueError, TypeError) as exc:  # a bad --plugin / RMSNORM_PLUGINS path
        parser.error(str(exc))


from rmsnorm_dash.result_files import _wide_console, cmd_compare, cmd_merge, cmd_plot, cmd_table  # noqa: E402  (file-reading commands)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rmsnorm-dash",
        description="Fast RMSNorm kernels in Triton: list, check, benchmark, plot, serve the dashboard.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("list", help="the implementations this process knows, and whether each can run here")
    p.add_argument(
        "--plugin", action="append", help="module or module:object that registers implementations (repeatable)"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=cmd_list, subparser=p)

    sub.add_parser("check", help="check every implementation against the fp64 reference (engine.check)", add_help=False)

    p = sub.add_parser("bench", help="measure effective bandwidth against the measured copy ceiling")
    p.add_argument("--impl", type=_csv, help="implementations, comma-separated (default: every available one)")
    p.add_argument("--pass", dest="passes", type=_csv, help="fwd,bwd (default: both)")
    p.add_argument("--dtype", type=_csv, help="bf16,fp16,fp32 or torch names (default: bfloat16)")
    p.add_argument("--m", type=_int_list, help="rows, comma-separated (default: 4096,16384,65536; on CPU 256,1024)")
    p.add_argument("--n", type=_int_list, help="row lengths (default: 512..16384; on CPU 512,2048)")
    p.add_argument("--reps", type=int, help="timed repetitions per case (default 100; on CPU 20)")
    p.add_argument("--warmup", type=int, help="untimed warm-up repetitions (default 10)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:<index> (default: auto)")
    p.add_argument(
        "--interpreter",
        action="store_true",
        help="on CPU, run Triton kernels under Triton's interpreter (slow; labelled)",
    )
    p.add_argument(
        "--cuda-graph", action="store_true", help="time CUDA-graph replays (small problems; labelled cuda-graph)"
    )
    p.add_argument("--out", type=Path, help="result file (default on a GPU: results/<device-slug>-<date>.json)")
    p.add_argument("--plot", type=Path, help="also write a standalone plotly chart (HTML)")
    p.add_argument(
        "--plugin", action="append", help="module or module:object that registers implementations (repeatable)"
    )
    p.add_argument(
        "--ceiling-bytes", type=int, help="copy-ceiling buffer size in bytes (default 2 GiB GPU / 1 GiB CPU)"
    )
    p.add_argument(
        "--preset",
        help="a named shape preset (e.g. models: hidden sizes of real models); "
        "its M and N replace the defaults, --m/--n still win",
    )
    p.add_argument(
        "--random-widths",
        type=int,
        metavar="K",
        help="add K random widths (not multiples of 64) to N, drawn from --seed (recorded in the run)",
    )
    p.add_argument("--seed", type=int, help="seed of --random-widths (default: a fresh one, recorded in the run)")
    p.add_argument(
        "--profile", action="store_true", help="record each case's kernels with their times (torch.profiler)"
    )
    p.add_argument("--no-verify", action="store_true", help="skip the per-case check against the fp64 reference")
    p.add_argument("--baseline", help="implementation the speedups are relative to (default torch-native)")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure each shape's implementations this many times in turn (interleaved, 1-9); a row keeps "
        "its median round, every round's median listed (where noise decides who wins)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_bench, subparser=p)

    p = sub.add_parser("tune", help="tune the Triton kernels on this GPU over a grid of widths and write its table")
    p.add_argument(
        "--widths",
        type=_int_list,
        help="row widths to tune (default: engine.tune.TUNE_WIDTHS, 68 from 128 to 16384); the table in force keeps "
        "its entries at the other widths",
    )
    p.add_argument("--m", type=_int_list, help="row counts to tune (default: 4096,32768)")
    p.add_argument(
        "--kinds",
        type=_csv,
        help="fwd,persistent,workspace,atomic (default: all four); the table keeps the other kinds' entries",
    )
    p.add_argument(
        "--quick", action="store_true", help="9 widths instead of 49 (a first look, about a fifth of the time)"
    )
    p.add_argument("--dtype", default="bfloat16", help="dtype the kernels are timed in (default bfloat16)")
    p.add_argument("--workers", type=int, help="compile processes (default: CPU cores - 1)")
    p.add_argument(
        "--out", type=Path, help="table file (default: rmsnorm_kernels/configs/<arch>.json, read from the next start)"
    )
    p.add_argument(
        "--warm",
        action="store_true",
        help="only compile the configurations in force at --widths × --m "
        "in parallel (fills Triton's cache before a sweep); no timing, no table",
    )
    p.set_defaults(handler=cmd_tune, subparser=p)

    p = sub.add_parser("compare", help="NEW/BASE GB/s per shape and implementation of two result files")
    p.add_argument("base", type=Path, help="the base result file (JSON)")
    p.add_argument("new", type=Path, help="the new result file (JSON)")
    p.add_argument("--fail-below", type=float, default=0.97, help="exit 1 when any ratio is below this (default 0.97)")
    p.add_argument(
        "--allow-mixed-timing",
        action="store_true",
        help="compare runs timed in different modes (events vs cuda-graph) anyway",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON (the /api/compare document)")
    p.set_defaults(handler=cmd_compare, subparser=p)

    p = sub.add_parser("plot", help="write a standalone HTML chart of a result file")
    p.add_argument("file", type=Path, help="result file (JSON)")
    p.add_argument("--out", type=Path, help="HTML file (default: the result file with .html)")
    p.set_defaults(handler=cmd_plot, subparser=p)

    p = sub.add_parser("table", help="print a result file's summary tables (--markdown: as the README shows them)")
    p.add_argument("files", type=Path, nargs="+", metavar="FILE", help="result files (JSON), shown oldest run first")
    p.add_argument("--markdown", action="store_true", help="Markdown instead of a terminal table")
    p.add_argument("--dtype", type=_csv, help="only these dtypes (torch spelling), comma-separated")
    p.set_defaults(handler=cmd_table, subparser=p)

    p = sub.add_parser(
        "merge", help="one result file from a sweep measured in several launches (a cut-short run, resumed)"
    )
    p.add_argument(
        "files", type=Path, nargs="+", metavar="FILE", help="result files (JSON) of the same GPU, commit and table"
    )
    p.add_argument("--out", type=Path, required=True, help="the merged result file")
    p.set_defaults(handler=cmd_merge, subparser=p)

    p = sub.add_parser("serve", help="serve the dashboard and the API (needs the web extra)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--data", type=Path, help="data directory (SQLite store)")
    p.add_argument("--devices", help="devices to give a worker, e.g. cuda:0,cuda:1 or cpu*3")
    p.add_argument(
        "--plugin", action="append", help="module or module:object that registers implementations (repeatable)"
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the sweeps on the GPUs of a Ray cluster, one actor per GPU "
        "('auto': the cluster this machine is part of; needs the fleet extra); RMSNORM_RAY_ADDRESS too",
    )
    p.set_defaults(handler=cmd_serve, subparser=p)
    return parser


# -- list ---------------------------------------------------------------------------------------------
def cmd_list(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import json

    registry = _load_registry(parser, args)
    from engine.catalog import list_implementations

    entries = list_implementations(registry)
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    from rich.table import Table

    table = Table(title="RMSNorm implementations")
    for column in ("name", "passes", "family", "det.", "here", "description (or why it cannot run here)"):
        table.add_column(column, no_wrap=column != "description (or why it cannot run here)")
    for e in entries:
        available = "[green]yes[/green]" if e["available"] else "[red]no[/red]"
        text = e["description"] if e["available"] else f"[red]{e['reason']}[/red]"
        if e["source"] != "builtin":
            text += f" [dim]({e['source']})[/dim]"
        table.add_row(
            e["name"], ",".join(e["passes"]), e["family"], "yes" if e["deterministic"] else "no", available, text
        )
    _wide_console().print(table)
    return 0


# -- bench --------------------------------------------------------------------------------------------
def cmd_bench(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.interpreter:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports Triton
    registry = _load_registry(parser, args)

    from pydantic import ValidationError
    from rich.console import Console

    from engine import device as devices
    from engine.models import Sweep, format_validation_error

    console = Console(stderr=True)
    try:
        torch_device = devices.resolve(args.device)
    except (ValueError, RuntimeError) as exc:
        parser.error(f"--device: {exc}")
    on_cpu = torch_device.type == "cpu"
    request: dict = {"device": args.device, "triton_interpreter": bool(args.interpreter)}
    # each option given becomes its field of the sweep (the same body POST /benchmark takes)
    request.update(
        {
            field: value
            for field, value in (
                ("implementations", args.impl),
                ("passes", args.passes),
                ("dtypes", args.dtype),
                ("M", args.m),
                ("N", args.n),
                ("repetitions", args.reps),
                ("warmup", args.warmup),
                ("preset", args.preset),
                ("baseline", args.baseline),
                ("random_widths", args.random_widths),
                ("seed", args.seed),
            )
            if value is not None
        }
    )
    request.update(
        {
            field: value
            for flag, field, value in (
                (args.cuda_graph, "timing", "cuda-graph"),
                (args.profile, "profile", True),
                (args.no_verify, "verify", False),
            )
            if flag
        }
    )
    if on_cpu:
        notes = []
        if args.m is None and args.preset is None:
            request["M"] = CPU_DEFAULT_M
            notes.append(f"M {','.join(map(str, CPU_DEFAULT_M))}")
        if args.n is None and args.preset is None:
            request["N"] = CPU_DEFAULT_N
            notes.append(f"N {','.join(map(str, CPU_DEFAULT_N))}")
        if args.reps is None:
            request["repetitions"] = CPU_DEFAULT_REPS
            notes.append(f"{CPU_DEFAULT_REPS} repetitions")
        if notes:
            console.print(
                f"[yellow]No GPU: using small CPU defaults ({', '.join(notes)}); pass --m/--n/--reps to change them. "
                "CPU numbers are not GPU performance.[/yellow]"
            )
    try:
        sweep = Sweep.model_validate(request, context={"registry": registry})
    except ValidationError as exc:
        parser.error("invalid benchmark request:\n" + format_validation_error(exc))
    if args.plot is not None:
        from engine.plot import PlotlyUnavailable, plotly_js

        try:
            plotly_js()
        except PlotlyUnavailable as exc:
            parser.error(f"--plot: {exc}")

    from engine.runner import iter_run, plan
    from engine.models import RunFile
    from engine.report import print_summary
    from engine.rounds import MAX_ROUNDS, interleave, merge_rounds
    from engine.summary import summarize

    if not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--rounds: 1 to {MAX_ROUNDS}, not {args.rounds}")
    cases = plan(sweep, registry)
    total = len(cases)
    measured = interleave(cases, args.rounds)
    console.print(
        f"{total} cases{f' × {args.rounds} interleaved rounds' if args.rounds > 1 else ''} on "
        f"{args.device if args.device != 'auto' else torch_device}; measuring the copy ceiling first …"
    )
    rows = []
    rounds_of: dict = {}  # case → its rows so far, while it has fewer than --rounds
    header = None
    progress = None
    task = None
    if not args.quiet:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )

    def run_file() -> RunFile:
        every = rows + [merge_rounds(r) for r in rounds_of.values()]  # cases cut short keep the rounds they had
        complete = len(rows) == total and not rounds_of
        return RunFile(run=header, rows=every, summary=summarize(every, complete=complete, baseline=sweep.baseline))

    out = args.out
    last_checkpoint = time.monotonic()
    try:
        if progress is not None:
            progress.start()
            task = progress.add_task("ceiling", total=len(measured))
        for item in iter_run(sweep, registry=registry, ceiling_bytes=args.ceiling_bytes, cases=measured):
            if header is None:
                header = item
                if args.rounds > 1:
                    header.sweep["rounds"] = args.rounds
                if out is None and not on_cpu:
                    out = default_result_path(header)
                if progress is not None:
                    progress.update(task, description="benchmark")
                console.print(f"copy ceiling: {header.ceiling_GBps or 0:.1f} GB/s ({header.ceiling_method})")
                continue
            if args.rounds > 1:
                key = item.case().label()
                rounds_of.setdefault(key, []).append(item)
                if len(rounds_of[key]) == args.rounds:
                    rows.append(merge_rounds(rounds_of.pop(key)))
            else:
                rows.append(item)
            if progress is not None:
                progress.update(task, advance=1, description=f"{item.impl} {item.pass_} {item.dtype} {item.M}×{item.N}")
            if out is not None and time.monotonic() - last_checkpoint >= CHECKPOINT_S:
                # the rows so far, marked incomplete: a run that is killed (not only interrupted) keeps them
                write_result_file(out, run_file())
                last_checkpoint = time.monotonic()
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: keeping the rows measured so far[/yellow]")
    finally:
        if progress is not None:
            progress.stop()
    if header is None:
        return 130
    run = run_file()
    print_summary(run, _wide_console())

    if out is not None:
        write_result_file(out, run)
        console.print(f"wrote {out}")
    else:
        console.print("CPU run: no result file written (pass --out FILE to keep it)")
    if args.plot is not None:
        from engine.plot import write_plot_html

        console.print(f"wrote {write_plot_html(run, args.plot)}")
    return 0 if run.summary["complete"] else 130


CHECKPOINT_S = 30.0
"""While a sweep with a result file runs, the rows so far are written to it at most this often (seconds)."""


def write_result_file(path: Path, run) -> None:
    """Write a result file whole or not at all (a temporary file beside it, then renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(run.model_dump_json(indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def default_result_path(header, results_dir: Path = Path("results")) -> Path:
    """``results/<device-slug>-<date>.json``; a second run on the same day gets the time appended."""
    from engine.device import slug

    date = header.created_at[:10]
    path = results_dir / f"{slug(header.device)}-{date}.json"
    if path.exists():
        path = results_dir / f"{slug(header.device)}-{date}-{header.created_at[11:19].replace(':', '')}.json"
    return path


# -- serve --------------------------------------------------------------------------------------------
def cmd_tune(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from engine.models import normalise_dtype
    from engine.tune import KINDS, QUICK_WIDTHS, TUNE_M, TUNE_WIDTHS, tune, warm, write_table

    kinds = tuple(args.kinds or KINDS)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; known: {', '.join(KINDS)}")
    try:
        dtype = normalise_dtype(args.dtype)
    except ValueError as exc:
        parser.error(f"--dtype: {exc}")
    widths = tuple(args.widths or (QUICK_WIDTHS if args.quick else TUNE_WIDTHS))
    if args.warm:
        dropped = warm(widths, tuple(args.m or (16384,)), kinds, dtype, args.workers)
        for (kind, n, config), reason in dropped.items():
            print(f"  {kind} N={n} {config}: {reason}")
        return 1 if dropped else 0
    command = "rmsnorm-dash tune " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "rmsnorm-dash tune"
    try:
        document = tune(widths, tuple(args.m or TUNE_M), kinds, dtype, args.workers, command=command.strip())
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if set(kinds) != set(KINDS) or args.widths:  # what this tune did not measure keeps the table in force's entries
        from engine.tune import carry_over
        from rmsnorm_kernels import kernel_config

        source = kernel_config.table_source(document["arch"])
        if source is not None and source.exists():
            document = carry_over(document, json.loads(source.read_text()), other_widths=bool(args.widths))
            for kind, origin in (document.get("carried_over") or {}).items():
                where = f" at {len(origin['widths'])} widths not tuned now" if "widths" in origin else ""
                print(
                    f"  {kind}: entries{where} carried over from {source} ({origin['device']}, {origin['created_at']})"
                )
    print(f"wrote {write_table(document, args.out)}")
    return 0


def cmd_serve(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        from app.main import serve
    except ImportError as exc:
        parser.error(f"serve needs the web extra (pip install 'rmsnorm-dashboard[web]'): {exc}")
    kwargs = {"host": args.host, "port": args.port, "data_dir": args.data, "devices": args.devices}
    if args.ray:
        kwargs["ray_address"] = args.ray
    plugins = _plugins(args)
    if plugins:
        kwargs["plugins"] = plugins
    from app.fleet import FleetUnavailable

    try:
        serve(**kwargs)
    except FleetUnavailable as exc:  # --ray: no Ray here, nothing at that address, or a cluster without GPUs
        print(f"rmsnorm-dash serve: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from engine.device import use_triton_interpreter_without_gpu

    # Before Triton is first imported: without a GPU, Triton kernels can only run in its interpreter, so `list`
    # shows them as available (and `bench` still skips them unless --interpreter asks for those slow timings).
    use_triton_interpreter_without_gpu()
    if argv and argv[0] == "check":  # its own parser, written with the kernels
        from engine.check import check_main

        return int(check_main(argv[1:]) or 0)
    if argv and argv[0] == "train-bench":  # its own parser: bench/train_bench.py (a script, not a package)
        import runpy

        script = Path(__file__).resolve().parents[1] / "bench" / "train_bench.py"
        return int(runpy.run_path(str(script), run_name="train_bench")["main"](argv[1:]) or 0)
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.handler(args.subparser, args) or 0)  # the subparser, so errors name the subcommand


if __name__ == "__main__":
    raise SystemExit(main())
