"""A plugin the CLI tests load with --plugin (plain torch, registered under a name no built-in uses)."""

import torch

from rmsnorm_kernels.registry import Implementation


def _rmsnorm(x, weight, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


impl = Implementation("cli-test-torch", fn=_rmsnorm, family="baseline", description="CLI test plugin", source="plugin")


def _off_by_one_percent(x, weight, eps=1e-6):
    return _rmsnorm(x, weight, eps) * 1.01


wrong = Implementation(
    "cli-test-wrong",
    fn=_off_by_one_percent,
    family="other",
    description="fast and 1 % off: must come back wrong",
    source="plugin",
)
