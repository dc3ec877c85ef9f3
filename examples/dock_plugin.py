"""A complete backward implementation in one file, in plain PyTorch: dγ summed in fixed 64-row chunks
(a workspace of chunk partials, then one sum), so it is deterministic. Loading this module registers it:
``RMSNORM_PLUGINS=examples.dock_plugin``, ``--plugin examples.dock_plugin``, or an entry point
``torch-chunked = "examples.dock_plugin:chunked_rmsnorm"`` in the group ``rmsnorm_dashboard.implementations``."""

import torch

from rmsnorm_kernels.registry import register

CHUNK = 64


class ChunkedRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return (xf * rstd * weight.float()).to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        x, weight, rstd = ctx.saved_tensors
        xf, dyf, n = x.float(), dy.float(), x.shape[-1]
        wdy = weight.float() * dyf
        dx = rstd * wdy - xf * rstd.pow(3) * (wdy * xf).sum(-1, keepdim=True) / n
        rows = (dyf * xf * rstd).reshape(-1, n)
        partials = torch.stack([c.sum(0) for c in rows.split(CHUNK)])  # the workspace: one row per chunk
        return dx.to(x.dtype), partials.sum(0).to(weight.dtype), None


@register(
    "torch-chunked",
    passes=("fwd", "bwd"),
    deterministic=True,
    family="workspace",
    description="Example plugin: plain-PyTorch backward, dγ summed over fixed 64-row chunks",
    launch=lambda M, N, sm_count: {
        "programs": -(-M // CHUNK),
        "rows_per_program": CHUNK,
        "partial_rows": -(-M // CHUNK),
    },
)
def chunked_rmsnorm(x, weight, eps=1e-6):
    return ChunkedRMSNorm.apply(x, weight, eps)
