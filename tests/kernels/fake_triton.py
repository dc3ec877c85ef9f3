"""Stand-ins for Triton's JIT and compiled kernels, for the host-path tests that run without a GPU
(`test_host_overhead`, `test_launch_plans`), and the host-time median both measure with."""

import time


class FakeCompiled:
    """Stands in for Triton's CompiledKernel: records what its launcher is given (and, with a ``log``, appends
    (name, grid, kernel args) to it). ``run`` is the launcher object: called, its arguments are grid × 3, stream,
    function, metadata × 3, hooks × 2, then the kernel's own; its C ``launch`` (what launch plans call when the
    kernel needs no scratch) takes grid × 3, stream, function, cooperative, pdl, scratch × 2, metadata × 2,
    hooks × 2, then the kernel's own. ``launches`` holds every launch as the ``run`` call it stands for."""

    def __init__(self, name="kernel", log=None):
        self.name = name
        self.log = log
        self.function = object()
        self.packed_metadata = object()
        self.launches = []
        self.run = FakeLauncher(self)


class FakeLauncher:
    global_scratch_size = 0
    profile_scratch_size = 0
    launch_cooperative_grid = False
    launch_pdl = False

    def __init__(self, compiled):
        self.compiled = compiled
        self.direct_calls = 0

    def __call__(self, *args):
        c = self.compiled
        c.launches.append(args)
        if c.log is not None:
            c.log.append((c.name, args[:3], args[9:]))

    def launch(self, *args):
        assert args[4] is self.compiled.function and args[9] is self.compiled.packed_metadata
        assert args[5:9] == (False, False, None, None) and args[10:13] == (None, None, None)
        self.direct_calls += 1
        self(*args[:5], args[9], None, None, None, *args[13:])


class FakeJIT:
    """Stands in for a @triton.jit function: ``fn[grid](*args, **kwargs)`` "compiles" one kernel per call, kept in
    ``jit_calls`` as (grid, args, kwargs, compiled); with a ``log``, every launch (through the JIT or the compiled
    kernel's launcher) is appended to it as (name, grid, args in ``arg_names`` order)."""

    def __init__(self, arg_names, name="kernel", log=None):
        self.arg_names = list(arg_names)
        self.name = name
        self.log = log
        self.jit_calls = []

    @classmethod
    def like(cls, real, log):
        """A stand-in with the argument names and name of one of our real kernels."""
        return cls(real.arg_names, real.__name__ if hasattr(real, "__name__") else real.fn.__name__, log)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            compiled = FakeCompiled(self.name, self.log)
            self.jit_calls.append((grid, args, kwargs, compiled))
            if self.log is not None:
                tail = [kwargs[n] for n in self.arg_names[len(args) :]]
                self.log.append((self.name, tuple(grid), (*args, *tail)))
            return compiled

        return launch


def median_seconds(fn, calls):
    """The median wall time of ``calls`` calls of ``fn``."""
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2]
