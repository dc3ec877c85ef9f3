"""The fp64 reference is itself right: its backward equals autograd through its own forward."""

import torch

from rmsnorm_kernels.reference import dx_scale, relative_error, rmsnorm_backward_reference, rmsnorm_reference


def test_backward_reference_matches_autograd_of_forward():
    x = torch.randn(6, 37, dtype=torch.float64, requires_grad=True)
    w = torch.randn(37, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(6, 37, dtype=torch.float64)
    y, _ = rmsnorm_reference(x, w)  # detached inside: recompute with autograd the same way
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    y_auto = x * rstd * w
    assert torch.allclose(y, y_auto.detach(), rtol=0, atol=1e-14)
    dx_auto, dw_auto = torch.autograd.grad(y_auto, (x, w), dy)
    dx, dw = rmsnorm_backward_reference(x, w, dy)
    assert torch.allclose(dx, dx_auto, rtol=1e-12, atol=1e-13)
    assert torch.allclose(dw, dw_auto, rtol=1e-12, atol=1e-13)


def test_relative_error_rejects_nan_and_detects_a_wrong_element():
    ref = torch.randn(100, dtype=torch.float64)
    bad = ref.clone()
    bad[17] = float("nan")
    assert relative_error(bad, ref) == float("inf")
    off = ref.clone()
    off[3] += 1.0
    assert relative_error(off, ref) > 1e-2


def test_dx_scale_only_matters_where_terms_cancel():
    # N = 1: dx is almost pure cancellation, as long as x² ≫ eps (|x| ≥ 0.5 here; near 0 the eps term decides)
    x = (0.5 + torch.rand(4, 1)) * torch.where(torch.rand(4, 1) < 0.5, -1.0, 1.0)
    w, dy = torch.randn(1), torch.randn(4, 1)
    dx, _ = rmsnorm_backward_reference(x, w, dy)
    assert dx.norm() < 1e-3 * dx_scale(x, w, dy)
    x, w, dy = torch.randn(4, 512), torch.randn(512), torch.randn(4, 512)
    dx, _ = rmsnorm_backward_reference(x, w, dy)
    assert dx.norm() > 0.5 * dx_scale(x, w, dy)
