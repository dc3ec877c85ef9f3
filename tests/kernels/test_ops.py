"""The rmsnorm_dashboard custom ops under Triton's interpreter: values against the fp64 reference (poisoned
outputs), opcheck, torch.compile(fullgraph=True, backend="eager") with no graph break and no warning,
torch.export, and the drop-in module's fallback for inputs the kernels cannot take."""

import logging
import warnings

import pytest
import torch

from rmsnorm_kernels import ops
from rmsnorm_kernels.module import RMSNorm
from rmsnorm_kernels.poison import poisoned_outputs
from rmsnorm_kernels.reference import (
    dx_scale,
    relative_error,
    rmsnorm_backward_reference,
    rmsnorm_reference,
    tolerance_for,
)
from tests.kernels.kernel_inputs import random_inputs


@pytest.mark.parametrize("strategy", ops.STRATEGIES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("offset", (0.0, 1.0))
def test_ops_match_fp64_reference(strategy, dtype, offset):
    x, w, dy = random_inputs((3, 5, 100), dtype)
    w_eff64 = w.double() + offset
    with poisoned_outputs():
        y, rstd = ops.rms_norm_op(x, w, 1e-6, offset, strategy)
        dx, dw = ops.BACKWARD_OPS[strategy](dy, x, w, rstd, offset)
    y_ref, rstd_ref = rmsnorm_reference(x.double(), w_eff64, 1e-6)
    dx_ref, dw_ref = rmsnorm_backward_reference(x, w_eff64, dy, 1e-6)
    tol = tolerance_for(dtype)
    assert y.dtype == dtype and y.shape == x.shape and rstd.dtype == torch.float32 and rstd.shape == x.shape[:-1]
    assert dx.dtype == dtype and dw.dtype == w.dtype
    assert relative_error(y, y_ref) < tol
    assert relative_error(rstd, rstd_ref.reshape(rstd.shape)) < 1e-5
    assert relative_error(dx, dx_ref, dx_scale(x, w_eff64, dy)) < tol
    assert relative_error(dw, dw_ref) < tol


@pytest.mark.parametrize("strategy", ops.STRATEGIES)
def test_opcheck(strategy):
    x, w, dy = random_inputs((4, 33), torch.float32)
    x.requires_grad_(True)
    w.requires_grad_(True)
    for offset in (0.0, 1.0):
        torch.library.opcheck(ops.rms_norm_op, (x, w, 1e-5, offset, strategy))
        _, rstd = ops.rms_norm_op(x.detach(), w.detach(), 1e-5, offset, strategy)
        torch.library.opcheck(ops.BACKWARD_OPS[strategy], (dy, x.detach(), w.detach(), rstd, offset))


class _Block(torch.nn.Module):
    def __init__(self, impl, offset=0.0):
        super().__init__()
        self.proj = torch.nn.Linear(48, 48)
        self.norm = RMSNorm(48, eps=1e-5, impl=impl, offset=offset)

    def forward(self, x):
        return self.proj(self.norm(x)).relu()


def _grads(model, x):
    x = x.detach().clone().requires_grad_(True)
    out = model(x)
    out.square().sum().backward()
    return out.detach(), x.grad, model.norm.weight.grad


@pytest.mark.parametrize("impl", ("triton-persistent", "triton-workspace", "triton-atomic", "triton"))
def test_compile_fullgraph_eager_backend_no_break_no_warning(impl, caplog):
    torch.manual_seed(0)
    model = _Block(impl, offset=1.0 if impl == "triton-workspace" else 0.0)
    with torch.no_grad():
        model.norm.weight.copy_(1 + 0.3 * torch.randn(48))
    x = torch.randn(2, 7, 48)
    expected = _grads(model, x)
    model.zero_grad()
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        compiled = torch.compile(model, fullgraph=True, backend="eager")
        got = _grads(compiled, x)
    assert [str(w.message) for w in caught] == []
    assert [r.getMessage() for r in caplog.records if r.name.startswith("torch")] == []
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_compile_aot_eager_runs_the_registered_backward():
    torch.manual_seed(1)
    model = _Block("triton-persistent")
    x = torch.randn(5, 48)
    expected = _grads(model, x)
    model.zero_grad()
    torch._dynamo.reset()
    got = _grads(torch.compile(model, fullgraph=True, backend="aot_eager"), x)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


def test_registry_function_traces_to_the_op():
    from rmsnorm_kernels.registry import REGISTRY, load_all

    load_all()
    fn = REGISTRY.get("triton-atomic").fn
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda x, w: fn(x, w, 1e-6))(torch.randn(4, 16), torch.randn(16))
    assert explained.graph_break_count == 0
    assert "rmsnorm_dashboard.rms_norm" in str(explained.graphs[0].code)


def test_export_keeps_the_op():
    torch.manual_seed(2)
    model = _Block("triton-persistent", offset=1.0)
    x = torch.randn(3, 48)
    exported = torch.export.export(model, (x,))
    targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
    assert any("rmsnorm_dashboard.rms_norm" in t for t in targets)
    torch.testing.assert_close(exported.module()(x), model(x))


def test_module_falls_back_for_inputs_the_kernels_cannot_take():
    norm = RMSNorm(24, impl="triton-persistent", dtype=torch.float64)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(24, dtype=torch.float64))
    x = torch.randn(5, 24, dtype=torch.float64, requires_grad=True)
    y = norm(x)
    y_ref, _ = rmsnorm_reference(x, norm.weight, norm.eps)
    assert y.dtype == torch.float64 and relative_error(y, y_ref) < 1e-12
    y.sum().backward()
    assert x.grad is not None and norm.weight.grad is not None


def test_non_unit_stride_last_dim_is_correct():
    x, w, dy = random_inputs((40, 6), torch.float32)
    xt = x.t()  # [6, 40] with last-dim stride 6
    y = RMSNorm(40, impl="triton-persistent")(xt)
    y_ref, _ = rmsnorm_reference(xt, torch.ones(40), 1e-6)
    assert relative_error(y, y_ref) < 1e-5


def test_clear_errors_from_the_op():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="length 7"):
        ops.rms_norm_op(x, torch.randn(7), 1e-6, 0.0, "persistent")
    with pytest.raises(TypeError, match="int64"):
        ops.rms_norm_op(torch.ones(4, 8, dtype=torch.int64), torch.randn(8), 1e-6, 0.0, "persistent")
    with pytest.raises(ValueError, match="unknown dγ strategy"):
        ops.rms_norm(x, torch.randn(8), 1e-6, 0.0, "nope")
