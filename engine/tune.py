"""`rmsnorm-dash tune`: measure the Triton kernels' configurations on the GPU at hand over a grid of row widths
and row counts, and write that architecture's table (`rmsnorm_kernels/configs/<arch>.json`), which the kernels
read from the next start (`rmsnorm_kernels.kernel_config`: nearest neighbour for any other width).

For every kind (the forward and the three backward strategies), width and row count of the grid, the candidates
are the rule's configuration and its neighbours (`kernel_config.candidates`). The run has three steps:

1. **compile and check** every (kind, width, candidate) in a pool of processes, one per spare CPU core (Triton
   compiles on the host, one kernel per width and configuration: serially that alone would outlast the 15
   minutes a tune may take on a slow host); each compiled candidate runs once on small fresh inputs against the
   fp64 reference, and a candidate that fails to compile or is off the reference is dropped;
2. **time** each surviving candidate at every row count with the engine's timer (`engine.timing.measure`:
   rotating input sets or an L2 flush, a GPU spin ahead of each start event), then the best three again, in
   turn, and keep the fastest median (the rule's configuration unless beaten by more than `RULE_MARGIN`);
3. **write** the table: the winner per (kind, N, M) with its time and GB/s beside the rule's, the device, the
   versions, the grid and the date.

The tuning grid (`TUNE_WIDTHS`: seven layouts an octave) deliberately differs from the widths the checks scan
(every multiple of 256, model widths, random ones): the table is checked where it was not tuned."""

from __future__ import annotations

import concurrent.futures as futures
import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Callable, Optional

import torch

from engine import device as devices
from engine.byte_model import min_bytes
from engine.ceiling import measure_copy
from engine.timing import measure, needs_flush, rotating_sets
from rmsnorm_kernels import kernel_config
from rmsnorm_kernels.kernel_config import KINDS, candidates, config_from_dict, config_to_dict, rule

LAYOUT_STEPS = (1, 1.0625, 1.25, 1.375, 1.4375, 1.5, 1.75, 1.875)
"""Where in each octave the grid measures: one segment, two (1.0625, 1.25, 1.5), three (1.375, 1.75) and three with
the last masked (1.4375, 1.875): every `kernel_config.layout_class` twice an octave, so the lookup finds a width of
the same class within a third of an octave of any N (`kernel_config.CLASS_WINDOW`). 1.0625 is a second segment of a
sixteenth: 4352 and 8448 borrowed 5120's and 10240's configuration, made for a second segment of a quarter."""
UNALIGNED_WIDTHS = (
    *(301, 1001, 2999, 4999, 7001, 12001),
    *(302, 1002, 3002, 5002, 7002, 12002),
    *(300, 1004, 3004, 5004, 7004, 12004),
)
"""Rows that are not 16-byte aligned, each alignment its own class (`kernel_config.layout_class`): odd (2-byte
loads), N ≡ 2 mod 4 (4-byte loads) and N ≡ 4 mod 8 (8-byte loads). The scan's random widths 8298, 8450 and 15678
borrowed the odd widths' configuration and ran the persistent backward at 42–52 % of the copy ceiling, 0.70–0.76×
QuACK (H100, 2026-12-07). 300–302: short rows had no unaligned width, and the held-out odd 287 borrowed 272's
forward entry (16 rows a program, 16 warps): 27.5 % of the ceiling, 0.47× torch.compile (H100, 2026-12-07)."""
TUNE_WIDTHS = tuple(
    sorted({128, 16384, *UNALIGNED_WIDTHS, *(int((1 << a) * step) for a in range(8, 14) for step in LAYOUT_STEPS)})
)
"""68 widths: the layout classes of every octave from 256 to 16 K, and the unaligned ones."""
TUNE_M = (4096, 32768)
"""Two row counts, one on each side of the presets' 16384: the lookup takes the nearer one."""
QUICK_WIDTHS = (256, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
CHECK_ROWS = 64
"""Rows of the small inputs every candidate is checked on (M is a run-time argument: one compiled kernel serves
every M)."""
EPS = 1e-6
FIRST_REPS, FINAL_REPS, FINALISTS = 10, 30, 3
RULE_MARGIN = 0.01
"""A candidate replaces the rule's configuration only when it is faster by more than this: a win inside the
timer's noise at one row count need not hold at another (H100, 2026-12-07: at 3840 two programs an SM beat the
rule's one by 0.6 % at M = 32768; the scan then ran it 9 % slower at M = 16384 than the rule's)."""


def _inputs(m: int, n: int, dtype: torch.dtype, device, sets: int, seed: int):
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    xs = [torch.randn(m, n, dtype=dtype, device=device, generator=gen) for _ in range(sets)]
    dys = [torch.randn(m, n, dtype=dtype, device=device, generator=gen) for _ in range(sets)]
    w = (1 + 0.5 * torch.randn(n, device=device, generator=gen)).to(dtype)
    return xs, dys, w


def _runner(kind: str):
    """``run(x, dy, w, rstd, config)`` of one kind: the forward's y, or a strategy's (dx, dγ)."""
    from rmsnorm_kernels.triton_backward.atomic import atomic_backward
    from rmsnorm_kernels.triton_backward.persistent import persistent_backward
    from rmsnorm_kernels.triton_backward.workspace import workspace_backward
    from rmsnorm_kernels.triton_forward import rmsnorm_forward

    if kind == "fwd":
        return lambda x, dy, w, rstd, config: rmsnorm_forward(x, w, EPS, config=config)[0]
    strategy = {"persistent": persistent_backward, "workspace": workspace_backward, "atomic": atomic_backward}[kind]
    return lambda x, dy, w, rstd, config: strategy(dy, x, w, rstd, config=config)


def compile_and_check(job: tuple) -> tuple:
    """Pool worker: compile one (kind, N, config) by running it on fresh [CHECK_ROWS, N] inputs, and check it
    against the fp64 reference. Returns (job, None) or (job, the reason it is dropped)."""
    from rmsnorm_kernels.poison import poisoned_outputs
    from rmsnorm_kernels.reference import (
        dx_scale,
        relative_error,
        rmsnorm_backward_reference,
        rmsnorm_reference,
        tolerance_for,
    )
    from rmsnorm_kernels.triton_forward import rmsnorm_forward

    kind, n, config_dict, dtype_name, device = job
    try:
        dtype = getattr(torch, dtype_name)
        config = config_from_dict(kind, config_dict)
        xs, dys, w = _inputs(CHECK_ROWS if device != "cpu" else 3, n, dtype, device, 1, seed=n)
        x, dy = xs[0], dys[0]
        with poisoned_outputs():
            rstd = rmsnorm_forward(x, w, EPS)[2]
            out = _runner(kind)(x, dy, w, rstd, config)
        if device != "cpu":
            torch.cuda.synchronize()
        if kind == "fwd":
            err = relative_error(out, rmsnorm_reference(x, w, EPS)[0])
        else:
            dx_ref, dw_ref = rmsnorm_backward_reference(x, w, dy, EPS)
            err = max(relative_error(out[0], dx_ref, dx_scale(x, w, dy)), relative_error(out[1], dw_ref))
        if not err <= tolerance_for(dtype):
            return job, f"off the fp64 reference: relative error {err:.2e}"
        return job, None
    except Exception as exc:  # a configuration the compiler or the device refuses is dropped, with why
        return job, f"{type(exc).__name__}: {str(exc)[:200]}"


class _Calls:
    """A workload of the engine's timer: ``fn(k)`` on rotating input set k."""

    def __init__(self, fn: Callable[[int], object], sets: int):
        self.fn, self.sets = fn, sets

    def context(self):
        return torch.no_grad()

    def before(self, i: int) -> None:
        pass

    def call(self, i: int) -> None:
        self.fn(i % self.sets)

    def check(self) -> None:
        pass


def _time_candidates(kind, m, n, dtype, configs, l2_bytes, device, seed) -> dict:
    """Median µs of each configuration at [m, n]: every one once, then the fastest FINALISTS twice more in turn."""
    from rmsnorm_kernels.triton_forward import rmsnorm_forward

    tensors = 2 if kind == "fwd" else 3
    set_bytes = tensors * m * n * torch.finfo(dtype).bits // 8
    sets = rotating_sets(set_bytes, l2_bytes, max_sets=4)
    flush = (
        torch.empty(2 * l2_bytes // 4 + 1, dtype=torch.int32, device=device)
        if needs_flush(sets, set_bytes, l2_bytes)
        else None
    )
    xs, dys, w = _inputs(m, n, dtype, device, sets, seed)
    with torch.no_grad():
        rstds = [rmsnorm_forward(x, w, EPS)[2] for x in xs]
    run = _runner(kind)

    def timed(config, reps):
        workload = _Calls(lambda k: run(xs[k], dys[k], w, rstds[k], config), sets)
        return measure(workload, reps, 3, device, flush).median_us

    times = {c: timed(c, FIRST_REPS) for c in configs}
    finalists = sorted(times, key=times.get)[:FINALISTS]
    rounds = {c: [times[c]] for c in finalists}
    for _ in range(2):
        for c in finalists:
            rounds[c].append(timed(c, FINAL_REPS))
    for c in finalists:
        times[c] = sorted(rounds[c])[len(rounds[c]) // 2]
    return times


def compile_all(jobs: list, workers: int, say: Callable[[str], None] = print) -> dict:
    """`compile_and_check` every job: in ``workers`` spawned processes (0: in this one). Returns the dropped
    jobs as {(kind, N, config as JSON): reason}."""
    started = time.monotonic()
    dropped: dict = {}

    def note(done, job, reason):
        if reason:
            dropped[(job[0], job[1], json.dumps(job[2], sort_keys=True))] = reason
        if done % 100 == 0 or done == len(jobs):
            say(f"  compiled {done}/{len(jobs)} ({len(dropped)} dropped, {time.monotonic() - started:.0f} s)")

    if workers <= 0:
        for done, job in enumerate(jobs, 1):
            note(done, *compile_and_check(job))
        return dropped
    context = multiprocessing.get_context("spawn")  # each worker opens its own CUDA context
    with futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        for done, (job, reason) in enumerate(pool.map(compile_and_check, jobs, chunksize=4), 1):
            note(done, job, reason)
    return dropped


def winner(times: dict, rule_config):
    """The fastest configuration of ``times`` (configuration → µs), unless the rule's (when timed) is within
    `RULE_MARGIN` of it."""
    best = min(times, key=times.get)
    rule_us = times.get(rule_config)
    return rule_config if rule_us is not None and rule_us <= times[best] * (1 + RULE_MARGIN) else best


def _tune_point(kind, m, n, dtype: str, configs, l2_bytes, device, seed) -> dict:
    """One (kind, N, M) of the grid: every configuration timed, the winner's entry beside the rule's figures."""
    times = _time_candidates(kind, m, n, getattr(torch, dtype), configs, l2_bytes, device, seed)
    rule_config = rule(kind, n)
    best = winner(times, rule_config)
    nbytes = min_bytes("fwd" if kind == "fwd" else "bwd", m, n, dtype)
    rule_us = times.get(rule_config)
    return {
        "N": n,
        "M": m,
        "config": config_to_dict(best),
        "us": round(times[best], 3),
        "GBps": round(nbytes / times[best] / 1e3, 1),
        "rule_us": None if rule_us is None else round(rule_us, 3),
        "rule_GBps": None if rule_us is None else round(nbytes / rule_us / 1e3, 1),
        "candidates": len(times),
    }


def tune(
    widths=TUNE_WIDTHS,
    ms=TUNE_M,
    kinds=KINDS,
    dtype: str = "bfloat16",
    workers: Optional[int] = None,
    say: Callable[[str], None] = print,
    command: str = "rmsnorm-dash tune",
    device: str = "cuda",
) -> dict:
    """Tune on the current CUDA device; returns the table document (`kernel_config.parse_table` reads it).
    ``device="cpu"`` runs the whole procedure under Triton's interpreter on tiny problems (the tests): its
    numbers mean nothing."""
    if device != "cpu" and not torch.cuda.is_available():
        raise RuntimeError("rmsnorm-dash tune needs a CUDA (or ROCm) GPU: it measures the kernels on the card at hand")
    from rmsnorm_kernels.triton_mode import arch

    started = time.monotonic()
    device = torch.device("cpu") if device == "cpu" else torch.device("cuda", torch.cuda.current_device())
    jobs = [
        (kind, n, config_to_dict(c), dtype, device.type) for kind in kinds for n in widths for c in candidates(kind, n)
    ]
    workers = max(1, (os.cpu_count() or 2) - 1) if workers is None else workers
    say(
        f"compiling and checking {len(jobs)} configurations ({len(kinds)} kinds × {len(widths)} widths) "
        f"in {workers or 'this'} process{'es' if workers > 1 else ''}"
    )
    dropped = compile_all(jobs, workers, say)
    info = devices.describe(device)
    ceiling = measure_copy(device, nbytes=None if device.type == "cuda" else 1 << 20)
    entries: dict = {kind: [] for kind in kinds}
    complete = True
    try:
        for step, (kind, n, m) in enumerate(((k, n, m) for k in kinds for n in widths for m in ms), 1):
            label = f"  [{step}/{len(kinds) * len(widths) * len(ms)}] {kind} {m}x{n}"
            configs = [
                c
                for c in candidates(kind, n)
                if (kind, n, json.dumps(config_to_dict(c), sort_keys=True)) not in dropped
            ]
            if not configs:
                say(f"{label}: every candidate dropped; the rule stays")
                continue
            entry = _tune_point(kind, m, n, dtype, configs, info.l2_bytes, device, step)
            entries[kind].append(entry)
            rule_part = f", rule {entry['rule_GBps']:.0f}" if entry["rule_GBps"] else ""
            say(
                f"{label}: {entry['GBps']:.0f} GB/s ({100 * entry['GBps'] / ceiling.GBps:.0f} %){rule_part} "
                f"of {entry['candidates']}: {entry['config']}"
            )
    except KeyboardInterrupt:  # a time limit: keep what was measured, marked incomplete
        complete = False
        say("interrupted: the table holds the entries measured so far")
    elapsed = time.monotonic() - started
    say(f"tuned in {elapsed:.0f} s")
    return {
        "schema": 1,
        "arch": arch(device),
        "device": info.name,
        "sm_count": info.sm_count,
        "capability": info.capability,
        "created_at": devices.utc_now_iso(),
        "versions": devices.versions(),
        "git_commit": devices.git_commit(),
        "command": command,
        "dtype": dtype,
        "ceiling_GBps": round(ceiling.GBps, 1),
        "grid": {"N": list(widths), "M": list(ms), "kinds": list(kinds)},
        "seconds": round(elapsed, 1),
        "complete": complete,
        "dropped": [{"kind": k, "N": n, "config": json.loads(c), "reason": r} for (k, n, c), r in dropped.items()],
        "entries": entries,
    }


def carry_over(document: dict, previous: Optional[dict], other_widths: bool = False) -> dict:
    """A tune of some kinds only keeps the other kinds' entries of the table it replaces (``previous``, a table
    document of the same architecture), each noted under ``carried_over`` with the device and date that made them:
    that table's, or, for entries it had itself carried over, theirs. Its ``kept_entries`` notes go with the kinds
    they are about; nothing is noted of a kind tuned now. ``other_widths`` (a tune of some widths, ``--widths``):
    the kinds tuned now also keep the entries at widths this tune did not measure, noted with those widths, so that a
    tune of a few widths mends the table instead of replacing it."""
    if not previous or previous.get("arch") != document["arch"]:
        return document
    tuned, widths = set(document["grid"]["kinds"]), set(document["grid"]["N"])

    def measured(kind: str, n: int) -> bool:  # by this tune: its entry replaces the old one
        return kind in tuned and (not other_widths or n in widths)

    kept = {}
    for kind, rows in (previous.get("entries") or {}).items():
        rows = [e for e in rows or [] if not measured(kind, e["N"])]
        if rows:
            kept[kind] = rows
    if not kept:
        return document
    origin = {
        "device": previous.get("device"),
        "created_at": previous.get("created_at"),
        "git_commit": previous.get("git_commit"),
        "grid_N": len((previous.get("grid") or {}).get("N") or []),
    }
    earlier = previous.get("carried_over") or {}
    old_notes = previous.get("kept_entries") or {}
    entries, carried, notes = dict(document["entries"]), {}, {}
    for kind, rows in kept.items():
        if kind not in tuned:
            entries[kind], carried[kind] = rows, earlier.get(kind, origin)
            if kind in old_notes:
                notes[kind] = old_notes[kind]
            continue
        # a kind tuned at some widths: its other widths' entries, and a note about entries kept by hand there
        entries[kind] = sorted(rows + list(entries.get(kind) or []), key=lambda e: (e["N"], e["M"]))
        carried[kind] = {**earlier.get(kind, origin), "widths": sorted({e["N"] for e in rows})}
        still = [n for n in (old_notes.get(kind) or {}).get("widths", []) if n not in widths]
        if still:
            notes[kind] = {**old_notes[kind], "widths": still}
    return {
        **document,
        "entries": entries,
        "carried_over": carried,
        **({"kept_entries": notes} if notes else {}),
    }


def write_table(document: dict, path: Optional[str] = None) -> Path:
    """Write the table where the kernels look for it (or ``path``); returns the path."""
    kernel_config.parse_table(document, "tuned")  # what is written must read back
    target = Path(path) if path else kernel_config.table_path(document["arch"])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=1) + "\n")
    return target


def warm(
    widths,
    ms=(16384,),
    kinds=KINDS,
    dtype: str = "bfloat16",
    workers: Optional[int] = None,
    say: Callable[[str], None] = print,
) -> dict:
    """Compile (and check) the configurations in force at ``widths`` × ``ms`` in parallel, so that a sweep that
    follows finds them in Triton's cache instead of compiling one width after another. Returns the dropped ones."""
    from rmsnorm_kernels.triton_mode import arch

    device = torch.device("cuda", torch.cuda.current_device())
    jobs = list(
        dict.fromkeys(
            (kind, n, _frozen(config_to_dict(kernel_config.config_for(kind, n, m, arch(device)))), dtype, "cuda")
            for kind in kinds
            for n in widths
            for m in ms
        )
    )
    workers = max(1, (os.cpu_count() or 2) - 1) if workers is None else workers
    say(f"warming {len(jobs)} configurations in {workers} processes")
    return compile_all([(k, n, dict(c), d, dev) for k, n, c, d, dev in jobs], workers, say)


def _frozen(d: dict) -> tuple:
    return tuple(sorted(d.items()))
