"""``RMSNorm``: any registered implementation as a drop-in ``nn.Module`` (learned γ, initialised to ones)."""

from __future__ import annotations

import torch
from torch import nn

from kernels.registry import REGISTRY, load_all


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6, impl: str = "triton-persistent", *, device=None, dtype=None):
        super().__init__()
        load_all()
        implementation = REGISTRY.get(impl)  # KeyError naming the registered ones
        reason = implementation.unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"RMSNorm implementation {impl!r} cannot run here: {reason}")
        self.hidden = int(hidden)
        self.eps = float(eps)
        self.impl = impl
        self._fn = implementation.fn
        self.weight = nn.Parameter(torch.ones(self.hidden, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._fn(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.hidden}, eps={self.eps}, impl={self.impl!r}"
