"""What the tuning scripts (tune_kernels.py, probe_tiles.py) share: their inputs, the byte counts and copy
ceiling of the engine, and the engine's own timer (engine.timing.measure) with the engine's rules for
rotating input sets and flushing the L2, on the workloads the scripts time (a registered implementation's
forward or backward exactly as the engine times it, or a dγ strategy called directly), plus the fp64 check
of a chosen variant and the compiled kernels' registers and spills."""

from __future__ import annotations

import torch

from engine import device as devices
from engine.byte_model import min_bytes
from engine.ceiling import measure_copy
from engine.timing import BackwardWorkload, ForwardWorkload, measure, needs_flush
from engine.timing import rotating_sets as sets_for_l2
from rmsnorm_kernels.triton_backward import atomic, persistent, workspace
from rmsnorm_kernels.triton_forward import rmsnorm_forward

DRY_L2_BYTES = 1 << 20
"""The L2 a --dry run pretends to have (a few rotating sets of its tiny inputs)."""
DTYPE_OF_SIZE = {2: "bfloat16", 4: "float32"}


HOST_US = {}


def l2_bytes() -> int:
    """The GPU's L2 (engine.device), or `DRY_L2_BYTES` without one (--dry)."""
    return devices.describe(torch.device("cuda")).l2_bytes if torch.cuda.is_available() else DRY_L2_BYTES


class Calls:
    """``fn(k)`` on rotating set k, as a workload of the engine's timer (engine.timing.measure), like
    bench/probe_widths.py's."""

    def __init__(self, fn, sets: int):
        self.fn, self.sets = fn, max(1, int(sets))

    def context(self):
        return torch.no_grad()

    def before(self, i: int) -> None:
        pass

    def call(self, i: int) -> None:
        self.fn(i % self.sets)

    def check(self) -> None:
        pass


def timed_ms(workload, set_bytes, dry: bool, warmup=10, rep=100, label=None) -> float:
    """Median time of one call in ms, by the engine's own timer and rules (engine.timing): warm-up, the
    host's enqueue time measured apart (recorded in HOST_US[label]) and a GPU spin of ~2× that before each
    start event; the workload's sets rotate, and where they are too few to leave 2 × L2 of other data
    between two uses of one set of ``set_bytes`` (``needs_flush``), the L2 is flushed before every
    repetition, as the engine does (``set_bytes=None``: never). On CPU (--dry) perf_counter (meaningless
    numbers, only exercising the script)."""
    device = torch.device("cpu" if dry else "cuda")
    l2 = l2_bytes()
    flush = None
    if set_bytes is not None and needs_flush(workload.sets, set_bytes, l2):
        flush = torch.empty(2 * l2 // 4 + 1, dtype=torch.int32, device=device)
    stats = measure(workload, 3 if dry else rep, 1 if dry else warmup, device, flush)
    if label and stats.host_us is not None:
        HOST_US[label] = stats.host_us
    return stats.median_us * 1e-3


def time_ms(fn, dry: bool, warmup=10, rep=100, label=None) -> float:
    """``fn()`` timed like `timed_ms`, without an L2 flush: ``fn`` rotates its own inputs (`cycle`), or has
    none worth keeping out of L2 (a column sum of a small buffer)."""
    return timed_ms(Calls(lambda k: fn(), 1), None, dry, warmup, rep, label)


def copy_ceiling_GBps(device, dry: bool) -> float:
    """The engine's copy ceiling (engine.ceiling.measure_copy): 1 GiB copied, read + write bytes."""
    return measure_copy(device, nbytes=(1 << 30) if not dry else (1 << 20)).GBps


def fwd_bytes(m, n, s):
    return min_bytes("fwd", m, n, DTYPE_OF_SIZE[s])


def bwd_bytes(m, n, s):
    return min_bytes("bwd", m, n, DTYPE_OF_SIZE[s])


def rotating_sets(m, n, s, tensors_per_set):
    """Sets the engine would rotate over for ``tensors_per_set`` [m, n] tensors of ``s`` bytes (2 × L2
    of other data between two uses of one set)."""
    return sets_for_l2(tensors_per_set * m * n * s, l2_bytes())


def make_inputs(m, n, dtype, device, count):
    sets = []
    for _ in range(count):
        x = torch.randn(m, n, device=device, dtype=torch.float32).mul_(1.5).to(dtype)
        dy = torch.randn(m, n, device=device, dtype=torch.float32).to(dtype)
        sets.append((x, dy))
    w = (1 + 0.5 * torch.randn(n, device=device)).to(dtype)
    return sets, w


def cycle(items):
    state = {"i": 0}

    def nxt():
        state["i"] = (state["i"] + 1) % len(items)
        return items[state["i"]]

    return nxt


def _set_bytes(sets, tensors: int) -> int:
    x = sets[0][0]
    return tensors * x.numel() * x.element_size()


def bench_fwd(fn, sets, w, dry, label=None):
    """``fn(x, w)`` as the engine times a forward (engine.timing.ForwardWorkload, under no_grad); of a tuple
    (``rmsnorm_forward``'s y, x2d, rstd) y is the output checked."""

    def forward(x, weight, eps):
        out = fn(x, weight)
        return out[0] if isinstance(out, tuple) else out

    workload = ForwardWorkload(forward, [x for x, _ in sets], w)
    return timed_ms(workload, _set_bytes(sets, 1), dry, label=label)


def bench_bwd_autograd(fn, sets, w, dry, label=None):
    """``torch.autograd.grad`` through ``fn`` as the engine times a backward (engine.timing.BackwardWorkload:
    the graphs built untimed, one per set, each used once)."""
    xs = [x.clone().requires_grad_(True) for x, _ in sets]
    workload = BackwardWorkload(lambda x, weight, eps: fn(x, weight), xs, w.clone().requires_grad_(True),
                                [dy for _, dy in sets])
    return timed_ms(workload, _set_bytes(sets, 2), dry, label=label)


def bench_bwd_direct(strategy, sets, w, dry, **kwargs):
    """A dγ strategy called directly on rotating prepared inputs (dy, x2d, rstd)."""
    prepared = []
    for x, dy in sets:
        _, x2d, rstd = rmsnorm_forward(x, w, 1e-6)
        prepared.append((dy, x2d, rstd))
    workload = Calls(lambda k: strategy(prepared[k][0], prepared[k][1], w, prepared[k][2], **kwargs), len(prepared))
    return timed_ms(workload, _set_bytes(sets, 2), dry)


def kernel_reports():
    """Registers / spills of every compiled variant of our kernels (what ptxas made of them)."""
    from rmsnorm_kernels.triton_backward.column_sum import column_sum_kernel
    from rmsnorm_kernels.triton_forward import rmsnorm_fwd_chunked_kernel, rmsnorm_fwd_rows_kernel

    out = []
    for fn in (rmsnorm_fwd_rows_kernel, rmsnorm_fwd_chunked_kernel, atomic.rmsnorm_bwd_atomic_kernel,
               workspace.rmsnorm_bwd_workspace_kernel, persistent.rmsnorm_bwd_persistent_kernel, column_sum_kernel):
        for caches in getattr(fn, "device_caches", {}).values():
            for key, compiled in caches[0].items():
                try:
                    compiled._init_handles()
                    md = compiled.metadata
                    consts = {k: v for k, v in (getattr(compiled, "constants", None) or {}).items()} if False else {}
                    out.append({"kernel": fn.__name__, "n_regs": compiled.n_regs, "n_spills": compiled.n_spills,
                                "num_warps": md.num_warps, "num_stages": md.num_stages,
                                "shared": md.shared, "key": str(key)[-160:], **consts})
                except Exception as exc:  # report what could be read
                    out.append({"kernel": fn.__name__, "error": repr(exc)[:200]})
    return out


def verify(label, run, m, n, device, say):
    """The chosen variant on fresh fp32 and fp16 inputs against the fp64 reference (poisoned outputs)."""
    from rmsnorm_kernels.poison import poisoned_outputs
    from rmsnorm_kernels.reference import dx_scale, relative_error, rmsnorm_backward_reference, rmsnorm_reference
    from rmsnorm_kernels.reference import tolerance_for

    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(m, n, device=device).to(dtype)
        w = (1 + 0.5 * torch.randn(n, device=device)).to(dtype)
        dy = torch.randn(m, n, device=device).to(dtype)
        try:
            with poisoned_outputs():
                out = run(x, w, dy)
            if len(out) == 1:
                err = relative_error(out[0], rmsnorm_reference(x, w)[0])
            else:
                dx_ref, dw_ref = rmsnorm_backward_reference(x, w, dy)
                err = max(relative_error(out[0], dx_ref, dx_scale(x, w, dy)), relative_error(out[1], dw_ref))
            say(f"verify {label} {m}x{n} {dtype}: rel err {err:.2e} {'ok' if err <= tolerance_for(dtype) else 'FAIL'}")
        except Exception as exc:
            say(f"verify {label} {m}x{n} {dtype}: FAIL {exc!r}"[:300])
