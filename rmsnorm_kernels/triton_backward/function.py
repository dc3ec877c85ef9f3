"""The autograd Function every Triton implementation is in eager mode: the shared Triton forward, then the
backward of one dγ strategy. A strategy is ``backward(dy2d, x2d, weight, rstd) -> (dx2d, dγ)``.

Under ``torch.compile`` / ``torch.export`` the same kernels run as the ``rmsnorm_dashboard`` custom ops
(`rmsnorm_kernels/ops.py`), which Dynamo treats as opaque; `rmsnorm_kernels.ops.rms_norm` picks one or the other."""

from __future__ import annotations

from typing import Callable

import torch

from rmsnorm_kernels import launch_plans, native
from rmsnorm_kernels.launch_plans import PlanCache
from rmsnorm_kernels.triton_forward import FORWARD_PLANS, FORWARD_PLANS_NO_RSTD, as_rows, forward_key, rmsnorm_forward

Strategy = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple]


BACKWARD_PLANS = PlanCache()


def backward_key(strategy: Strategy, x2d: torch.Tensor, dy_dtype: torch.dtype, w: torch.Tensor) -> tuple:
    """The launch-plan key of one strategy's backward of contiguous rows ``x2d`` (dy contiguous, like x2d)."""
    return (strategy, x2d.shape, x2d.stride(), x2d.dtype, dy_dtype, w.shape, w.dtype, x2d.get_device())


def run_strategy(strategy: Strategy, dy: torch.Tensor, x2d: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor):
    """``strategy(dy as rows, x2d, w, rstd)`` -> (dx2d, dγ); as a launch plan (`rmsnorm_kernels.launch_plans`) when
    dy is contiguous and every pointer 16-byte aligned. dγ comes back in ``w``'s dtype (fp32 for Gemma's offset
    weight: the caller casts it to the weight's)."""
    if (
        launch_plans.ENABLED
        and dy.is_contiguous()
        and not ((dy.data_ptr() | x2d.data_ptr() | w.data_ptr() | rstd.data_ptr()) & 15)
    ):
        dy2d = dy if dy.dim() == 2 else dy.view(x2d.shape)
        return BACKWARD_PLANS.call(backward_key(strategy, x2d, dy.dtype, w), (dy2d, x2d, w, rstd), strategy)
    return strategy(as_rows(dy), x2d, w, rstd)


class TritonRMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps, strategy, offset=0.0):
        w = weight if offset == 0 else weight.float() + offset
        y, x2d, rstd = rmsnorm_forward(x, w, eps)
        ctx.save_for_backward(x2d, w, rstd)
        ctx.strategy = strategy
        ctx.x_shape = x.shape
        ctx.weight_dtype = weight.dtype
        return y

    @staticmethod
    def backward(ctx, dy):
        x2d, w, rstd = ctx.saved_tensors
        dx2d, dw = run_strategy(ctx.strategy, dy, x2d, w if w.is_contiguous() else w.contiguous(), rstd)
        if dw.dtype != ctx.weight_dtype:
            dw = dw.to(ctx.weight_dtype)
        return dx2d.view(ctx.x_shape), dw, None, None, None


def eager_rmsnorm(
    strategy: Strategy, x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, offset: float = 0.0
) -> torch.Tensor:
    """The Python path of an eager call: the launch plans (recorded, then replayed), offered to the native node
    (`rmsnorm_kernels.native`) once recorded. `rmsnorm_kernels.ops.rms_norm` asks the native node first."""
    if not (
        torch.is_grad_enabled() and (getattr(x, "requires_grad", False) or getattr(weight, "requires_grad", False))
    ):
        w = weight if offset == 0 else weight.float() + offset
        y = rmsnorm_forward(x, w, eps, need_rstd=False)[0]  # no graph to record: no autograd bookkeeping
    else:
        y = TritonRMSNormFunction.apply(x, weight, eps, strategy, offset)
    if launch_plans.ENABLED and x.is_cuda:
        offer_native(strategy, x, weight, eps, offset)
    return y


def offer_native(strategy: Strategy, x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float) -> bool:
    """Hand the plans recorded for this call's key to the native node (its module is built in the background
    on the first call; until it is loaded this does nothing)."""
    mod = native.module()
    if mod is None or not x.is_contiguous() or x.dim() < 1:
        return False
    x2d = x.view(-1, x.shape[-1])
    w = weight if offset == 0 else weight.float() + offset
    fkey = forward_key(x2d, w, eps)
    return native.offer(
        mod,
        strategy,
        x2d,
        w,
        eps,
        FORWARD_PLANS.plans.get(fkey),
        FORWARD_PLANS_NO_RSTD.plans.get(fkey),
        BACKWARD_PLANS.plans.get(backward_key(strategy, x2d, x2d.dtype, w)),
        (fkey, strategy),
    )
