"""The autograd Function every Triton implementation is in eager mode: the shared Triton forward, then the
backward of one dγ strategy. A strategy is ``backward(dy2d, x2d, weight, rstd) -> (dx2d, dγ)``.

Under ``torch.compile`` / ``torch.export`` the same kernels run as the ``rmsnorm_dashboard`` custom ops
(`rmsnorm_kernels/ops.py`), which Dynamo treats as opaque; `rmsnorm_kernels.ops.rms_norm` picks one or the other."""

from __future__ import annotations

from typing import Callable

import torch

from rmsnorm_kernels import launch_plans
from rmsnorm_kernels.launch_plans import PlanCache
from rmsnorm_kernels.triton_forward import as_rows, rmsnorm_forward

Strategy = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple]


BACKWARD_PLANS = PlanCache()


def run_strategy(strategy: Strategy, dy: torch.Tensor, x2d: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor):
    """``strategy(dy as rows, x2d, w, rstd)`` -> (dx2d, dγ); as a launch plan (`rmsnorm_kernels.launch_plans`) when
    dy is contiguous and every pointer 16-byte aligned. dγ may come back in fp32 (a strategy's
    ``plannable`` form leaves the cast to the caller)."""
    if launch_plans.ENABLED and dy.is_contiguous() and not ((dy.data_ptr() | x2d.data_ptr() | w.data_ptr() | rstd.data_ptr()) & 15):
        dy2d = dy if dy.dim() == 2 else dy.view(x2d.shape)
        key = (strategy, x2d.shape, x2d.stride(), x2d.dtype, dy.dtype, w.shape, w.dtype, x2d.get_device())
        return BACKWARD_PLANS.call(key, (dy2d, x2d, w, rstd), getattr(strategy, "plannable", strategy))
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


def eager_rmsnorm(strategy: Strategy, x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                  offset: float = 0.0) -> torch.Tensor:
    if not (torch.is_grad_enabled() and (getattr(x, "requires_grad", False) or getattr(weight, "requires_grad", False))):
        w = weight if offset == 0 else weight.float() + offset
        return rmsnorm_forward(x, w, eps, need_rstd=False)[0]  # no graph to record: no autograd bookkeeping
    return TritonRMSNormFunction.apply(x, weight, eps, strategy, offset)
