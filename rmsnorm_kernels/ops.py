"""The Triton RMSNorm as ``torch.library`` custom ops (namespace ``rmsnorm_dashboard``), so that
``torch.compile(fullgraph=True)`` sees one opaque op per pass (no graph break, nothing traced into the Triton
launcher), ``torch.export`` keeps them as ops, and CUDA-graph capture records their kernels.

* ``rmsnorm_dashboard::rms_norm(x, weight, eps, offset, backward) -> (y, rstd)``: the fused forward; y like
  x (contiguous), rstd fp32 shaped ``x.shape[:-1]``. γ is used as ``weight + offset`` in fp32 (``offset = 1``
  is Gemma's ``(1 + weight)`` form). ``backward`` names the dγ strategy its registered autograd uses;
* ``rmsnorm_dashboard::rms_norm_backward_{atomic,workspace,persistent}(dy, x, weight, rstd, offset)
  -> (dx, dweight)``: one op per strategy; dx like x, dweight in weight's dtype.

Every op has a fake (meta) implementation and the forward has its autograd registered. `rms_norm` below is
the entry point the module and the registry's functions use: in eager mode it asks the native node first
(`rmsnorm_kernels.native`: the recorded launch plans replayed from C++ inside a C++ autograd node), else the
same launch path through a plain ``autograd.Function``, which records the plans and hands them to the native
node (the dispatcher and custom-op autograd cost about 3× its host time, measured on CPU), under ``torch.compile`` / ``torch.export`` the ops (``RMSNORM_OPS_IN_EAGER=1``: the ops
always). With ``fallback=True`` (the drop-in module), floating inputs the kernels cannot take (fp64, a CPU
tensor when Triton is not interpreting, N > 65536) get `reference_rms_norm`, a PyTorch computation in fp32 (fp64 for fp64);
otherwise they raise the validation's clear error. Never a wrong result; a non-unit-stride last dim is
copied to unit stride first.
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

from rmsnorm_kernels import native
from rmsnorm_kernels.fast_launch import hooks_installed
from rmsnorm_kernels.triton_backward.atomic import atomic_backward
from rmsnorm_kernels.triton_backward.function import eager_rmsnorm, run_strategy
from rmsnorm_kernels.triton_backward.persistent import persistent_backward
from rmsnorm_kernels.triton_backward.workspace import workspace_backward
from rmsnorm_kernels.triton_forward import as_rows, rmsnorm_forward
from rmsnorm_kernels.triton_mode import interpreting
from rmsnorm_kernels.limits import MAX_N
from rmsnorm_kernels.validation import SUPPORTED_DTYPES, validate_rmsnorm_inputs

NAMESPACE = "rmsnorm_dashboard"
STRATEGIES = ("atomic", "workspace", "persistent")
IMPL_BACKWARD = {
    "triton": "persistent",
    "triton-persistent": "persistent",
    "triton-workspace": "workspace",
    "triton-atomic": "atomic",
}
"""Registry implementation name → the dγ strategy of its backward."""

_INTERPRETING = interpreting()  # asked once here: a functools.lru_cache call is a Dynamo warning in traced code
_OPS_IN_EAGER = os.environ.get("RMSNORM_OPS_IN_EAGER", "0") == "1"


_STRATEGY_FNS = {"atomic": atomic_backward, "workspace": workspace_backward, "persistent": persistent_backward}


_NATIVE_STRATEGY = {name: id(fn) for name, fn in _STRATEGY_FNS.items()}
"""The dγ strategy as the native node's registry keys it (`eager_rmsnorm` registers plans under ``id(strategy)``)."""


def _strategy_fn(name: str):
    fn = _STRATEGY_FNS.get(name)
    if fn is None:
        raise ValueError(f"unknown dγ strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return fn


def kernel_weight(weight: Tensor, offset: float) -> Tensor:
    """γ as the kernels read it: ``weight`` itself, or ``weight + offset`` in fp32 (Gemma adds 1 in fp32)."""
    return weight if offset == 0 else weight.float() + offset


def kernels_can_take(x: Tensor, weight: Tensor) -> bool:
    return (
        x.dtype in SUPPORTED_DTYPES
        and weight.dtype in SUPPORTED_DTYPES
        and (x.is_cuda or _INTERPRETING)
        and x.shape[-1] <= MAX_N
    )


def reference_rms_norm(x: Tensor, weight: Tensor, eps: float, offset: float = 0.0) -> Tensor:
    """The fallback: PyTorch math in fp32 (fp64 for fp64 inputs), differentiable, output in x's dtype."""
    compute = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(compute)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (weight.to(compute) + offset)
    return y.to(x.dtype)


# ---------------------------------------------------------------------------------------------- the ops
@torch.library.custom_op(f"{NAMESPACE}::rms_norm", mutates_args=())
def rms_norm_op(x: Tensor, weight: Tensor, eps: float, offset: float, backward: str) -> tuple[Tensor, Tensor]:
    y, _, rstd = rmsnorm_forward(x, kernel_weight(weight, offset), eps)
    return y, rstd.view(x.shape[:-1])


@rms_norm_op.register_fake
def _rms_norm_fake(x, weight, eps, offset, backward):
    validate_rmsnorm_inputs(x, weight, eps)
    if backward not in STRATEGIES:
        raise ValueError(f"unknown dγ strategy {backward!r}; choose one of {', '.join(STRATEGIES)}")
    return x.new_empty(x.shape), x.new_empty(x.shape[:-1], dtype=torch.float32)


def _backward_impl(strategy: str, dy: Tensor, x: Tensor, weight: Tensor, rstd: Tensor, offset: float):
    x2d = as_rows(x)
    w = kernel_weight(weight, offset)
    dx, dw = run_strategy(_strategy_fn(strategy), dy, x2d, w.contiguous(), rstd.reshape(-1).contiguous())
    return dx.view(x.shape), dw.to(weight.dtype)


def _define_backward(strategy: str):
    def impl(dy: Tensor, x: Tensor, weight: Tensor, rstd: Tensor, offset: float) -> tuple[Tensor, Tensor]:
        return _backward_impl(strategy, dy, x, weight, rstd, offset)

    impl.__name__ = f"rms_norm_backward_{strategy}"
    op = torch.library.custom_op(f"{NAMESPACE}::rms_norm_backward_{strategy}", impl, mutates_args=())

    @op.register_fake
    def _fake(dy, x, weight, rstd, offset):
        return x.new_empty(x.shape), weight.new_empty(weight.shape)

    return op


BACKWARD_OPS = {s: _define_backward(s) for s in STRATEGIES}


def _setup_context(ctx, inputs, output):
    x, weight, eps, offset, backward = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.offset = offset
    ctx.backward = backward


def _autograd_backward(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dw = BACKWARD_OPS[ctx.backward](dy, x, weight, rstd, ctx.offset)
    return dx, dw, None, None, None


rms_norm_op.register_autograd(_autograd_backward, setup_context=_setup_context)


# ------------------------------------------------------------------------------------ the entry point
def rms_norm(
    x: Tensor,
    weight: Tensor,
    eps: float = 1e-6,
    offset: float = 0.0,
    backward: str = "persistent",
    *,
    fallback: bool = False,
) -> Tensor:
    """RMSNorm of ``x`` ([..., N]) with γ = ``weight + offset``; trains through the ``backward`` dγ strategy.
    ``fallback``: floating inputs the kernels cannot take get `reference_rms_norm` (the drop-in module's
    choice) instead of the validation's clear TypeError / ValueError (the registry's: a benchmark must never
    time a fallback)."""
    if _OPS_IN_EAGER or torch.compiler.is_compiling():
        if (
            fallback
            and x.dtype.is_floating_point
            and weight.dtype.is_floating_point
            and not kernels_can_take(x, weight)
        ):
            return reference_rms_norm(x, weight, eps, offset)
        return rms_norm_op(x, weight, eps, offset, backward)[0]
    mod = native.STATE["module"]
    if mod is not None and not hooks_installed():  # the steady state: one call into C++ (rmsnorm_kernels.native)
        y = mod.rms_norm(x, weight, eps, offset, _NATIVE_STRATEGY.get(backward, 0))
        if y is not None:
            return y
    if fallback and x.dtype.is_floating_point and weight.dtype.is_floating_point and not kernels_can_take(x, weight):
        return reference_rms_norm(x, weight, eps, offset)
    return eager_rmsnorm(_strategy_fn(backward), x, weight, eps, offset)
