"""The fp64 reference every implementation is checked against: RMSNorm forward and backward, computed in
float64 from the same inputs (whatever their dtype), so that the reference itself adds no rounding worth
counting."""

from __future__ import annotations

import torch


def rmsnorm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """``y = x · rsqrt(mean(x²) + eps) · γ`` in float64. Returns ``(y, rstd)``; ``rstd`` has x's leading shape."""
    x64 = x.detach().to(torch.float64)
    w64 = weight.detach().to(torch.float64)
    rstd = torch.rsqrt(x64.pow(2).mean(dim=-1) + eps)
    return x64 * rstd.unsqueeze(-1) * w64, rstd


def rmsnorm_backward_reference(
    x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dx, dγ)`` in float64 for the upstream gradient ``dy``:

    ``dx = rstd·(γ·dy) − x·rstd³·mean(γ·dy·x)``, ``dγ = Σ_rows dy·x·rstd``."""
    x64 = x.detach().to(torch.float64)
    w64 = weight.detach().to(torch.float64)
    dy64 = dy.detach().to(torch.float64)
    n = x64.shape[-1]
    rstd = torch.rsqrt(x64.pow(2).mean(dim=-1, keepdim=True) + eps)
    wdy = w64 * dy64
    mean_wdy_x = (wdy * x64).sum(dim=-1, keepdim=True) / n
    dx = rstd * wdy - x64 * rstd.pow(3) * mean_wdy_x
    dw = (dy64 * x64 * rstd).reshape(-1, n).sum(dim=0)
    return dx, dw


def relative_error(
    actual: torch.Tensor, expected: torch.Tensor, scale: float | None = None, *, on_host: bool = True
) -> float:
    """‖actual − expected‖ / max(‖expected‖, scale) in float64 (NaN or Inf anywhere gives ``inf``: it never
    passes). ``scale`` is the size of the terms a result is the difference of (see `dx_scale`): where they
    nearly cancel, rounding is judged against them, not against the tiny difference. ``on_host=False`` keeps the
    arithmetic on the tensors' device (on a GPU host with a slow CPU, 268M fp64 elements take minutes there)."""
    a = actual.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    if on_host:
        a, e = a.cpu(), e.cpu()
    if a.shape != e.shape:
        raise ValueError(f"shape mismatch: got {tuple(a.shape)}, expected {tuple(e.shape)}")
    if not torch.isfinite(a).all():
        return float("inf")
    denom = max(e.norm().item(), scale or 0.0)
    diff = (a - e).norm().item()
    return diff / denom if denom > 0 else diff


def dx_scale(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor, eps: float = 1e-6) -> float:
    """‖rstd·γ·dy‖: the size of dx's first term. At N = 1 the two terms of dx cancel to ~eps/(x²+eps) of it,
    so dx is compared relative to this rather than to its own (tiny) norm."""
    x64 = x.detach().to(torch.float64)
    rstd = torch.rsqrt(x64.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (rstd * weight.detach().to(torch.float64) * dy.detach().to(torch.float64)).norm().item()


TOLERANCE = {
    torch.float32: 1e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 1e-2,
}
"""Relative-norm error bound per input dtype: fp32 arithmetic lands near 1e-7, a half-precision output
rounds each element by ≤ 2^-11 (fp16) or 2^-8 (bf16) relative, i.e. ~3e-4 / ~2.5e-3 in norm; the bounds
leave room for a reduction order that differs but never for a wrong or unwritten element."""


def tolerance_for(dtype: torch.dtype) -> float:
    return TOLERANCE[dtype]
