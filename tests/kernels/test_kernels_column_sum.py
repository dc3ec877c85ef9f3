"""The column-sum kernel (rmsnorm_kernels/triton_backward/column_sum.py) on its own, under the Triton interpreter:
fresh random [G, N] fp32 partials against an fp64 torch sum, into a NaN-poisoned output, at partial counts
below, at and above one BLOCK_G and widths that leave the last BLOCK_N strip partly masked."""

import pytest
import torch

from rmsnorm_kernels.poison import poisoned_outputs
from rmsnorm_kernels.triton_backward.column_sum import column_sum, column_sum_blocks


@pytest.mark.parametrize("g,n", [(1, 1), (3, 17), (5, 64), (128, 33), (130, 100), (264, 48)])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16], ids=str)
def test_column_sum_matches_fp64(g, n, out_dtype):
    partial = torch.randn(g, n) * (1 + 3 * torch.rand(g, 1))
    with poisoned_outputs():
        got = column_sum(partial, out_dtype)
    assert got.shape == (n,) and got.dtype == out_dtype
    assert torch.isfinite(got).all(), "an output element was never written (still NaN)"
    want = partial.double().sum(0)
    tol = 1e-5 if out_dtype == torch.float32 else 1e-2
    assert torch.allclose(got.double(), want, rtol=tol, atol=tol * want.abs().max().item())


def test_column_sum_override_blocks_and_warps_give_the_same_answer():
    partial = torch.randn(70, 45)
    with poisoned_outputs():
        default = column_sum(partial, torch.float32)
        other = column_sum(partial, torch.float32, blocks=(32, 64), num_warps=4)
    assert torch.allclose(default, other, rtol=1e-5, atol=1e-5)
    assert torch.allclose(other.double(), partial.double().sum(0), rtol=1e-5, atol=1e-5)


def test_column_sum_is_deterministic():
    partial = torch.randn(200, 31)
    first = column_sum(partial, torch.float32)
    assert all(torch.equal(first, column_sum(partial, torch.float32)) for _ in range(2))


@pytest.mark.parametrize("g,expected", [(0, 2), (1, 1), (2, 2), (5, 8), (64, 64), (100, 128), (128, 128), (5000, 128)])
def test_column_sum_blocks(g, expected):
    block_g, block_n = column_sum_blocks(g, 4096)
    assert (block_g, block_n) == (expected, 16)
