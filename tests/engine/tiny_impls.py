"""Small plain-torch implementations the engine tests register on their own registry (never the global one)."""

import torch

from rmsnorm_kernels.registry import Implementation, Registry


def torch_rmsnorm(x, weight, eps=1e-6):
    """Composed RMSNorm in fp32 (autograd through plain torch ops)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


class Counters:
    def __init__(self):
        self.forwards = 0
        self.backwards = 0
        self.forward_grad_enabled = []


def counting_impl(counters: Counters):
    """An autograd Function that counts its forwards and backwards."""

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, eps):
            counters.forwards += 1
            ctx.save_for_backward(x, weight)
            ctx.eps = eps
            return torch_rmsnorm(x, weight, eps)

        @staticmethod
        def backward(ctx, dy):
            counters.backwards += 1
            x, weight = ctx.saved_tensors
            with torch.enable_grad():
                xd = x.detach().requires_grad_(True)
                wd = weight.detach().requires_grad_(True)
                y = torch_rmsnorm(xd, wd, ctx.eps)
                dx, dw = torch.autograd.grad(y, (xd, wd), dy)
            return dx, dw, None

    def fn(x, weight, eps=1e-6):
        counters.forward_grad_enabled.append(torch.is_grad_enabled())
        return Fn.apply(x, weight, eps)

    return fn


def failing(x, weight, eps=1e-6):
    raise RuntimeError("kernel exploded on purpose")


def wrong_shape(x, weight, eps=1e-6):
    return x[:, : max(1, x.shape[1] // 2)].clone()


def make_registry(**extra: Implementation) -> Registry:
    reg = Registry()
    reg.add(Implementation("test-torch", fn=torch_rmsnorm, family="baseline", description="plain torch"))
    reg.add(Implementation("test-fwd-only", fn=torch_rmsnorm, passes=("fwd",), family="other"))
    reg.add(Implementation("test-unavailable", fn=torch_rmsnorm, available_when=lambda: "needs a flux capacitor"))
    for impl in extra.values():
        reg.add(impl)
    return reg


def off_by_one_percent(x, weight, eps=1e-6):
    """Fast and wrong: the right answer × 1.01 (autograd carries the error into dx and dγ too)."""
    return torch_rmsnorm(x, weight, eps) * 1.01


def one_wrong_row(row_of: "callable"):
    """Right everywhere except one row (``row_of(M)``), which is off by 5 % — in y, and so in dx."""

    def fn(x, weight, eps=1e-6):
        y = torch_rmsnorm(x, weight, eps)
        scale = torch.ones(x.shape[0], 1, dtype=y.dtype, device=y.device)
        scale[row_of(x.shape[0])] = 1.05
        return y * scale

    return fn
