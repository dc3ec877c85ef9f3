"""A newcomer's backward with a NEW dγ family, in one file (what tests/engine/test_engine_new_family.py checks
the engine and the listing pick up with no other edit): plain PyTorch, dγ summed as a pairwise tree over
16-row chunk partials, so it is deterministic. Its family "tree" says what that costs: the tree's nodes are
its partial rows (2·G − 1 for G chunks), each written once and read once."""

import torch

from rmsnorm_kernels.families import BackwardFamily
from rmsnorm_kernels.registry import register

CHUNK = 16

TREE = BackwardFamily(
    "tree",
    "dγ partials of 16-row chunks summed pairwise, level by level (deterministic)",
    partial_rows=lambda grid, M, N: 2 * grid["programs"] - 1,
    extra_bytes=lambda grid, M, N: 2 * (2 * grid["programs"] - 1) * N * 4 + grid["programs"] * 8,
    extra_bytes_note=lambda grid, M, N: f"+ tree of {2 * grid['programs'] - 1} fp32 partial rows, and its index",
    partial_rows_text="2·G − 1: the nodes of a binary tree over G chunks",
    extra_bytes_text="every node written and read once (2·rows·N·4), plus 8 bytes of index per chunk",
)


def tree_grid(M: int, N: int, sm_count: int) -> dict:
    return {"programs": -(-M // CHUNK), "rows_per_program": CHUNK}


def tree_sum(partials: torch.Tensor) -> torch.Tensor:
    while partials.shape[0] > 1:
        if partials.shape[0] % 2:
            partials = torch.cat([partials, torch.zeros_like(partials[:1])])
        partials = partials[0::2] + partials[1::2]
    return partials[0]


class TreeRMSNorm(torch.autograd.Function):
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
        partials = torch.stack([c.sum(0) for c in rows.split(CHUNK)])
        return dx.to(x.dtype), tree_sum(partials).to(weight.dtype), None


@register(
    "toy-tree",
    passes=("bwd",),
    family=TREE,
    launch=tree_grid,
    fused=True,
    description="Test plugin: plain-PyTorch backward, dγ summed as a pairwise tree of chunk partials",
)
def toy_tree_rmsnorm(x, weight, eps=1e-6):
    return TreeRMSNorm.apply(x, weight, eps)
