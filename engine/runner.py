"""The benchmark engine: a sweep becomes cases, each case becomes one `ResultRow`, one at a time.

    plan(sweep)                     -> [Case, ...]   dtype → pass → M → N → implementation, so all
                                                     implementations of one shape are measured together
    DeviceBench(device).run_case(case, ...) -> ResultRow   never raises for a kernel's failure
    iter_run(sweep, ...)            -> RunHeader, then one ResultRow per case (a generator: the CLI prints it,
                                       the service's worker process streams it; ``cancel`` is checked
                                       between cases; ``cases`` may be any iterable, e.g. fed over a pipe)
    error_row(case, reason, ...)    -> the ``error`` row of a case never measured (engine.rows)
    run_sweep(sweep, ...)           -> RunFile (header, rows, summary)

A case is skipped, with its reason, BEFORE anything is allocated when: the implementation is not
registered or not available here, it does not provide the pass or does not take the shape (its ``supports``), it is a Triton kernel on CPU and the
Triton interpreter was not asked for (or was not switched on before Triton was imported), cuda-graph
timing is asked for on CPU, or the memory estimate (engine.memory) exceeds the free memory. A
failure while running (an exception from the kernel, a wrong output shape, out of memory) makes an
``error`` row with the reason; the next case still runs.

Before timing, unless the sweep says ``verify: false``, the correctness gate (engine.verify) runs the
implementation once on the case's own inputs against the fp64 reference: a case that fails it is still
timed but its row is ``wrong`` (never ranked best). With ``profile: true`` the timed case is then profiled
(engine.profile) and the row carries its kernel breakdown. Both stay outside the timed region.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
import uuid
import zlib
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sized, Union

import torch

from engine import device as devices
from engine import memory
from engine.admission import refusal, size_sets
from engine.byte_model import actual_bytes, element_size, min_bytes
from engine.ceiling import Ceiling, measure_copy
from rmsnorm_kernels import native
from engine.models import Case, ResultRow, RunFile, RunHeader, Sweep
from engine.profile import profile_workload
from engine.rows import error_row, finite as _finite, short as _short  # noqa: F401  (error_row: public here)
from engine.summary import summarize
from engine.timing import (
    EPS,
    BackwardWorkload,
    ForwardWorkload,
    measure,
    measure_cuda_graph,
    random_inputs,
)
from engine.verify import Verdict, verify
from rmsnorm_kernels.registry import Implementation, Registry, default_registry
from rmsnorm_kernels.triton_mode import INTERPRETER_SM_COUNT

TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def _validated(sweep: Union[Sweep, Mapping[str, Any]], registry: Registry) -> Sweep:
    if isinstance(sweep, Sweep):
        return sweep
    return Sweep.model_validate(dict(sweep), context={"registry": registry})


def resolve_implementations(sweep: Sweep, registry: Registry) -> list[str]:
    """The sweep's list, or every registered implementation available in this process."""
    if sweep.implementations is not None:
        return list(sweep.implementations)
    return [impl.name for impl in registry if impl.unavailable_reason() is None]


def plan(sweep: Union[Sweep, Mapping[str, Any]], registry: Optional[Registry] = None) -> list[Case]:
    registry = default_registry() if registry is None else registry
    sweep = _validated(sweep, registry)
    names = resolve_implementations(sweep, registry)
    return [
        Case(impl=name, pass_=pass_, dtype=dtype, M=m, N=n)
        for dtype in sweep.dtypes
        for pass_ in sweep.passes
        for m in sweep.M
        for n in sweep.N
        for name in names
    ]


class _Outcome:
    """What `DeviceBench._measure` found, kept even when a later step raises."""

    def __init__(self) -> None:
        self.verdict: Optional[Verdict] = None
        self.stats = None
        self.profile: Optional[dict] = None
        self.profile_error: Optional[str] = None
        self.stage = "input allocation"


class DeviceBench:
    """Measures cases on one device. The copy ceiling is measured once per DeviceBench, on first use."""

    def __init__(self, device: str = "auto", ceiling_bytes: Optional[int] = None, registry: Optional[Registry] = None):
        self.device = devices.resolve(device)
        self.info = devices.describe(self.device)
        self.registry = default_registry() if registry is None else registry
        self.ceiling_bytes = ceiling_bytes
        self._ceiling: Optional[Ceiling] = None
        self._ceiling_error: Optional[str] = None

    # -- ceiling -------------------------------------------------------------------------------------
    def ceiling(self) -> Optional[Ceiling]:
        """The measured copy ceiling (None if it could not be measured; see `ceiling_method`)."""
        if self._ceiling is None and self._ceiling_error is None:
            try:
                with self._on_device():
                    self._ceiling = measure_copy(self.device, self.ceiling_bytes)
            except Exception as exc:  # a ceiling that cannot be measured must not stop the run
                self._ceiling_error = _short(exc)
        return self._ceiling

    def adopt_ceiling(self, ceiling: Ceiling) -> None:
        """Use a ceiling measured before on this device (a restarted service worker reuses its predecessor's)."""
        self._ceiling, self._ceiling_error = ceiling, None

    @property
    def ceiling_method(self) -> str:
        c = self.ceiling()
        return c.method if c is not None else f"not measured: {self._ceiling_error}"

    def _on_device(self):
        return torch.cuda.device(self.device) if self.device.type == "cuda" else contextlib.nullcontext()

    def free_memory(self) -> int:
        return devices.free_memory_bytes(self.device)

    # -- one case ------------------------------------------------------------------------------------
    def run_case(
        self,
        case: Case,
        repetitions: int = 100,
        warmup: int = 10,
        timing: str = "events",
        run_id: str = "",
        triton_interpreter: bool = False,
        verify: bool = True,
        profile: bool = False,
    ) -> ResultRow:
        started = time.time()
        cpu = self.device.type != "cuda"
        row: dict[str, Any] = {
            "run_id": run_id,
            "impl": case.impl,
            "pass": case.pass_,
            "dtype": case.dtype,
            "M": case.M,
            "N": case.N,
            "bytes": min_bytes(case.pass_, case.M, case.N, case.dtype),
            "mode": "cpu" if cpu else "cuda",
            "device": devices.row_device(self.info).model_dump(),
            "timing": "perf_counter" if cpu else timing,
            "launch": None,
        }

        def finish(status: str, reason: Optional[str] = None, **extra: Any) -> ResultRow:
            return ResultRow.model_validate(
                {**row, **extra, "status": status, "reason": reason, "started_at": started, "ended_at": time.time()}
            )

        if case.impl not in self.registry:
            return finish("skipped", f"implementation {case.impl!r} is not registered in this process")
        impl = self.registry.get(case.impl)
        if impl.launch is not None:
            try:
                row["launch"] = dict(impl.launch(case.M, case.N, self._launch_sm_count(impl)))
            except Exception as exc:
                row["launch_error"] = _short(exc)
        reason = refusal(impl, case.pass_, case.dtype, cpu, timing, triton_interpreter, case.M, case.N)
        if reason:
            return finish("skipped", reason)
        if cpu and impl.uses_triton:
            row["mode"] = "interpreter"
        elif impl.uses_triton:
            native.ensure()  # built and loaded before anything is timed, never meanwhile (rmsnorm_kernels.native)

        actual = actual_bytes(case.pass_, case.M, case.N, case.dtype, row["launch"])
        if actual is not None:
            row["actual_bytes"] = actual.bytes
            row["actual_bytes_note"] = actual.note

        # Memory: decided before anything of the case is allocated.
        elem = element_size(case.dtype)
        fp = memory.footprint(case.pass_, case.M, case.N, elem, impl.fused, row["launch"])
        budget = memory.budget(self.free_memory(), self.device.type)
        sets, flush_bytes = size_sets(fp, row["bytes"], self.info.l2_bytes, repetitions, warmup, budget)
        if sets == 0:
            need = fp.total(1) + flush_bytes
            return finish(
                "skipped",
                f"not enough memory: this case needs about {memory.human(need)} "
                f"(inputs, outputs and temporaries of one input set), only {memory.human(budget)} may be used "
                f"on {self.info.name} now; refused before allocation",
                memory_estimate_bytes=need,
            )
        row.update(rotating_sets=sets, l2_flush=bool(flush_bytes), memory_estimate_bytes=fp.total(sets) + flush_bytes)

        outcome = _Outcome()
        try:
            self._measure(impl, case, sets, flush_bytes, timing, repetitions, warmup, verify, profile, outcome)
            error = None
        except Exception as exc:
            error = _short(exc)
        self._free()  # after the except block, so the traceback no longer holds the case's tensors
        verdict = outcome.verdict
        if verdict is not None:
            row.update(
                verified=verdict.verified,
                max_rel_err=_finite(verdict.max_rel_err),
                tolerance=verdict.tolerance,
                rows_checked=verdict.rows_checked,
            )
        if outcome.profile_error is not None:
            row["profile_error"] = outcome.profile_error
        if error is not None:
            return finish("error", (f"in the {outcome.stage}: " if outcome.stage != "timing" else "") + error)
        stats = outcome.stats

        gbps = row["bytes"] / (stats.median_us * 1e-6) / 1e9 if stats.median_us > 0 else None
        ceiling = self.ceiling()
        pct = 100.0 * gbps / ceiling.GBps if (gbps is not None and ceiling is not None and ceiling.GBps > 0) else None
        wrong = verdict is not None and not verdict.verified
        if stats.peak_bytes is None:
            row["peak_bytes_note"] = (
                PEAK_NOT_ON_CPU
                if self.device.type != "cuda"
                else "not measured with CUDA-graph timing (the graph's pool is allocated at capture)"
            )
        return finish(
            "wrong" if wrong else "ok",
            verdict.reason if wrong else None,
            profile=outcome.profile,
            **dataclasses.asdict(stats),
            GBps=gbps,
            pct_of_ceiling=pct,
        )

    def _launch_sm_count(self, impl: Implementation) -> int:
        """The SM count the kernel itself plans its grid with: the device's, except for Triton under the CPU
        interpreter, where the kernels pretend to be on a GPU (``rmsnorm_kernels.triton_mode.INTERPRETER_SM_COUNT``)."""
        return self.info.sm_count if self.device.type == "cuda" or not impl.uses_triton else INTERPRETER_SM_COUNT

    def _measure(
        self,
        impl: Implementation,
        case: Case,
        sets: int,
        flush_bytes: int,
        timing: str,
        repetitions: int,
        warmup: int,
        check: bool,
        profile: bool,
        outcome: "_Outcome",
    ) -> None:
        with self._on_device():
            dtype = TORCH_DTYPES[case.dtype]
            seed = zlib.crc32(case.label().encode())
            xs, weight, dys = random_inputs(case.M, case.N, dtype, self.device, sets, case.pass_ == "bwd", seed)
            if check:  # the case's own first input set; before any timing, its tensors freed before the warm-up
                outcome.stage = "correctness check"
                outcome.verdict = verify(impl.fn, xs[0], weight, dys[0] if dys else None, EPS, seed)
                self._free()
            if case.pass_ == "fwd":
                workload = ForwardWorkload(impl.fn, xs, weight, EPS)
            else:
                workload = BackwardWorkload(impl.fn, xs, weight, dys, EPS)
            del xs, dys
            outcome.stage = "timing"
            flush = torch.empty(flush_bytes, dtype=torch.uint8, device=self.device) if flush_bytes else None
            measurer = measure_cuda_graph if (timing == "cuda-graph" and self.device.type == "cuda") else measure
            try:
                outcome.stats = measurer(workload, repetitions, warmup, self.device, flush)
                if profile:
                    try:
                        outcome.profile = profile_workload(workload, self.device)
                    except Exception as exc:  # a profiler failure leaves the timing standing
                        outcome.profile_error = _short(exc)
            finally:
                workload.release()

    def _free(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # -- the run header -----------------------------------------------------------------------------
    def header(self, sweep: Sweep, run_id: str, implementations: list[str]) -> RunHeader:
        """This device's header of a run of ``sweep`` (engine.device.run_header), the ceiling measured first. On a
        GPU, a sweep with a Triton implementation loads the native node first, so the header's ``native_node``
        says how the run's Triton calls go (it was null in every header before a case had loaded it)."""
        if self.device.type == "cuda" and any(
            name in self.registry and self.registry.get(name).uses_triton for name in implementations
        ):
            native.ensure()
        ceiling = self.ceiling()
        request = {**sweep.model_dump(), "implementations": implementations}
        return devices.run_header(self.info, run_id, request, ceiling, self.ceiling_method)


PEAK_NOT_ON_CPU = "not measured on CPU: the peak is the CUDA caching allocator's counter"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def iter_run(
    sweep: Union[Sweep, Mapping[str, Any]],
    device: Optional[str] = "auto",
    run_id: Optional[str] = None,
    cancel: Any = None,
    on_progress: Optional[Callable[[int, Optional[int], ResultRow], None]] = None,
    registry: Optional[Registry] = None,
    bench: Optional[DeviceBench] = None,
    ceiling_bytes: Optional[int] = None,
    cases: Optional[Iterable[Case]] = None,
    implementations: Optional[list[str]] = None,
) -> Iterator[Union[RunHeader, ResultRow]]:
    """Yield the run header (with the measured ceiling), then one row per case, as each is measured.

    ``device``: ``"auto"``/None defers to ``sweep.device``. ``cancel``: anything with ``is_set()`` (a
    ``threading.Event``), checked between cases; when set, the generator stops (no more rows).
    ``on_progress(done, total, row)`` is called after each row (``total`` is None for an unsized ``cases``).
    ``cases``: the cases to measure, in order (default: ``plan(sweep)``); any iterable, drawn one at a time
    after the previous row was yielded, so a caller may feed them lazily (the service's worker process does).
    ``implementations``: the header's implementation list (default: those of the cases, else the sweep's)."""
    registry = default_registry() if registry is None else registry
    sweep = _validated(sweep, registry)
    run_id = run_id or new_run_id()
    spec = sweep.device if device in (None, "auto") else device
    bench = bench or DeviceBench(spec, ceiling_bytes=ceiling_bytes, registry=registry)
    if cases is None:
        cases = plan(sweep, registry)
    if implementations is None:
        planned = list(dict.fromkeys(case.impl for case in cases)) if isinstance(cases, (list, tuple)) else []
        implementations = planned or resolve_implementations(sweep, registry)
    header = bench.header(sweep, run_id, list(implementations))
    settle_heap()
    yield header
    total = len(cases) if isinstance(cases, Sized) else None
    for done, case in enumerate(cases, start=1):
        if cancel is not None and cancel.is_set():
            return
        row = bench.run_case(
            case,
            repetitions=sweep.repetitions,
            warmup=sweep.warmup,
            timing=sweep.timing,
            run_id=run_id,
            triton_interpreter=sweep.triton_interpreter,
            verify=sweep.verify,
            profile=sweep.profile,
        )
        if on_progress is not None:
            on_progress(done, total, row)
        yield row


def settle_heap() -> None:
    """Move every object alive now (modules, the registry, kernels compiled by earlier runs) out of the cycle
    collector's reach, after one last full collection. Each case ends with ``gc.collect()`` so that its tensors are
    gone before the next case allocates; with the whole heap in view that collection took 75 ms (this 2-core
    machine, ~186,000 objects after the imports) and more in a Ray actor, whose heap holds Ray as well: twice per
    case, most of a small GPU case's time (issue 37). The service calls it once started, for the same reason.
    Frozen objects are still freed by reference counting; only a cycle among them that dies later is kept, and
    nothing alive between runs holds a case's tensors."""
    gc.collect()
    gc.freeze()


def run_sweep(sweep: Union[Sweep, Mapping[str, Any]], **kwargs: Any) -> RunFile:
    """Run a whole sweep and return the result file (``complete`` is false if it was cancelled)."""
    items = list(iter_run(sweep, **kwargs))
    header, rows = items[0], items[1:]
    expected = len(plan(sweep, kwargs.get("registry")))
    baseline = _validated(sweep, kwargs.get("registry") or default_registry()).baseline
    summary = summarize(rows, complete=len(rows) == expected, baseline=baseline)
    return RunFile(run=header, rows=rows, summary=summary)
