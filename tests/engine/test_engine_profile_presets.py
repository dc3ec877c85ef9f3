"""Kernel breakdown on CPU (profile: true) and shape presets in a sweep."""

import pytest

from engine.runner import DeviceBench, plan
from engine.models import Case, Sweep
from engine.presets import PRESETS, get_preset, model_names, presets_document
from engine.profile import _busy_and_span
from tiny_impls import make_registry

SMALL_CEILING = 1 << 20


@pytest.fixture
def registry():
    return make_registry()


@pytest.mark.parametrize("pass_", ["fwd", "bwd"])
def test_cpu_profile_lists_cpu_ops_with_times(registry, pass_):
    bench = DeviceBench("cpu", ceiling_bytes=SMALL_CEILING, registry=registry)
    r = bench.run_case(Case(impl="test-torch", pass_=pass_, dtype="float32", M=256, N=512), 3, 1, profile=True)
    assert r.status == "ok"
    p = r.profile
    assert p["source"] == "cpu" and p["samples"] == 10
    names = [k["name"] for k in p["kernels"]]
    assert not any(n.startswith(("autograd::", "torch::autograd::")) for n in names), names  # readable names
    if pass_ == "fwd":
        assert any(n.startswith("aten::") and ("rsqrt" in n or "mean" in n or "pow" in n) for n in names), names
    else:  # the backward's top-level operators are autograd's nodes, by their own names
        assert any(n.endswith("Backward0") or n.endswith("Backward1") for n in names), names
    for k in p["kernels"]:
        assert k["median_us"] >= 0 and k["calls"] >= 1
    assert p["kernel_us"] == pytest.approx(sum(k["median_us"] for k in p["kernels"]))
    assert p["kernel_us"] > 0 and p["host_us"] >= p["kernel_us"] * 0.5 and p["gap_us"] >= 0
    # top-level CPU operators never overlap: the time they cover is at most the host time
    assert 0 < p["busy_us"] <= p["host_us"]


def test_profile_off_by_default(registry):
    bench = DeviceBench("cpu", ceiling_bytes=SMALL_CEILING, registry=registry)
    assert bench.run_case(Case(impl="test-torch", pass_="fwd", dtype="float32", M=8, N=16), 2, 1).profile is None


def test_busy_and_span_merges_overlaps():
    assert _busy_and_span([(0, 2), (1, 3), (5, 6)]) == (4, 6)
    assert _busy_and_span([]) == (0.0, 0.0)


def test_preset_replaces_defaults_and_explicit_wins(registry):
    models = get_preset("models")
    s = Sweep.model_validate({"preset": "models", "implementations": ["test-torch"]}, context={"registry": registry})
    assert s.M == models["M"] and s.N == models["N"] and s.preset == "models"
    s = Sweep.model_validate(
        {"preset": "models", "N": [1000], "implementations": ["test-torch"]}, context={"registry": registry}
    )
    assert s.M == models["M"] and s.N == [1000]
    s = Sweep.model_validate(
        {"preset": "models", "M": [512, 1024, 2048][:1], "implementations": ["test-torch"]},
        context={"registry": registry},
    )
    assert s.M == [512] and s.N == models["N"]
    # the header's sweep (a dump) validates back to the same cases
    again = Sweep.model_validate(s.model_dump(), context={"registry": registry})
    assert plan(again, registry) == plan(s, registry)


def test_unknown_preset_is_a_clear_error(registry):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown preset 'huge'.*models"):
        Sweep.model_validate({"preset": "huge"}, context={"registry": registry})


def test_presets_document_shape():
    doc = presets_document()
    assert [d["name"] for d in doc] == list(PRESETS)
    models = next(d for d in doc if d["name"] == "models")
    for n in (2048, 2304, 2560, 2880, 3072, 3584, 4096, 4608, 5120, 6144, 7168, 8192, 12288, 16384):
        assert n in models["N"] and models["labels"][str(n)] == model_names(n) != []
    assert models["M"] == [4096, 16384, 65536]
    assert model_names(4097) == []
