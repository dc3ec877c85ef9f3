"""The autograd Function every Triton implementation is: the shared Triton forward, then the backward of
one dγ strategy. A strategy is ``backward(dy2d, x2d, weight, rstd) -> (dx2d, dγ)``."""

from __future__ import annotations

from typing import Callable

import torch

from kernels.triton_forward import as_rows, rmsnorm_forward

Strategy = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple]


class TritonRMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps, strategy):
        y, x2d, rstd = rmsnorm_forward(x, weight, eps)
        ctx.save_for_backward(x2d, weight, rstd)
        ctx.strategy = strategy
        ctx.x_shape = x.shape
        return y

    @staticmethod
    def backward(ctx, dy):
        x2d, weight, rstd = ctx.saved_tensors
        dy2d = as_rows(dy)
        dx2d, dw = ctx.strategy(dy2d, x2d, weight.contiguous(), rstd)
        return dx2d.view(ctx.x_shape), dw, None, None


def triton_rmsnorm_with(strategy: Strategy, x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    if not (torch.is_grad_enabled() and (getattr(x, "requires_grad", False) or getattr(weight, "requires_grad", False))):
        return rmsnorm_forward(x, weight, eps)[0]  # no graph to record: skip autograd.Function's bookkeeping
    return TritonRMSNormFunction.apply(x, weight, eps, strategy)
