"""Host-overhead caches, on CPU: `rmsnorm_kernels.fast_launch` (compiled kernels launched directly, keyed so that a
new shape / dtype / alignment never reuses a stale one) with a stand-in for Triton's JIT, the validation
cache measured against its first call as a ratio, and the real kernels (interpreter) still correct when the
key changes between calls."""

import pytest
import torch

from rmsnorm_kernels import fast_launch, validation
from rmsnorm_kernels.reference import relative_error, rmsnorm_reference
from rmsnorm_kernels.triton_forward import rmsnorm_forward
from tests.kernels.fake_triton import FakeJIT, median_seconds


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 1234, raising=False)
    fast_launch.clear()
    yield
    fast_launch.clear()


def _kernel():
    kernel = fast_launch.FastKernel(FakeJIT(["X", "Y", "N", "eps", "BLOCK", "USE_PDL"]))
    kernel.direct = True  # as on a GPU (the interpreter turns it off)
    return kernel


def test_second_call_goes_straight_to_the_compiled_kernel(fake_cuda):
    kernel = _kernel()
    x, y = torch.randn(8, 64), torch.empty(8, 64)
    kernel[(8,)](x, y, 64, 1e-6, BLOCK=64, USE_PDL=False, num_warps=4)
    assert len(kernel.fn.jit_calls) == 1
    compiled = kernel.fn.jit_calls[0][3]
    for _ in range(3):
        kernel[(8,)](x, y, 64, 1e-5, BLOCK=64, USE_PDL=False, num_warps=4)
    assert len(kernel.fn.jit_calls) == 1 and len(compiled.launches) == 3
    g0, g1, g2, stream, function, metadata, launch_md, enter, exit_, *args = compiled.launches[-1]
    assert (g0, g1, g2, stream, function, metadata) == (8, 1, 1, 1234, compiled.function, compiled.packed_metadata)
    assert (launch_md, enter, exit_) == (None, None, None)
    assert args[0] is x and args[1] is y and args[2:] == [64, 1e-5, 64, False]  # constexprs in parameter order


@pytest.mark.parametrize("change", ["dtype", "misaligned", "int value", "constexpr", "option", "grid"])
def test_a_changed_key_never_reuses_a_compiled_kernel(fake_cuda, change):
    kernel = _kernel()
    x, y = torch.randn(8, 64), torch.empty(8, 64)
    call = dict(grid=(8,), args=(x, y, 64, 1e-6), kwargs=dict(BLOCK=64, USE_PDL=False, num_warps=4))
    kernel[call["grid"]](*call["args"], **call["kwargs"])
    if change == "dtype":
        call["args"] = (x.half(), y, 64, 1e-6)
    elif change == "misaligned":
        base = torch.randn(8 * 64 + 1)
        call["args"] = (base[1:].view(8, 64), y, 64, 1e-6)  # 4 bytes past a 16-byte boundary
        assert call["args"][0].data_ptr() % 16 != 0
    elif change == "int value":
        call["args"] = (x, y, 48, 1e-6)
    elif change == "constexpr":
        call["kwargs"] = dict(BLOCK=128, USE_PDL=False, num_warps=4)
    elif change == "option":
        call["kwargs"] = dict(BLOCK=64, USE_PDL=False, num_warps=8)
    else:
        call["grid"] = (4,)
    kernel[call["grid"]](*call["args"], **call["kwargs"])
    assert len(kernel.fn.jit_calls) == 2  # the new key went through the JIT, not the first compiled kernel
    assert kernel.fn.jit_calls[0][3].launches == []


def test_launch_hooks_and_missing_constexprs_use_the_jit(fake_cuda):
    from triton import knobs

    kernel = _kernel()
    x, y = torch.randn(8, 64), torch.empty(8, 64)
    hook = lambda metadata: None  # noqa: E731
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        for _ in range(2):
            kernel[(8,)](x, y, 64, 1e-6, BLOCK=64, USE_PDL=False)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert len(kernel.fn.jit_calls) == 2
    for _ in range(2):
        kernel[(8,)](x, y, 64, 1e-6, BLOCK=64)  # USE_PDL left to a default: not launchable directly
    assert len(kernel.fn.jit_calls) == 4


def test_cached_validation_is_cheaper_than_the_first_call():
    x, w = torch.randn(16, 64), torch.randn(64)

    def first():
        validation._VALID.clear()
        validation.validate_rmsnorm_inputs(x, w, 1e-6)

    def cached():
        validation.validate_rmsnorm_inputs(x, w, 1e-6)

    ratios = []
    for _ in range(3):  # interleaved rounds: a busy core slows both alike
        ratios.append(median_seconds(cached, 400) / median_seconds(first, 400))
    assert min(ratios) < 0.8, ratios


def test_cached_validation_still_rejects_bad_eps_and_new_shapes():
    x, w = torch.randn(4, 8), torch.randn(8)
    validation.validate_rmsnorm_inputs(x, w, 1e-6)
    with pytest.raises(ValueError, match="eps"):
        validation.validate_rmsnorm_inputs(x, w, -1.0)
    with pytest.raises(ValueError, match="eps"):
        validation.validate_rmsnorm_inputs(x, w, float("nan"))
    with pytest.raises(ValueError, match="last dimension N is 7"):
        validation.validate_rmsnorm_inputs(torch.randn(4, 7), w, 1e-6)


def test_real_kernels_correct_when_shape_and_dtype_change_between_calls():
    for shape, dtype in [
        ((5, 64), torch.float32),
        ((5, 64), torch.bfloat16),
        ((9, 64), torch.float32),
        ((5, 100), torch.float32),
        ((5, 64), torch.float32),
    ]:
        x = torch.randn(*shape).to(dtype)
        w = (1 + 0.3 * torch.randn(shape[-1])).to(dtype)
        y, _, rstd = rmsnorm_forward(x, w, 1e-6)
        y_ref, _ = rmsnorm_reference(x, w, 1e-6)
        assert y.dtype == dtype and relative_error(y, y_ref) < (1e-5 if dtype == torch.float32 else 1e-2)
    misaligned = torch.randn(5 * 64 + 1)[1:].view(5, 64)
    y, _, _ = rmsnorm_forward(misaligned, torch.ones(64), 1e-6)
    assert relative_error(y, rmsnorm_reference(misaligned, torch.ones(64), 1e-6)[0]) < 1e-5
