"""Low-host-overhead kernel launches: ``fast(kernel)[grid](*args, **kwargs)`` is ``kernel[grid](...)``, but from
the second call with the same launch key on, the compiled kernel's launcher is called directly.

Triton's own launch path (``JITFunction.run``) re-binds the arguments, computes their specialization, reads
several environment knobs, formats the options as a string and looks the compiled kernel up on every call:
host time that a training loop pays per launch. Here the key is computed once per call from what decides
which compiled kernel Triton would pick, and conservatively more:

* every tensor argument's dtype and whether its data pointer is 16-byte aligned (Triton specializes on both);
* every int / bool / None argument's exact value (Triton specializes ints on == 1, on divisibility by 16
  and on 32 / 64 bits: the exact value is finer than all three);
* floats by type only (Triton never specializes them);
* the grid, every keyword (constexprs and options such as num_warps, launch_pdl), and the current device.

A changed shape, stride, dtype or alignment is a new key, so a stale compiled kernel is never launched
with arguments it was not specialized for. The first call of a key goes through ``kernel[grid]`` (which
compiles or finds the kernel) and records the ``CompiledKernel`` it returns, with its `launcher` (Triton's C launch
called directly where the kernel needs no scratch; launch plans replay through the same).

Falls back to ``kernel[grid]`` on every call: under Triton's interpreter (nothing is compiled), while a
launch hook is installed (profilers such as proton read the launch metadata Triton builds), when a
parameter after the positional ones is not given by keyword, or when ``RMSNORM_FAST_LAUNCH=0``.
"""

from __future__ import annotations

import os

import torch

from rmsnorm_kernels.launch_record import note_launch, note_unrecordable
from rmsnorm_kernels.triton_mode import interpreting

_WRAPPERS: dict = {}
STATS = {"jit": 0, "direct": 0}
"""Launches that went through ``kernel[grid]`` / straight to the compiled kernel (for tests and the checks)."""


def enabled() -> bool:
    return os.environ.get("RMSNORM_FAST_LAUNCH", "1") != "0" and not interpreting()


_runtime = None


def hooks_installed() -> bool:
    """A Triton launch enter / exit hook is installed (a profiler reads the metadata the full launch path builds):
    fast launches and launch plans then take Triton's own path."""
    global _runtime
    if _runtime is None:
        from triton import knobs

        _runtime = knobs.runtime
    return bool(_runtime.launch_enter_hook.calls or _runtime.launch_exit_hook.calls)


def launcher(compiled):
    """``f(gridX, gridY, gridZ, stream, *kernel_args)``: launches ``compiled`` on ``stream``. Where the kernel needs
    no global or profile scratch, Triton's C ``launch`` is called directly (its Python ``__call__`` would only
    pass None for them); otherwise ``compiled.run`` itself."""
    run, function, metadata = compiled.run, compiled.function, compiled.packed_metadata
    launch = getattr(run, "launch", None)
    if launch is None or getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return lambda g0, g1, g2, stream, *args: run(g0, g1, g2, stream, function, metadata, None, None, None, *args)
    cooperative = bool(getattr(run, "launch_cooperative_grid", False))
    pdl = bool(getattr(run, "launch_pdl", False))
    return lambda g0, g1, g2, stream, *args: launch(
        g0, g1, g2, stream, function, cooperative, pdl, None, None, metadata, None, None, None, *args
    )


def _spec(a):
    if isinstance(a, torch.Tensor):
        return (a.dtype, a.data_ptr() % 16 == 0)
    if isinstance(a, float):
        return float
    return a


class FastKernel:
    """A ``@triton.jit`` function whose compiled kernels are remembered per launch key (see the module text)."""

    __slots__ = ("fn", "arg_names", "entries", "direct")

    def __init__(self, fn):
        self.fn = fn
        self.arg_names = tuple(getattr(fn, "arg_names", ()))
        self.entries: dict = {}
        self.direct = enabled()

    def __getitem__(self, grid):
        return _Launch(self, grid)

    def launch(self, grid, args, kwargs):
        if not self.direct:
            STATS["jit"] += 1
            note_unrecordable()
            return self.fn[grid](*args, **kwargs)
        hooks = hooks_installed()
        device = torch.cuda.current_device()
        key = (grid, device, tuple(kwargs.items()), *map(_spec, args))
        entry = self.entries.get(key)
        if entry is None or hooks:
            STATS["jit"] += 1
            compiled = self.fn[grid](*args, **kwargs)
            if entry is None and not hooks:
                entry = self.entries[key] = self._entry(compiled, grid, len(args), kwargs)
                if entry[0] is not None:
                    note_launch(entry[0], grid, args, entry[1])
                    return compiled
            note_unrecordable()
            return compiled
        compiled, tail, g0, g1, g2, run = entry
        if compiled is None:  # not launchable directly (see `_entry`)
            STATS["jit"] += 1
            note_unrecordable()
            return self.fn[grid](*args, **kwargs)
        STATS["direct"] += 1
        note_launch(compiled, grid, args, tail)
        run(g0, g1, g2, torch._C._cuda_getCurrentRawStream(device), *args, *tail)
        return compiled

    def _entry(self, compiled, grid, positional, kwargs):
        if hasattr(compiled, "result"):  # an asynchronous compile's future
            compiled = compiled.result()
        names = self.arg_names[positional:]
        if compiled is None or not hasattr(compiled, "packed_metadata") or any(n not in kwargs for n in names):
            return (None, (), 0, 0, 0, None)
        grid = tuple(grid) + (1, 1)
        return (compiled, tuple(kwargs[n] for n in names), grid[0], grid[1], grid[2], launcher(compiled))


class _Launch:
    __slots__ = ("kernel", "grid")

    def __init__(self, kernel, grid):
        self.kernel = kernel
        self.grid = grid

    def __call__(self, *args, **kwargs):
        return self.kernel.launch(self.grid, args, kwargs)


def fast(fn) -> FastKernel:
    """The one `FastKernel` of ``fn`` (a ``@triton.jit`` function; callable grids are not supported)."""
    wrapper = _WRAPPERS.get(fn)
    if wrapper is None:
        wrapper = _WRAPPERS[fn] = FastKernel(fn)
    return wrapper


def clear() -> None:
    """Forget every remembered compiled kernel (tests; after changing ``RMSNORM_FAST_LAUNCH``)."""
    _WRAPPERS.clear()
    STATS.update(jit=0, direct=0)
