"""Test plugin (``RMSNORM_PLUGINS=tests.app.slow_plugin``): a correct RMSNorm that takes at least
``SLEEP_S`` per call, so that a case lasts long enough for queueing, cancel and serialization to be observed
with tiny shapes on a shared CPU. Only ever loaded into a test server's processes."""

import time

import torch

from rmsnorm_kernels.registry import register

SLEEP_S = 0.05


@register(
    "slow-eager",
    passes=("fwd", "bwd"),
    family="baseline",
    description=f"test only: plain torch RMSNorm that sleeps {SLEEP_S} s per call",
    source="plugin",
)
def slow_eager(x, weight, eps=1e-6):
    time.sleep(SLEEP_S)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
