"""The peers every Triton kernel is measured against, in the same registry (family ``baseline``):

* ``eager``: plain PyTorch ops in fp32, as Hugging Face's LlamaRMSNorm computes it;
* ``torch-compile``: that same function under ``torch.compile`` (one static graph per shape and dtype);
* ``torch-native``: ``torch.nn.functional.rms_norm``;
* ``liger``: Liger-Kernel's RMSNorm autograd function (casting mode "llama", offset 0, dy not overwritten);
* ``quack``: QuACK's ``quack.rmsnorm`` (CuTe DSL, CUDA only).

Each validates its inputs with the same checks as the Triton kernels (no N limit for the torch ones)."""

from __future__ import annotations

import shutil

import torch

from rmsnorm_kernels.registry import register
from rmsnorm_kernels.triton_mode import interpreting, triton_unavailable_reason
from rmsnorm_kernels.limits import MAX_N
from rmsnorm_kernels.validation import validate_rmsnorm_inputs


def rmsnorm_eager_math(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Hugging Face LlamaRMSNorm: upcast to fp32, mean of squares, rsqrt, cast back, scale by γ."""
    xf = x.to(torch.float32)
    variance = xf.pow(2).mean(-1, keepdim=True)
    normalized = (xf * torch.rsqrt(variance + eps)).to(x.dtype)
    return (weight * normalized).to(x.dtype)


@register("eager", family="baseline", description="Plain PyTorch ops, fp32 accumulation (Hugging Face LlamaRMSNorm)")
def eager_rmsnorm(x, weight, eps=1e-6):
    validate_rmsnorm_inputs(x, weight, eps, max_n=None)
    return rmsnorm_eager_math(x, weight, eps)


_COMPILED = None


def compiled_rmsnorm_math():
    """The eager function under ``torch.compile(dynamic=False)``, built once. Set up so that a sweep of many
    shapes recompiles (one static kernel per shape) instead of silently falling back to eager after the
    default 8 recompiles, and so that ``autograd.grad(..., retain_graph=True)`` can run the compiled
    backward repeatedly (no donated buffers)."""
    global _COMPILED
    if _COMPILED is None:
        import torch._dynamo.config as dynamo_config
        import torch._functorch.config as functorch_config

        functorch_config.donated_buffer = False
        for name, floor in (
            ("recompile_limit", 256),
            ("cache_size_limit", 256),
            ("accumulated_recompile_limit", 4096),
            ("accumulated_cache_size_limit", 4096),
        ):
            if hasattr(dynamo_config, name):
                setattr(dynamo_config, name, max(getattr(dynamo_config, name), floor))
        _COMPILED = torch.compile(rmsnorm_eager_math, dynamic=False)
    return _COMPILED


def compile_unavailable_reason() -> str | None:
    if torch.cuda.is_available():
        return None
    if not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
        return "torch.compile on CPU needs a C++ compiler (g++ or clang++), and none is on PATH"
    return None


@register(
    "torch-compile",
    family="baseline",
    description="The eager function under torch.compile (TorchInductor, one static graph per shape)",
    available_when=compile_unavailable_reason,
)
def torch_compile_rmsnorm(x, weight, eps=1e-6):
    validate_rmsnorm_inputs(x, weight, eps, max_n=None)
    return compiled_rmsnorm_math()(x, weight, eps)


@register("torch-native", family="baseline", description="torch.nn.functional.rms_norm (PyTorch's own fused kernel)")
def torch_native_rmsnorm(x, weight, eps=1e-6):
    validate_rmsnorm_inputs(x, weight, eps, max_n=None)
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


@register(
    "liger",
    family="baseline",
    deterministic=True,
    description="Liger-Kernel's LigerRMSNormFunction (Triton; casting mode llama, offset 0, dy kept)",
    requires=("liger_kernel",),
    available_when=triton_unavailable_reason,
    uses_triton=True,
)
def liger_rmsnorm(x, weight, eps=1e-6):
    validate_rmsnorm_inputs(x, weight, eps, max_n=MAX_N)
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    try:  # in_place=False: Liger would otherwise overwrite dy with dx, and the engine reuses dy
        return LigerRMSNormFunction.apply(x, weight, eps, 0.0, "llama", False)
    except TypeError:  # versions before the in_place argument never wrote into dy
        return LigerRMSNormFunction.apply(x, weight, eps, 0.0, "llama")


def quack_unavailable_reason() -> str | None:
    if interpreting() or not torch.cuda.is_available():
        return "QuACK is written in the CuTe DSL and runs only on an NVIDIA GPU (sm90+); none is in use here"
    major, _ = torch.cuda.get_device_capability()
    if major < 9:
        return f"QuACK needs an sm90+ GPU (Hopper or newer); this one is sm{major}x"
    return None


@register(
    "quack",
    family="baseline",
    deterministic=True,
    description="QuACK's quack.rmsnorm (CuTe DSL kernels by Tri Dao's lab; Hopper+ only)",
    requires=("quack",),
    available_when=quack_unavailable_reason,
)
def quack_rmsnorm(x, weight, eps=1e-6):
    validate_rmsnorm_inputs(x, weight, eps, max_n=None)
    from quack.rmsnorm import rmsnorm

    x2d = x.reshape(-1, x.shape[-1])
    return rmsnorm(x2d, weight, eps=eps).view(x.shape)
