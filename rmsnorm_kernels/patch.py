"""``patch_rmsnorm(model, impl="triton-persistent")``: swap every RMSNorm module of a Hugging Face
``transformers`` model (or any ``nn.Module`` tree) for this project's `rmsnorm_kernels.module.RMSNorm`.

A module is a candidate when its class name contains "RMSNorm"; it is replaced when it also has

* exactly one parameter, a 1-D ``weight``, no buffers and no sub-modules;
* a float ``variance_epsilon`` (Llama, Qwen2, Mistral, …) or ``eps`` (Gemma, …);
* a forward that computes ``x·rsqrt(mean(x²) + eps)·(weight + offset)`` with offset 0 (Llama's
  ``weight * normed.to(input_dtype)``) or 1 (Gemma's ``normed * (1.0 + weight.float())``, in fp32, then
  cast to x's dtype). This is checked by running the module's own forward once, hooks bypassed, on a small
  random input on its device and dtype, against both forms; a second call with x in another dtype tells
  whether its output dtype is x's or ``promote_types(weight, x)`` (Llama's when γ is wider than x).

The replacement shares the original ``weight`` Parameter (same tensor: optimizers, tying and state dicts
keep working), eps, dtype and device. Candidates that fail a check are left alone, logged and named in
the result with the reason. Modules on the meta device cannot be probed; for them the form is read from
the forward's source (``1.0 + self.weight`` / ``1 + self.weight`` → offset 1).
"""

from __future__ import annotations

import inspect
import logging

import torch
from torch import nn

from rmsnorm_kernels.module import RMSNorm

log = logging.getLogger(__name__)

PROBE_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-6, torch.float16: 1e-2, torch.bfloat16: 4e-2}


class PatchResult(int):
    """How many modules were replaced (an int), with ``replaced`` (their names) and ``skipped``
    (name → why a module that looks like an RMSNorm was left alone)."""

    replaced: list
    skipped: dict

    def __new__(cls, replaced: list, skipped: dict):
        obj = super().__new__(cls, len(replaced))
        obj.replaced = replaced
        obj.skipped = skipped
        return obj

    def __repr__(self) -> str:
        return f"PatchResult(replaced={len(self.replaced)}, skipped={self.skipped!r})"


def _eps_of(module) -> float | None:
    for name in ("variance_epsilon", "eps"):
        value = getattr(module, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _structure_problem(module) -> str | None:
    params = dict(module.named_parameters(recurse=False))
    weight = params.get("weight")
    if not isinstance(weight, nn.Parameter) or weight.dim() != 1:
        return "no 1-D weight parameter"
    if len(params) != 1:
        return f"parameters besides weight: {sorted(set(params) - {'weight'})}"
    if list(module.buffers(recurse=False)) or list(module.children()):
        return "has buffers or sub-modules"
    if _eps_of(module) is None:
        return "no float variance_epsilon / eps attribute"
    return None


def _offset_from_source(module) -> float:
    try:
        source = inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return 0.0
    return 1.0 if ("1.0 + self.weight" in source or "1 + self.weight" in source) else 0.0


def _probe(module, eps: float):
    """(offset, promote_output) of the module's own forward, or (None, reason)."""
    weight = module.weight
    n = weight.shape[0]
    generator = torch.Generator(device="cpu").manual_seed(1234)
    x = (torch.randn(3, n, generator=generator) * 2).to(weight.device, weight.dtype)
    forward = type(module).forward
    with torch.no_grad():
        out = forward(module, x)
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            return None, "its forward does not return a tensor shaped like its input"
        compute = torch.promote_types(weight.dtype, torch.float32)
        xc = x.to(compute)
        normed = xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + eps)
        scale = normed.abs().max() * (weight.to(compute).abs().max() + 1)
        errors = {
            off: ((out.to(compute) - normed * (weight.to(compute) + off)).abs().max() / scale).item()
            for off in (0.0, 1.0)
        }
        offset = min(errors, key=errors.get)
        tolerance = PROBE_TOLERANCE.get(weight.dtype, 4e-2)
        if not errors[offset] <= tolerance:
            return None, (
                f"its output matches neither x·rstd·γ nor x·rstd·(1 + γ) (relative error "
                f"{min(errors.values()):.2g} > {tolerance:g})"
            )
        other = torch.float16 if weight.dtype == torch.bfloat16 else torch.bfloat16
        out_other = forward(module, x.to(other))
    return (offset, out_other.dtype != other), None


def patch_rmsnorm(model: nn.Module, impl: str = "triton-persistent") -> PatchResult:
    """Replace every recognised RMSNorm module under ``model`` (in place) with ``RMSNorm(impl=impl)``.
    Returns how many were replaced (a `PatchResult`, also naming the ones left alone and why)."""
    replaced, skipped = [], {}
    for name, module in list(model.named_modules()):
        if isinstance(module, RMSNorm) or "rmsnorm" not in type(module).__name__.lower():
            continue
        label = f"{name or '<root>'} ({type(module).__name__})"
        problem = _structure_problem(module)
        eps = _eps_of(module)
        if problem is None:
            if module.weight.device.type == "meta":
                offset, promote = _offset_from_source(module), False
            else:
                form, problem = _probe(module, eps)
                offset, promote = form if form else (0.0, False)
        if problem is not None:
            skipped[label] = problem
            log.warning("patch_rmsnorm: left %s alone: %s", label, problem)
            continue
        weight = module.weight
        new = RMSNorm(
            weight.shape[0],
            eps=eps,
            impl=impl,
            offset=offset,
            promote_output=promote,
            device=weight.device,
            dtype=weight.dtype,
        )
        new.weight = weight  # the same Parameter object
        new.train(module.training)
        if name:
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name) if parent_name else model, child, new)
        else:
            raise ValueError("patch_rmsnorm: the model itself is an RMSNorm; wrap it or construct RMSNorm directly")
        replaced.append(label)
    return PatchResult(replaced, skipped)
