"""``RMSNorm``: any registered implementation as a drop-in ``nn.Module`` (learned γ, initialised to ones).

The Triton implementations go through `rmsnorm_kernels.ops.rms_norm`: custom ops under ``torch.compile`` /
``torch.export`` (no graph break), the cached launch path in eager mode, and a plain PyTorch fallback for
floating inputs the kernels cannot take (fp64, CPU without Triton). ``offset`` makes γ = weight + offset
(Gemma's ``1 + weight``, added in fp32). ``promote_output``: return ``promote_types(weight, x)`` like
Llama's ``weight * normed.to(input_dtype)`` (differs from x's dtype only when γ is wider than x)."""

from __future__ import annotations

import torch
from torch import nn

from rmsnorm_kernels.ops import IMPL_BACKWARD, rms_norm
from rmsnorm_kernels.registry import REGISTRY, load_all


class RMSNorm(nn.Module):
    def __init__(
        self,
        hidden: int,
        eps: float = 1e-6,
        impl: str = "triton-persistent",
        *,
        offset: float = 0.0,
        promote_output: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        load_all()
        implementation = REGISTRY.get(impl)  # KeyError naming the registered ones
        reason = implementation.unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"RMSNorm implementation {impl!r} cannot run here: {reason}")
        self.hidden = int(hidden)
        self.eps = float(eps)
        self.impl = impl
        self.offset = float(offset)
        self.promote_output = bool(promote_output)
        self.backward_strategy = IMPL_BACKWARD.get(impl)
        self._fn = implementation.fn
        self.weight = nn.Parameter(torch.ones(self.hidden, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        if self.backward_strategy is not None:
            y = rms_norm(x, weight, self.eps, self.offset, self.backward_strategy, fallback=True)
        else:
            y = self._fn(x, weight + self.offset if self.offset else weight, self.eps)
        if self.promote_output and weight.dtype != x.dtype:
            y = y.to(torch.promote_types(weight.dtype, x.dtype))
        return y

    def extra_repr(self) -> str:
        extra = f", offset={self.offset}" if self.offset else ""
        return f"{self.hidden}, eps={self.eps}, impl={self.impl!r}{extra}"
