"""Input checks shared by every implementation: a wrong call fails here with a plain ValueError/TypeError
that names the problem, never deep inside a kernel."""

from __future__ import annotations

import torch

from rmsnorm_kernels.limits import MAX_N

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def validate_rmsnorm_inputs(x, weight, eps=1e-6, *, max_n: int | None = MAX_N) -> int:
    """Check ``x`` ([..., N]) and ``weight`` ([N]) for an RMSNorm call; return N.

    Raises TypeError for non-tensors and non-floating or unsupported dtypes, ValueError for an empty
    tensor, a weight whose length is not N, mismatched devices, N above ``max_n`` or a bad eps.
    What depends only on (types, shapes, dtypes, devices) is checked once per combination (host time)."""
    try:
        key = (type(x), type(weight), x.shape, weight.shape, x.dtype, weight.dtype, x.device, weight.device, max_n)
        known = key in _VALID
    except (AttributeError, TypeError):  # not tensors, or symbolic shapes (unhashable)
        key, known = None, False
    if known and type(eps) in (int, float) and eps >= 0:
        return x.shape[-1]
    n = _validate(x, weight, eps, max_n)
    if key is not None and len(_VALID) < 4096:
        _VALID.add(key)
    return n


_VALID: set = set()


def _validate(x, weight, eps, max_n) -> int:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight (γ) must be a torch.Tensor, got {type(weight).__name__}")
    for label, t in (("x", x), ("weight (γ)", weight)):
        if not t.dtype.is_floating_point:
            raise TypeError(
                f"{label} has dtype {_dtype_name(t.dtype)}; RMSNorm needs a floating dtype "
                f"({', '.join(_dtype_name(d) for d in SUPPORTED_DTYPES)})"
            )
        if t.dtype not in SUPPORTED_DTYPES:
            raise TypeError(
                f"{label} has dtype {_dtype_name(t.dtype)}, which is not supported; use one of "
                f"{', '.join(_dtype_name(d) for d in SUPPORTED_DTYPES)}"
            )
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension [..., N], got a 0-d tensor")
    if x.numel() == 0:
        raise ValueError(f"x is empty (shape {tuple(x.shape)}): nothing to normalize")
    if weight.dim() != 1:
        raise ValueError(f"weight (γ) must be 1-D of length N, got shape {tuple(weight.shape)}")
    n = x.shape[-1]
    if weight.shape[0] != n:
        raise ValueError(f"weight (γ) has length {weight.shape[0]} but x's last dimension N is {n}")
    if x.device != weight.device:
        raise ValueError(f"x is on {x.device} but weight (γ) is on {weight.device}: put both on one device")
    if max_n is not None and n > max_n:
        raise ValueError(f"N = {n} is above the supported maximum {max_n} for this implementation")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps >= 0:
        raise ValueError(f"eps must be a non-negative number, got {eps!r}")
    return n
