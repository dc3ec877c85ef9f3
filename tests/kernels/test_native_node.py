"""The native node (`rmsnorm_kernels.native`, ``node.cpp``), on CPU.

The module is compiled here with the machine's C++ compiler (the CPU build; the CUDA build is compiled too, for
syntax and types only, since its cubin launches need a GPU). Its plans get Python stand-in launches that compute
RMSNorm's forward and backward in fp32, so everything around a launch is exercised for real: the registry and
its keys, the outputs a plan allocates (NaN while poisoning), the tensors each launch is handed, the C++ autograd
node (saved tensors, dy made contiguous, dγ cast to the weight's dtype, dx shaped like x), values and gradients
against the fp64 reference. The descriptions of real recorded plans (the host paths of every kernel, recorded
with `FakeJIT` stand-ins for Triton) are checked parameter by parameter against what Triton's launcher is given."""

import inspect
import shutil
import struct
import subprocess

import pytest
import torch

from rmsnorm_kernels import native, poison
from rmsnorm_kernels.reference import rmsnorm_backward_reference, rmsnorm_reference

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler on this machine")
EPS = 1e-6


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    import os

    old = os.environ.get("RMSNORM_NATIVE_DIR")
    os.environ["RMSNORM_NATIVE_DIR"] = str(tmp_path_factory.mktemp("native"))
    try:
        mod = native.load(native.build(cuda=False))
    finally:
        if old is None:
            os.environ.pop("RMSNORM_NATIVE_DIR")
        else:
            os.environ["RMSNORM_NATIVE_DIR"] = old
    assert mod.cuda is False
    native.STATE["module"] = mod  # so poisoning reaches it
    yield mod
    native.STATE["module"] = None
    mod.clear()


def _forward_launch(values):
    x, w, y, rstd = values[:4]
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(-1) + EPS)
    y.view(x.shape).copy_((xf * r[:, None] * w.float()).to(y.dtype))  # y is shaped like the caller's x
    rstd.copy_(r)


def _backward_launch(values):
    dy, x, w, rstd, dx, dw = values[:6]
    dyf, xf, wf = dy.float(), x.float(), w.float()
    xhat = xf * rstd[:, None]
    g = dyf * wf
    dx.view(x.shape).copy_((rstd[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True))).to(dx.dtype))
    dw.copy_((dyf * xhat).sum(0))


def _register(node, m, n, dtype, w_dtype, strategy, *, forward_launches=None, backward_launches=None):
    fwd = node.make_plan(
        2, [([m, n], dtype, 0), ([m], torch.float32, 0)], forward_launches or [_forward_launch], [2, 3]
    )
    bwd = node.make_plan(
        4, [([m, n], dtype, 0), ([n], torch.float32, 0)], backward_launches or [_backward_launch], [4, 5]
    )
    node.register_plans(m, n, dtype, w_dtype, "cpu", EPS, id(strategy), fwd, bwd)


def _close(a, b, dtype):
    tol = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 4e-3}[dtype]
    torch.testing.assert_close(a.double(), b.double(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("offset", [0.0, 1.0])
def test_node_values_and_gradients_match_fp64(node, dtype, offset):
    strategy = object()
    shape, n = (3, 37, 96), 96
    _register(node, 3 * 37, n, dtype, torch.float32 if offset else dtype, strategy)
    x = torch.randn(shape).to(dtype).requires_grad_()
    weight = (0.5 + torch.rand(n)).to(dtype).requires_grad_()
    before = node.stats()
    y = node.rms_norm(x, weight, EPS, offset, id(strategy))
    assert y is not None and y.shape == x.shape and y.dtype == dtype and y.grad_fn is not None
    assert node.stats()["nodes"] == before["nodes"] + 1
    dy = torch.randn(shape).to(dtype)
    dx, dw = torch.autograd.grad(y, (x, weight), dy)
    assert node.stats()["backwards"] == before["backwards"] + 1
    x64, w64, dy64 = x.detach().double(), weight.detach().double() + offset, dy.double()
    _close(y, rmsnorm_reference(x64, w64, EPS)[0], dtype)
    rdx, rdw = rmsnorm_backward_reference(x64, w64, dy64, EPS)
    assert dx.shape == x.shape and dx.dtype == dtype and dw.dtype == weight.dtype
    _close(dx, rdx, dtype)
    torch.testing.assert_close(
        dw.double(), rdw, rtol=3e-2 if dtype == torch.bfloat16 else 1e-4, atol=3e-2 if dtype == torch.bfloat16 else 1e-3
    )


def test_node_without_grad_runs_the_forward_alone(node):
    strategy = object()
    _register(node, 64, 32, torch.float32, torch.float32, strategy)
    x = torch.randn(64, 32)
    w = torch.randn(32)
    before = node.stats()
    with torch.no_grad():
        y = node.rms_norm(x, w, EPS, 0.0, id(strategy))
    assert y.grad_fn is None and node.stats()["nodes"] == before["nodes"]
    _close(y, rmsnorm_reference(x.double(), w.double(), EPS)[0], torch.float32)


def test_backward_takes_a_non_contiguous_dy(node):
    strategy = object()
    _register(node, 48, 64, torch.float32, torch.float32, strategy)
    x = torch.randn(48, 64, requires_grad=True)
    w = torch.randn(64, requires_grad=True)
    y = node.rms_norm(x, w, EPS, 0.0, id(strategy))
    dy = torch.randn(64, 48).t()  # a transposed view
    assert not dy.is_contiguous()
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    rdx, rdw = rmsnorm_backward_reference(x.detach().double(), w.detach().double(), dy.double(), EPS)
    _close(dx, rdx, torch.float32)
    torch.testing.assert_close(dw.double(), rdw, rtol=1e-4, atol=1e-3)


def test_unregistered_or_unplannable_calls_answer_none(node):
    strategy = object()
    _register(node, 16, 32, torch.float32, torch.float32, strategy)
    w = torch.randn(32)
    assert node.rms_norm(torch.randn(16, 32), w, EPS, 0.0, id(object())) is not None  # no grad: the plain entry
    x = torch.randn(16, 32, requires_grad=True)
    assert node.rms_norm(x, w, EPS, 0.0, id(object())) is None  # another strategy
    assert node.rms_norm(torch.randn(17, 32), w, EPS, 0.0, id(strategy)) is None  # another M
    assert node.rms_norm(torch.randn(16, 32).double(), w.double(), EPS, 0.0, id(strategy)) is None  # dtype
    assert node.rms_norm(torch.randn(32, 16).t(), w, EPS, 0.0, id(strategy)) is None  # not contiguous
    assert node.rms_norm(torch.randn(16, 32), w, 1e-5, 0.0, id(strategy)) is None  # eps
    assert node.rms_norm(torch.randn(16, 32), torch.randn(31), EPS, 0.0, id(strategy)) is None  # γ width


def test_outputs_are_nan_while_poisoning_and_launches_see_the_plan_tensors(node):
    strategy = object()
    seen = []
    _register(
        node, 8, 16, torch.float32, torch.float32, strategy, forward_launches=[lambda values: seen.append(values)]
    )  # writes nothing
    x, w = torch.randn(8, 16), torch.randn(16)
    with poison.poisoned_outputs():
        y = node.rms_norm(x, w, EPS, 0.0, id(strategy))
    assert torch.isnan(y).all()
    inputs_and_outputs = seen[0]
    assert len(inputs_and_outputs) == 4 and inputs_and_outputs[0].data_ptr() == x.data_ptr()
    assert inputs_and_outputs[1] is not None and inputs_and_outputs[2].data_ptr() == y.data_ptr()
    assert inputs_and_outputs[3].shape == (8,) and inputs_and_outputs[3].dtype == torch.float32


def test_scratch_is_kept_for_the_next_call_and_fresh_while_poisoning(node):
    """A plan's scratch output (here the dγ partials of a two-launch backward, as the persistent strategy's) is
    kept for the next call of that plan: every call still matches fp64 on fresh inputs; a poisoned call gets its own
    NaN-filled buffer; `clear` drops them."""
    strategy, m, n, groups = object(), 12, 16, 3
    partials = []

    def rows_and_partials(values):
        dy, x, w, rstd, dx, dw, partial = values
        partials.append((partial.data_ptr(), bool(torch.isnan(partial).all())))
        dyf, xf, wf = dy.float(), x.float(), w.float()
        xhat = xf * rstd[:, None]
        g = dyf * wf
        dx.view(x.shape).copy_((rstd[:, None] * (g - xhat * (g * xhat).mean(-1, keepdim=True))).to(dx.dtype))
        partial.copy_((dyf * xhat).view(groups, m // groups, n).sum(1))

    def column_sum(values):
        values[5].copy_(values[6].sum(0))

    fwd = node.make_plan(2, [([m, n], torch.float32, 0), ([m], torch.float32, 0)], [_forward_launch], [2, 3])
    bwd = node.make_plan(
        4,
        [([m, n], torch.float32, 0), ([n], torch.float32, 0), ([groups, n], torch.float32, 2)],
        [rows_and_partials, column_sum],
        [4, 5],
    )
    node.register_plans(m, n, torch.float32, torch.float32, "cpu", EPS, id(strategy), fwd, bwd)
    before = node.stats()["scratch"]

    def backward():
        x = torch.randn(m, n, requires_grad=True)
        w = (0.5 + torch.rand(n)).requires_grad_()
        dy = torch.randn(m, n)
        dx, dw = torch.autograd.grad(node.rms_norm(x, w, EPS, 0.0, id(strategy)), (x, w), dy)
        rdx, rdw = rmsnorm_backward_reference(x.detach().double(), w.detach().double(), dy.double(), EPS)
        _close(dx, rdx, torch.float32)
        torch.testing.assert_close(dw.double(), rdw, rtol=1e-4, atol=1e-3)
        return dw

    first, second = backward(), backward()
    assert first.data_ptr() != second.data_ptr()  # returned outputs are the callers' own
    assert partials[0][0] == partials[1][0]  # the scratch is the same buffer
    assert node.stats()["scratch"] == before + 1
    with poison.poisoned_outputs():
        backward()
    assert partials[2][0] != partials[0][0] and partials[2][1]  # its own buffer, NaN until written
    backward()
    assert partials[3][0] == partials[0][0]  # and the kept one again after
    node.clear()
    assert node.stats()["scratch"] == 0


def test_zeroed_scratch_starts_zero_is_kept_and_is_zeros_while_poisoning(node):
    """Kind 3 (the atomic backward's accumulator, which its drain kernel leaves zero): zero-filled when
    first made, then the same buffer call after call; a poisoned call gets fresh zeros, never NaN."""
    strategy, m, n = object(), 8, 16
    seen = []

    def backward_with_accumulator(values):
        dy, x, w, rstd, dx, dw, acc = values
        seen.append((acc.data_ptr(), acc.clone()))
        _backward_launch(values[:6])

    fwd = node.make_plan(2, [([m, n], torch.float32, 0), ([m], torch.float32, 0)], [_forward_launch], [2, 3])
    bwd = node.make_plan(
        4,
        [([m, n], torch.float32, 0), ([n], torch.float32, 0), ([n], torch.float32, 3)],
        [backward_with_accumulator],
        [4, 5],
    )
    node.register_plans(m, n, torch.float32, torch.float32, "cpu", EPS, id(strategy), fwd, bwd)

    def backward():
        x = torch.randn(m, n, requires_grad=True)
        w = (0.5 + torch.rand(n)).requires_grad_()
        dy = torch.randn(m, n)
        dx, dw = torch.autograd.grad(node.rms_norm(x, w, EPS, 0.0, id(strategy)), (x, w), dy)
        _close(
            dx, rmsnorm_backward_reference(x.detach().double(), w.detach().double(), dy.double(), EPS)[0], torch.float32
        )

    backward()
    backward()
    with poison.poisoned_outputs():
        backward()
    backward()
    ptrs = [p for p, _ in seen]
    assert all(not acc.any() for _, acc in seen)  # zero every time, poisoned or not
    assert ptrs[0] == ptrs[1] == ptrs[3] and ptrs[2] != ptrs[0]


def test_a_returned_scratch_output_is_refused(node):
    with pytest.raises(RuntimeError, match="is scratch"):
        node.make_plan(2, [([4], torch.float32, 2)], [], [2])
    with pytest.raises(RuntimeError, match="is scratch"):
        node.make_plan(2, [([4], torch.float32, 3)], [], [2])
    with pytest.raises(RuntimeError, match="kind is 0 to 3"):
        node.make_plan(2, [([4], torch.float32, 4)], [], [2])


def test_a_registered_plan_is_never_replaced(node):
    strategy = object()
    _register(node, 8, 8, torch.float32, torch.float32, strategy)
    wrong = node.make_plan(2, [([8, 8], torch.float32, 1), ([8], torch.float32, 1)], [], [2, 3])  # zeros, no launch
    node.register_plans(8, 8, torch.float32, torch.float32, "cpu", EPS, id(strategy), wrong, wrong)
    x, w = torch.randn(8, 8), torch.randn(8)
    y = node.rms_norm(x, w, EPS, 0.0, id(strategy))
    _close(y, rmsnorm_reference(x.double(), w.double(), EPS)[0], torch.float32)


def test_bad_descriptions_raise_clear_errors(node):
    with pytest.raises(RuntimeError, match="names tensor 5"):
        node.make_plan(2, [([4], torch.float32, 0)], [], [5])
    with pytest.raises(RuntimeError, match="8 fields"):
        node.make_plan(2, [], [(1, (1, 1, 1))], [])
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        plan = node.make_plan(2, [], [(1, (1, 1, 1), 4, 1, 0, False, False, [])], [])
        node.register_plans(1, 1, torch.float32, torch.float32, "cpu", EPS, 0, plan, 0)


def test_cuda_build_compiles(tmp_path):
    """The CUDA build (cubin launches through cuLaunchKernelEx on the current stream) compiles against this
    torch's headers and Triton's CUDA headers. The CPU wheel lacks one generated c10/cuda header: a stub here."""
    stub = tmp_path / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n")
    cmd = native.build_command(tmp_path / "x.so", cuda=True, name="x", extra=("-fsyntax-only", f"-I{tmp_path}"))
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


# ------------------------------------------------------------------------------ descriptions of real plans
class _Signature:
    def __init__(self, signature):
        self.signature = signature


def _signed(real_kernel, args, tail):
    """The signature Triton's binder gives a call: pointers by dtype, ints i32 / i64, floats fp32, constexprs
    (and ints equal to 1, which Triton specializes) "constexpr"."""
    triton_types = {torch.float32: "*fp32", torch.bfloat16: "*bf16", torch.float16: "*fp16"}
    fn = getattr(real_kernel, "fn", real_kernel)
    constexprs = {name for name, p in inspect.signature(fn).parameters.items() if "constexpr" in str(p.annotation)}
    assert constexprs
    signature = {}
    for name, value in zip(real_kernel.arg_names, (*args, *tail)):
        if name in constexprs or (isinstance(value, int) and not isinstance(value, bool) and value == 1):
            signature[name] = "constexpr"
        elif isinstance(value, torch.Tensor):
            signature[name] = triton_types[value.dtype]
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            signature[name] = "i64" if abs(int(value)) >= 2**31 else "i32"
    return signature


@pytest.fixture
def fake_gpu_signed(monkeypatch):
    """The launch-plan tests' fake GPU, with compiled stand-ins that carry a signature and an int handle."""
    from rmsnorm_kernels import fast_launch, launch_plans, triton_forward
    from rmsnorm_kernels.triton_backward import column_sum, function
    from rmsnorm_kernels.triton_backward.atomic import drain_kernel, rmsnorm_bwd_atomic_kernel
    from rmsnorm_kernels.triton_backward.persistent import rmsnorm_bwd_persistent_kernel
    from rmsnorm_kernels.triton_backward.workspace import rmsnorm_bwd_workspace_kernel
    from tests.kernels.fake_triton import FakeJIT

    class SignedJIT(FakeJIT):
        def __init__(self, real, log):
            super().__init__(real.arg_names, real.__name__ if hasattr(real, "__name__") else real.fn.__name__, log)
            self.real = real

        def __getitem__(self, grid):
            inner = super().__getitem__(grid)

            def launch(*args, **kwargs):
                compiled = inner(*args, **kwargs)
                tail = [kwargs[n] for n in self.arg_names[len(args) :]]
                compiled.src = _Signature(_signed(self.real, args, tail))
                compiled.function = 0x1234 + len(self.jit_calls)
                compiled.packed_metadata = (kwargs.get("num_warps", 4), 1, 0)
                compiled.run.launch_pdl = bool(kwargs.get("launch_pdl", False))
                return compiled

            return launch

    log = []
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 7, raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(fast_launch, "launcher", lambda compiled: compiled.run)
    fast_launch.clear()
    for k in [
        rmsnorm_bwd_persistent_kernel,
        rmsnorm_bwd_workspace_kernel,
        rmsnorm_bwd_atomic_kernel,
        drain_kernel,
        column_sum.column_sum_kernel,
        triton_forward.rmsnorm_fwd_rows_kernel,
        triton_forward.rmsnorm_fwd_chunked_kernel,
    ]:
        wrapper = fast_launch.FastKernel(SignedJIT(k, log))
        wrapper.direct = True
        fast_launch._WRAPPERS[k] = wrapper
    monkeypatch.setattr(launch_plans, "ENABLED", True)
    for cache in (triton_forward.FORWARD_PLANS, triton_forward.FORWARD_PLANS_NO_RSTD, function.BACKWARD_PLANS):
        cache.clear()
    yield log
    fast_launch.clear()
    for cache in (triton_forward.FORWARD_PLANS, triton_forward.FORWARD_PLANS_NO_RSTD, function.BACKWARD_PLANS):
        cache.clear()


def _pack(ty, value):
    if ty.startswith("*"):
        return None
    if ty == "fp32":
        return struct.unpack("<I", struct.pack("<f", value))[0]
    return int(value) & ((1 << (64 if ty == "i64" else 32)) - 1)


@pytest.mark.parametrize("which", ["forward-2048", "forward-768", "persistent", "workspace", "atomic"])
def test_descriptions_of_recorded_plans_hand_each_kernel_what_triton_would(fake_gpu_signed, monkeypatch, which):
    from rmsnorm_kernels import triton_forward
    from rmsnorm_kernels.triton_backward import function
    from rmsnorm_kernels.triton_backward.atomic import atomic_backward
    from rmsnorm_kernels.triton_backward.persistent import persistent_backward
    from rmsnorm_kernels.triton_backward.workspace import workspace_backward

    m = 300
    if which.startswith("forward"):
        n = int(which.split("-")[1])
        x, w = torch.randn(m, n).to(torch.bfloat16), torch.randn(n).to(torch.bfloat16)
        triton_forward.rmsnorm_forward(x, w, EPS)  # recorded
        plan = triton_forward.FORWARD_PLANS.plans[triton_forward.forward_key(x, w, EPS)]
        inputs = (x, w)
    else:
        n = 4096
        strategy = {"persistent": persistent_backward, "workspace": workspace_backward, "atomic": atomic_backward}[
            which
        ]
        dy, x = (torch.randn(m, n).to(torch.bfloat16) for _ in range(2))
        w, rstd = torch.randn(n).to(torch.bfloat16), torch.rand(m)
        function.run_strategy(strategy, dy, x, w, rstd)
        plan = function.BACKWARD_PLANS.plans[function.backward_key(strategy, x, dy.dtype, w)]
        inputs = (dy, x, w, rstd)
    assert plan
    n_inputs, outputs, launches, returned = native.describe(plan)
    assert n_inputs == len(inputs) and len(launches) == len(plan.launches) >= 1
    assert [o[:2] for o in outputs] == [(list(s), d) for s, d, _ in plan.outputs]
    for (compiled, _run, g0, g1, g2, template, _slots, tail), d in zip(plan.launches, launches):
        function_handle, grid, warps, ctas, shared, pdl, coop, params = d
        assert function_handle == compiled.function and grid == (g0, g1, g2)
        assert (warps, ctas, shared) == compiled.packed_metadata and pdl == compiled.run.launch_pdl and coop is False
        kept = [(ty, v) for ty, v in zip(compiled.src.signature.values(), (*template, *tail)) if ty != "constexpr"]
        assert len(params) == len(kept)
        for (slot, bits), (ty, value) in zip(params, kept):
            if ty.startswith("*"):
                assert slot == int(value) and bits == 0
            else:
                assert slot == -1 and bits == _pack(ty, value)


def test_a_launch_with_global_scratch_is_not_described():
    class Run:
        global_scratch_size, profile_scratch_size = 256, 0

    class Compiled:
        run = Run()

    assert native.describe_launch(Compiled(), (1, 1, 1), [], ()) is None
