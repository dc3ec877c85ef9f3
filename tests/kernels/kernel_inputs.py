"""Fresh random inputs for the kernel tests (never zeros, never a fixed pattern)."""

import torch

ODD_N = (1, 7, 100, 513, 1000, 4097)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def random_inputs(shape, dtype, device="cpu"):
    """x with per-row scales, γ around 1 with sign changes, dy standard normal."""
    n = shape[-1]
    x = torch.randn(*shape) * (0.5 + 2 * torch.rand(*shape[:-1], 1))
    w = 1.0 + 0.5 * torch.randn(n)
    dy = torch.randn(*shape)
    return x.to(device, dtype), w.to(device, dtype), dy.to(device, dtype)


def spy_launches(monkeypatch, module, name):
    """Every launch through ``module.fast`` from now on, as (programs, the constexpr ``name``): which path ran."""
    launched = []
    real_fast = module.fast

    def spy(kernel):
        launcher = real_fast(kernel)

        class Spy:
            def __getitem__(self, grid):
                def run(*args, **kwargs):
                    launched.append((grid[0], kwargs.get(name)))
                    return launcher[grid](*args, **kwargs)

                return run

        return Spy()

    monkeypatch.setattr(module, "fast", spy)
    return launched
