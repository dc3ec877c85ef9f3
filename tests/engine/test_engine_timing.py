import math
import time

import numpy as np
import pytest
import torch

from engine import timing
from engine.timing import BackwardWorkload, ForwardWorkload, measure, random_inputs, rotating_sets, stats_from_seconds
from tiny_impls import Counters, counting_impl, torch_rmsnorm

CPU = torch.device("cpu")


def test_stats_match_numpy_quantiles():
    rng = np.random.default_rng(7)
    samples = list(rng.uniform(1e-6, 5e-3, size=37))
    stats = stats_from_seconds(samples)
    us = np.array(samples) * 1e6
    assert stats.median_us == pytest.approx(np.median(us))
    assert stats.q1_us == pytest.approx(np.percentile(us, 25))
    assert stats.q3_us == pytest.approx(np.percentile(us, 75))
    assert (stats.min_us, stats.max_us, stats.repetitions) == (pytest.approx(us.min()), pytest.approx(us.max()), 37)


def test_per_set_medians_follow_the_set_each_sample_ran_on():
    """Two rotating sets, one slow: the row's median lies between them; the per-set medians show which is which.
    The first timed repetition may fall on either set (the warm-up and the enqueue probe come first)."""
    rng = np.random.default_rng()
    first = int(rng.integers(0, 3))
    sets = [(first + r) % 3 for r in range(31)]
    base = {0: 100e-6, 1: 140e-6, 2: 101e-6}
    samples = [base[k] * (1 + 0.01 * rng.standard_normal()) for k in sets]
    stats = stats_from_seconds(samples, set_of=sets)
    expect = [np.median([s for s, k in zip(samples, sets) if k == j]) * 1e6 for j in range(3)]
    assert stats.set_medians_us == pytest.approx(expect)
    assert stats.set_medians_us[1] > 1.3 * stats.set_medians_us[0]
    assert stats_from_seconds(samples).set_medians_us is None
    assert stats_from_seconds(samples, set_of=[0] * 31).set_medians_us is None  # one set: nothing to split


def test_stats_reject_empty_and_non_finite():
    with pytest.raises(ValueError):
        stats_from_seconds([])
    with pytest.raises(ValueError):
        stats_from_seconds([1e-3, math.nan])


def test_rotating_sets_exceed_twice_l2():
    l2 = 60 << 20
    sets = rotating_sets(8 << 20, l2)
    assert (sets - 1) * (8 << 20) >= 2 * l2 and (sets - 2) * (8 << 20) < 2 * l2
    assert rotating_sets(4 << 30, l2) == 2
    assert rotating_sets(10, l2) == timing.MAX_SETS


def test_random_inputs_are_random_and_distinct():
    xs, w, dys = random_inputs(32, 64, torch.bfloat16, CPU, 3, backward=True, seed=1)
    assert len(xs) == len(dys) == 3
    assert all(x.requires_grad for x in xs) and w.requires_grad
    assert not torch.equal(xs[0], xs[1])
    assert xs[0].float().std() > 0.5 and (w != 0).all() and w.float().std() > 0.01


def test_forward_is_timed_without_grad():
    counters = Counters()
    fn = counting_impl(counters)
    xs, w, _ = random_inputs(16, 32, torch.float32, CPU, 2, backward=False)
    stats = measure(ForwardWorkload(fn, xs, w), repetitions=4, warmup=2, device=CPU)
    assert stats.repetitions == 4 and stats.median_us > 0
    assert counters.forwards == 6 and counters.forward_grad_enabled == [False] * 6


def test_backward_times_autograd_grad_without_rerunning_forward(monkeypatch):
    counters = Counters()
    fn = counting_impl(counters)
    xs, w, dys = random_inputs(16, 32, torch.float32, CPU, 3, backward=True)
    workload = BackwardWorkload(fn, xs, w, dys)
    during_timed_call = []
    real_call = BackwardWorkload.call

    def spying_call(self, i):
        before = counters.forwards
        real_call(self, i)
        during_timed_call.append(counters.forwards - before)

    monkeypatch.setattr(BackwardWorkload, "call", spying_call)
    stats = measure(workload, repetitions=7, warmup=2, device=CPU)
    assert stats.repetitions == 7
    assert during_timed_call == [0] * 9  # no forward inside any call
    assert counters.backwards == 9  # one backward per call
    assert counters.forwards == 9  # one graph per call, built outside the timed call
    assert all(counters.forward_grad_enabled)


def test_backward_gradients_are_right():
    xs, w, dys = random_inputs(8, 16, torch.float32, CPU, 1, backward=True)
    workload = BackwardWorkload(torch_rmsnorm, xs, w, dys)
    workload.before(0)
    workload.call(0)
    dx, dw = workload.out
    x64 = xs[0].detach().double().requires_grad_(True)
    w64 = w.detach().double().requires_grad_(True)
    y64 = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w64
    ref = torch.autograd.grad(y64, (x64, w64), dys[0].double())
    torch.testing.assert_close(dx.double(), ref[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.double(), ref[1], rtol=1e-4, atol=1e-4)


def test_wrong_output_is_reported():
    xs, w, _ = random_inputs(8, 16, torch.float32, CPU, 1, backward=False)
    with pytest.raises(RuntimeError, match="shape"):
        measure(ForwardWorkload(lambda x, w_, eps: x[:, :3], xs, w), repetitions=2, warmup=1, device=CPU)


def test_cuda_graph_needs_cuda():
    xs, w, _ = random_inputs(8, 16, torch.float32, CPU, 1, backward=False)
    with pytest.raises(RuntimeError, match="CUDA"):
        timing.measure_cuda_graph(ForwardWorkload(torch_rmsnorm, xs, w), 2, 1, CPU)


def test_cuda_host_us_is_the_median_of_the_timed_calls(monkeypatch):
    """On CUDA, host_us is the host's time inside each timed call (the GPU spinning meanwhile), median over the
    repetitions: here a stand-in GPU, and a workload whose calls take known, varied host times."""
    spins = []

    class FakeEvent:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = time.perf_counter()

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "_sleep", spins.append)
    mallocs = {"num_device_alloc": 40}
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda device=None: dict(mallocs))
    fake_allocator(monkeypatch)

    class Workload:
        sets = 1

        def context(self):
            return torch.no_grad()

        def before(self, i):
            pass

        def call(self, i):
            time.sleep(next(waits))
            if i in (5, 10, 14):  # one untimed estimate call (3…7) and two timed ones (8…22) grow the allocator's pool
                mallocs["num_device_alloc"] += 1

        def check(self):
            pass

    waits = iter([0.0] * 8 + [0.010, 0.002, 0.006] * 5 + [0.0])  # and the peak's call after them
    stats = measure(Workload(), repetitions=15, warmup=3, device=torch.device("cuda"))
    assert stats.repetitions == 15 and len(spins) == 15
    assert (
        5e3 < stats.host_us < 9.5e3
    )  # the timed calls' median (6 ms; a sleep never ends early), not the estimate's (0)
    assert stats.device_mallocs == 2  # only the timed calls' cudaMallocs count


class FakeAllocator:
    """torch.cuda's allocated / peak counters, moved by hand."""

    def __init__(self):
        self.now = self.peak = 0

    def alloc(self, n):
        self.now += n
        self.peak = max(self.peak, self.now)

    def free(self, n):
        self.now -= n


def fake_allocator(monkeypatch) -> FakeAllocator:
    a = FakeAllocator()
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: a.now)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: a.peak)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: setattr(a, "peak", a.now))
    return a


def test_peak_is_what_one_call_allocates_beyond_what_it_started_with(monkeypatch):
    """A stand-in allocator: the inputs and the previous output are held before the call; the call allocates a
    temporary and a new output, frees the temporary, then the previous output (as `self.out = fn(...)` does)."""
    import random

    rng = random.Random()
    inputs, out, temp = (rng.randrange(1, 10**9) for _ in range(3))
    a = fake_allocator(monkeypatch)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args, **k: None)
    a.alloc(inputs)

    class Workload:
        held = False

        def before(self, i):
            pass

        def call(self, i):
            a.alloc(temp)
            a.alloc(out)
            a.free(temp)
            if self.held:
                a.free(out)
            self.held = True

    w = Workload()
    w.call(0)  # a warm-up call leaves its output held
    assert timing.peak_pass_bytes(w, 1, torch.device("cuda")) == temp + out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_peak_of_a_real_forward_is_its_output():
    device = torch.device("cuda")
    xs, w, _ = random_inputs(1024, 4096, torch.bfloat16, device, 2, backward=False)
    stats = measure(ForwardWorkload(torch_rmsnorm, xs, w), repetitions=5, warmup=2, device=device)
    out = 1024 * 4096 * 2
    assert out <= stats.peak_bytes < 12 * out  # the output, plus the composed fp32 temporaries (up to ~7x)


def test_cpu_rows_say_why_they_have_no_peak():
    xs, w, _ = random_inputs(8, 64, torch.float32, CPU, 1, backward=False)
    assert measure(ForwardWorkload(torch_rmsnorm, xs, w), repetitions=2, warmup=1, device=CPU).peak_bytes is None
