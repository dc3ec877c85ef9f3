"""The autograd Function every Triton implementation is in eager mode: the shared Triton forward, then the
backward of one dγ strategy. A strategy is ``backward(dy2d, x2d, weight, rstd) -> (dx2d, dγ)``.

Under ``torch.compile`` / ``torch.export`` the same kernels run as the ``rmsnorm_dashboard`` custom ops
(`kernels/ops.py`), which Dynamo treats as opaque; `kernels.ops.rms_norm` picks one or the other."""

from __future__ import annotations

from typing import Callable

import torch

from kernels.triton_forward import as_rows, rmsnorm_forward

Strategy = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple]


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
        dx2d, dw = ctx.strategy(as_rows(dy), x2d, w if w.is_contiguous() else w.contiguous(), rstd)
        if dw.dtype != ctx.weight_dtype:
            dw = dw.to(ctx.weight_dtype)
        return dx2d.view(ctx.x_shape), dw, None, None, None


def eager_rmsnorm(strategy: Strategy, x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                  offset: float = 0.0) -> torch.Tensor:
    if not (torch.is_grad_enabled() and (getattr(x, "requires_grad", False) or getattr(weight, "requires_grad", False))):
        w = weight if offset == 0 else weight.float() + offset
        return rmsnorm_forward(x, w, eps)[0]  # no graph to record: skip autograd.Function's bookkeeping
    return TritonRMSNormFunction.apply(x, weight, eps, strategy, offset)
