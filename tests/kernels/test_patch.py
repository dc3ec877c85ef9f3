"""patch_rmsnorm on tiny random transformers models built from configs (nothing downloaded), under Triton's
interpreter: same logits and gradients as the unpatched model, weights shared, odd modules left alone."""

import copy

import pytest
import torch
from torch import nn

from rmsnorm_kernels.module import RMSNorm
from rmsnorm_kernels.patch import patch_rmsnorm

transformers = pytest.importorskip("transformers")

SMALL = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=96,
    max_position_embeddings=64,
)


def _model(kind):
    torch.manual_seed(0)
    if kind == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL))
    elif kind == "gemma":
        model = transformers.GemmaForCausalLM(transformers.GemmaConfig(**SMALL, head_dim=16))
    elif kind == "qwen3":  # per-head q/k norms too (weight of head_dim, applied to [..., heads, head_dim])
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**SMALL, head_dim=16))
    model.eval()  # no dropout; gradients still flow
    with torch.no_grad():  # norms start at ones (Llama) or zeros (Gemma): make γ random so it matters
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(0.8 + 0.4 * torch.rand_like(p))
    return model


def _run(model, ids):
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.logits.detach(), out.loss.detach(), grads


def _rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


EXPECTED_NORMS = {"llama": 5, "gemma": 5, "qwen3": 9}


@pytest.mark.parametrize("kind", sorted(EXPECTED_NORMS))
@pytest.mark.parametrize("impl", ("triton-persistent", "triton-workspace", "triton-atomic"))
def test_patched_model_matches_unpatched(kind, impl):
    if kind == "qwen3" and not hasattr(transformers, "Qwen3ForCausalLM"):
        pytest.skip("this transformers has no Qwen3")
    base = _model(kind)
    patched = copy.deepcopy(base)
    n = patch_rmsnorm(patched, impl=impl)
    assert n == EXPECTED_NORMS[kind] and n.skipped == {}
    assert sum(isinstance(m, RMSNorm) for m in patched.modules()) == n
    if kind == "gemma":
        assert all(m.offset == 1.0 for m in patched.modules() if isinstance(m, RMSNorm))
    ids = torch.randint(0, SMALL["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(5))
    logits, loss, grads = _run(base, ids)
    logits_p, loss_p, grads_p = _run(patched, ids)
    assert _rel(logits_p, logits) < 1e-5
    assert abs(loss_p.item() - loss.item()) < 1e-5 * max(1.0, abs(loss.item()))
    assert grads.keys() == grads_p.keys()
    for name in grads:
        assert _rel(grads_p[name], grads[name]) < 1e-4, name


def test_weights_eps_dtype_device_kept_and_shared():
    model = _model("llama").to(torch.bfloat16)
    norm = model.model.layers[0].input_layernorm
    weight, eps = norm.weight, norm.variance_epsilon
    assert patch_rmsnorm(model, impl="triton-workspace") == 5
    new = model.model.layers[0].input_layernorm
    assert isinstance(new, RMSNorm) and new.weight is weight and new.eps == eps
    assert new.weight.dtype == torch.bfloat16 and new.impl == "triton-workspace" and new.offset == 0.0
    assert new.weight is dict(model.named_parameters())["model.layers.0.input_layernorm.weight"]


def test_bf16_model_logits_within_bf16_noise():
    base = _model("gemma").to(torch.bfloat16)
    patched = copy.deepcopy(base)
    assert patch_rmsnorm(patched) == 5
    ids = torch.randint(0, SMALL["vocab_size"], (2, 7), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        a, b = base(input_ids=ids).logits, patched(input_ids=ids).logits
    assert _rel(b, a) < 3e-2


class OddRMSNorm(nn.Module):  # looks like one, computes something else
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = 1e-6

    def forward(self, x):
        return x * self.weight


class BiasRMSNorm(OddRMSNorm):
    def __init__(self, n):
        super().__init__(n)
        self.bias = nn.Parameter(torch.zeros(n))


class PlainRMSNorm(OddRMSNorm):
    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def test_unrecognised_modules_left_alone_and_named():
    model = nn.Sequential(OddRMSNorm(8), BiasRMSNorm(8), PlainRMSNorm(8), nn.LayerNorm(8))
    result = patch_rmsnorm(model)
    assert result == 1 and result.replaced == ["2 (PlainRMSNorm)"]
    assert set(result.skipped) == {"0 (OddRMSNorm)", "1 (BiasRMSNorm)"}
    assert "matches neither" in result.skipped["0 (OddRMSNorm)"] and "bias" in result.skipped["1 (BiasRMSNorm)"]
    assert isinstance(model[0], OddRMSNorm) and isinstance(model[1], BiasRMSNorm) and isinstance(model[3], nn.LayerNorm)
    x = torch.randn(3, 8)
    torch.testing.assert_close(model[2](x), PlainRMSNorm(8)(x))
