"""Launch plans (`rmsnorm_kernels.launch_plans`), on CPU: the real host paths of the forward and of every backward
strategy run with stand-ins for Triton's compiled kernels (`FakeJIT`: records what its launcher is given).
The replay must hand each kernel exactly what the full path hands it (with the new call's tensors and fresh
outputs in the same places), must never replay a call that did something it could not record, and must cost
less host time than the full path (a ratio, measured interleaved)."""

import pytest
import torch

from rmsnorm_kernels import fast_launch, launch_plans, launch_record, poison, triton_forward
from rmsnorm_kernels.launch_plans import PlanCache
from rmsnorm_kernels.triton_backward import column_sum, function
from rmsnorm_kernels.triton_backward.atomic import atomic_backward, drain_kernel, rmsnorm_bwd_atomic_kernel
from rmsnorm_kernels.triton_backward.persistent import persistent_backward, rmsnorm_bwd_persistent_kernel
from rmsnorm_kernels.triton_backward.workspace import rmsnorm_bwd_workspace_kernel, workspace_backward
from tests.kernels.fake_triton import FakeJIT, median_seconds


@pytest.fixture
def fake_gpu(monkeypatch):
    """Our kernels as FakeJITs behind `fast_launch`, launched directly (as on a GPU); plans on."""
    log = []
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 7, raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    fast_launch.clear()
    kernels = [
        rmsnorm_bwd_persistent_kernel,
        rmsnorm_bwd_workspace_kernel,
        rmsnorm_bwd_atomic_kernel,
        drain_kernel,
        column_sum.column_sum_kernel,
        triton_forward.rmsnorm_fwd_rows_kernel,
        triton_forward.rmsnorm_fwd_chunked_kernel,
    ]
    for k in kernels:
        wrapper = fast_launch.FastKernel(FakeJIT.like(k, log))
        wrapper.direct = True
        fast_launch._WRAPPERS[k] = wrapper
    monkeypatch.setattr(launch_plans, "ENABLED", True)
    triton_forward.FORWARD_PLANS.clear()
    triton_forward.FORWARD_PLANS_NO_RSTD.clear()
    function.BACKWARD_PLANS.clear()
    yield log
    fast_launch.clear()
    triton_forward.FORWARD_PLANS.clear()
    triton_forward.FORWARD_PLANS_NO_RSTD.clear()
    function.BACKWARD_PLANS.clear()


def _same_launch(full, replay, tensors_full, tensors_replay):
    """The replay's launch is the full path's with each tensor swapped for its counterpart."""
    name, grid, args = full
    r_name, r_grid, r_args = replay
    assert (r_name, tuple(r_grid)) == (name, tuple(grid) + (1, 1)[: 3 - len(grid)])
    assert len(args) == len(r_args)
    for a, b in zip(args, r_args):
        if isinstance(a, torch.Tensor):
            i = next(i for i, t in enumerate(tensors_full) if t is a)
            assert b is tensors_replay[i], (name, i)
        else:
            assert a == b, (name, a, b)


def _inputs(m, n, dtype=torch.bfloat16):
    return (
        torch.randn(m, n).to(dtype),
        torch.randn(m, n).to(dtype),
        torch.randn(n).to(dtype),
        torch.rand(m, dtype=torch.float32),
    )


@pytest.mark.parametrize(
    "strategy", [persistent_backward, workspace_backward, atomic_backward], ids=["persistent", "workspace", "atomic"]
)
@pytest.mark.parametrize("n", [768, 4096])
def test_backward_replay_launches_what_the_full_path_launches(fake_gpu, strategy, n):
    log = fake_gpu
    dy, x, w, rstd = _inputs(300, n)
    full_out = function.run_strategy(strategy, dy, x, w, rstd)  # records (first complete call)
    full_launches = list(log)
    assert launch_plans.STATS["recorded"] >= 1 and full_launches
    del log[:]
    dy2, x2, w2, rstd2 = _inputs(300, n)
    out = function.run_strategy(strategy, dy2, x2, w2, rstd2)  # replays
    assert len(log) == len(full_launches)
    # every scratch / output the replay allocated stands where the full path's stood
    full_tensors = [dy, x, w, rstd, *full_out]
    replay_tensors = [dy2, x2, w2, rstd2, *out]
    for f_launch, r_launch in zip(full_launches, log):
        scratch_f = [a for a in f_launch[2] if isinstance(a, torch.Tensor) and not any(a is t for t in full_tensors)]
        scratch_r = [a for a in r_launch[2] if isinstance(a, torch.Tensor) and not any(a is t for t in replay_tensors)]
        _same_launch(f_launch, r_launch, full_tensors + scratch_f, replay_tensors + scratch_r)
    assert [o.shape for o in out] == [o.shape for o in full_out] and out[0] is not full_out[0]


def test_forward_replay_launches_what_the_full_path_launches(fake_gpu, monkeypatch):
    log = fake_gpu
    x, w = torch.randn(64, 5120).bfloat16(), torch.randn(5120).bfloat16()
    y, x2d, rstd = triton_forward.rmsnorm_forward(x, w, 1e-6)
    full = list(log)
    del log[:]
    x2, w2 = torch.randn(64, 5120).bfloat16(), torch.randn(5120).bfloat16()
    y2, x2d2, rstd2 = triton_forward.rmsnorm_forward(x2, w2, 1e-6)
    assert len(full) == len(log) == 1 and x2d2 is x2
    _same_launch(full[0], log[0], [x, w, y, rstd], [x2, w2, y2, rstd2])
    # a new eps, a new shape, 3-D input: not the same plan (eps is an argument the key fixes)
    triton_forward.rmsnorm_forward(x2, w2, 1e-5)
    floats = lambda launch: [a for a in launch[2] if isinstance(a, float)]  # noqa: E731
    assert floats(log[0]) == [1e-6] and floats(log[-1]) == [1e-5]
    y3, _, _ = triton_forward.rmsnorm_forward(x2.view(4, 16, 5120), w2, 1e-6)
    assert y3.shape == (4, 16, 5120)


def test_a_call_with_an_unrecorded_tensor_is_never_replayed(fake_gpu):
    assert fake_gpu == []  # the fake GPU starts with no launch logged
    calls = []

    def full(x):
        calls.append(1)
        out = poison.new_output(x.shape, x.dtype, x.device)
        scratch = torch.empty_like(x)  # allocated by PyTorch, not noted: the replay could not supply it
        fast_launch.fast(column_sum.column_sum_kernel)[(1,)](
            x, scratch, 1, 1, 1, BLOCK_G=1, BLOCK_N=1, USE_PDL=False, num_warps=1
        )
        return (out,)

    cache = PlanCache()
    for _ in range(launch_plans.GIVE_UP_AFTER + 2):
        cache.call("k", (torch.randn(4, 4),), full)
    assert len(calls) == launch_plans.GIVE_UP_AFTER + 2  # the full path every time
    assert cache.plans["k"] is False


def test_an_autotuner_call_is_not_recorded_but_the_next_one_is(fake_gpu):
    calls = []

    def full(x, tune):
        calls.append(tune)
        if tune:
            launch_record.note_unrecordable()
        out = poison.new_output(x.shape, x.dtype, x.device)
        fast_launch.fast(column_sum.column_sum_kernel)[(1,)](
            x, out, 1, 1, 1, BLOCK_G=1, BLOCK_N=1, USE_PDL=False, num_warps=1
        )
        return (out,)

    cache = PlanCache()
    x = torch.randn(4, 4)
    cache.call("k", (x,), full, True)
    assert "k" not in cache.plans
    cache.call("k", (x,), full, False)
    cache.call("k", (x,), full, False)
    assert calls == [True, False]  # the third call was a replay


def test_replay_outputs_are_poisoned_while_poisoning(fake_gpu):
    dy, x, w, rstd = _inputs(64, 1024)
    function.run_strategy(persistent_backward, dy, x, w, rstd)
    with poison.poisoned_outputs():
        dx, dw = function.run_strategy(persistent_backward, dy, x, w, rstd)
    assert torch.isnan(dx.float()).all() and torch.isnan(dw.float()).all()  # the fake kernels wrote nothing


def test_replay_costs_less_host_time_than_the_full_path(fake_gpu):
    dy, x, w, rstd = _inputs(4096, 4096)
    full = lambda: persistent_backward(dy, x, w, rstd)  # noqa: E731  (the full host path, launches direct)
    planned = lambda: function.run_strategy(persistent_backward, dy, x, w, rstd)  # noqa: E731
    planned(), full()
    ratios = []
    for _ in range(3):  # interleaved rounds: a busy core slows both alike
        ratios.append(median_seconds(planned, 200) / median_seconds(full, 200))
    assert min(ratios) < 0.8, ratios


def _kernel_args(log, name):
    return [args for n, _, args in log if n == name]


def test_replays_go_through_the_c_launcher(fake_gpu):
    dy, x, w, rstd = _inputs(300, 4096)
    for _ in range(3):
        function.run_strategy(persistent_backward, dy, x, w, rstd)
    plan = next(p for p in function.BACKWARD_PLANS.plans.values() if p)
    assert [c.run.direct_calls for c, *_ in plan.launches] == [2, 2]  # the two replays, both kernels


def test_scratch_is_kept_per_stream_and_fresh_under_capture_or_poison(fake_gpu, monkeypatch):
    log = fake_gpu
    dy, x, w, rstd = _inputs(300, 4096)
    partial = lambda: _kernel_args(log, "rmsnorm_bwd_persistent_kernel")[-1][5]  # noqa: E731
    function.run_strategy(persistent_backward, dy, x, w, rstd)  # records
    first = partial()
    dx1, dw1 = function.run_strategy(persistent_backward, dy, x, w, rstd)
    kept = partial()
    dx2, dw2 = function.run_strategy(persistent_backward, dy, x, w, rstd)
    assert partial() is kept and kept is not first  # the replays share one partial buffer ...
    assert dx1 is not dx2 and dw1 is not dw2  # ... but every returned tensor is fresh
    assert dx1.data_ptr() != dx2.data_ptr() and dw1.data_ptr() != dw2.data_ptr()
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 8, raising=False)
    function.run_strategy(persistent_backward, dy, x, w, rstd)
    other_stream = partial()
    assert other_stream is not kept  # another stream: its own buffer
    monkeypatch.setattr(launch_plans, "_capturing", lambda: True)
    function.run_strategy(persistent_backward, dy, x, w, rstd)
    assert partial() is not other_stream  # graph capture: a buffer of the graph's own
    monkeypatch.setattr(launch_plans, "_capturing", lambda: False)
    with poison.poisoned_outputs():
        function.run_strategy(persistent_backward, dy, x, w, rstd)
    assert partial() is not other_stream and torch.isnan(partial()).all()  # poisoning: a fresh NaN buffer
    function.run_strategy(persistent_backward, dy, x, w, rstd)
    assert partial() is other_stream


def test_the_atomic_accumulator_is_kept_zeroed_scratch(fake_gpu, monkeypatch):
    """The atomic backward's fp32 accumulator (left zero by its drain kernel) is kept like scratch, zero-filled
    when first made, and fresh zeros (never NaN: the kernel adds into it) under capture or poisoning; dx and dγ
    (γ's dtype, written by the drain: no cast launch) are fresh every call."""
    log = fake_gpu
    dy, x, w, rstd = _inputs(300, 4096)
    acc = lambda: _kernel_args(log, "rmsnorm_bwd_atomic_kernel")[-1][5]  # noqa: E731
    function.run_strategy(atomic_backward, dy, x, w, rstd)  # records
    plan = next(p for p in function.BACKWARD_PLANS.plans.values() if p)
    assert [kind for *_, kind in plan.outputs] == [launch_plans.EMPTY, launch_plans.EMPTY, launch_plans.ZERO_SCRATCH]
    del log[:]
    dx1, dw1 = function.run_strategy(atomic_backward, dy, x, w, rstd)
    kept = acc()
    assert kept.dtype == torch.float32 and kept.shape == (4096,) and not kept.any()
    assert [name for name, *_ in log] == ["rmsnorm_bwd_atomic_kernel", "drain_kernel"]
    drained, written = _kernel_args(log, "drain_kernel")[-1][:2]
    assert drained is kept and written is dw1 and dw1.dtype == w.dtype
    dx2, dw2 = function.run_strategy(atomic_backward, dy, x, w, rstd)
    assert acc() is kept and dx2 is not dx1 and dw2 is not dw1
    monkeypatch.setattr(launch_plans, "_capturing", lambda: True)
    function.run_strategy(atomic_backward, dy, x, w, rstd)
    assert acc() is not kept and not acc().any()
    monkeypatch.setattr(launch_plans, "_capturing", lambda: False)
    with poison.poisoned_outputs():
        dx3, dw3 = function.run_strategy(atomic_backward, dy, x, w, rstd)
    assert acc() is not kept and not acc().any() and torch.isnan(dw3.float()).all()
    # a buffer that must start zero is never shared with another plan's plain scratch of the same shape
    zero_key = next(k for k in launch_plans._SCRATCH if k[-1] == launch_plans.ZERO_SCRATCH and k[3] == (4096,))
    assert launch_plans._SCRATCH[zero_key] is kept


def test_scratch_buffers_are_bounded(fake_gpu):
    for m in range(1, launch_plans.SCRATCH_ENTRIES + 6):
        dy, x, w, rstd = _inputs(m, 256)
        for _ in range(2):
            function.run_strategy(workspace_backward, dy, x, w, rstd)
    assert 0 < len(launch_plans._SCRATCH) <= launch_plans.SCRATCH_ENTRIES


def test_a_forward_without_rstd_writes_it_to_scratch_and_returns_none(fake_gpu, monkeypatch):
    log = fake_gpu
    x, w = torch.randn(64, 5120).bfloat16(), torch.randn(5120).bfloat16()
    y0, _, rstd0 = triton_forward.rmsnorm_forward(x, w, 1e-6, need_rstd=False)  # records: a real rstd
    assert rstd0 is not None
    y1, _, rstd1 = triton_forward.rmsnorm_forward(x, w, 1e-6, need_rstd=False)
    y2, _, rstd2 = triton_forward.rmsnorm_forward(x, w, 1e-6, need_rstd=False)
    assert rstd1 is None and rstd2 is None and y1 is not y2
    # whichever forward kernel the shipped table picks at this width (both take X, W, Y, RSTD first)
    rows = [args for name, _, args in log if name.startswith("rmsnorm_fwd_")]
    assert len(rows) == 3
    assert rows[-1][3] is rows[-2][3] and rows[-1][2] is y2 and rows[-2][2] is y1  # rstd in one kept buffer
    # a caller that needs rstd has its own plans: a fresh rstd every call
    triton_forward.rmsnorm_forward(x, w, 1e-6)
    _, _, r1 = triton_forward.rmsnorm_forward(x, w, 1e-6)
    _, _, r2 = triton_forward.rmsnorm_forward(x, w, 1e-6)
    assert r1 is not None and r2 is not None and r1.data_ptr() != r2.data_ptr()


def test_importing_the_plans_never_asks_the_driver(monkeypatch):
    """Asking the CUDA driver at import (``torch.cuda.is_available``) would keep a later fork from using CUDA."""
    import importlib

    def refuse(*args, **kwargs):
        raise AssertionError("the CUDA driver was asked at import")

    monkeypatch.setattr(torch.cuda, "is_available", refuse)
    monkeypatch.setattr(torch.cuda, "device_count", refuse)
    importlib.reload(launch_plans)
    assert launch_plans._capturing() is False  # CUDA not initialised here: not capturing, and nothing asked
