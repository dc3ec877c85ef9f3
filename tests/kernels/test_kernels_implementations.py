"""Every registered implementation, through its public fn and autograd, fwd and bwd, against the fp64
reference; clear errors on bad input."""

import pytest
import torch
from kernel_inputs import DTYPES, random_inputs

from rmsnorm_kernels.reference import (
    dx_scale,
    relative_error,
    rmsnorm_backward_reference,
    rmsnorm_reference,
    tolerance_for,
)
from rmsnorm_kernels.registry import REGISTRY, load_all

load_all()
from rmsnorm_kernels.implementations import BUILTIN_MODULES  # noqa: E402

BUILTINS = [i.name for i in REGISTRY if getattr(i.fn, "__module__", None) in BUILTIN_MODULES]
"""What the built-in modules registered (rmsnorm_kernels/implementations.py lists them), not a list typed twice."""
EXPECTED = {
    "eager",
    "torch-compile",
    "torch-native",
    "liger",
    "quack",
    "triton",
    "triton-atomic",
    "triton-workspace",
    "triton-persistent",
}
CHEAP = [n for n in BUILTINS if n != "torch-compile"]  # torch.compile builds C++ per shape on CPU: few cases
SHAPES = [(4, 3, 7), (16, 513), (5, 4097)]


def usable(name):
    impl = REGISTRY.get(name)
    reason = impl.unavailable_reason()
    if reason:
        pytest.skip(f"{name}: {reason}")
    return impl


def check_impl(impl, shape, dtype):
    x, w, dy = random_inputs(shape, dtype)
    xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    y = impl.fn(xg, wg, 1e-6)
    assert y.shape == x.shape and y.dtype == x.dtype
    y_ref, _ = rmsnorm_reference(x, w)
    tol = tolerance_for(dtype)
    assert relative_error(y, y_ref) <= tol, "forward"
    dx, dw = torch.autograd.grad(y, (xg, wg), dy)
    dx_ref, dw_ref = rmsnorm_backward_reference(x, w, dy)
    assert relative_error(dx, dx_ref, dx_scale(x, w, dy)) <= tol, "dx"
    assert relative_error(dw, dw_ref) <= tol, "dγ"


def test_every_builtin_is_registered():
    assert EXPECTED <= set(BUILTINS)  # none of the known ones lost
    by_module = {m: [i.name for i in REGISTRY if i.fn.__module__ == m] for m in BUILTIN_MODULES}
    assert all(by_module.values()), f"a listed built-in module registered nothing: {by_module}"
    from_package = {
        i.name for i in REGISTRY if i.fn.__module__.startswith("rmsnorm_kernels.") and i.source == "builtin"
    }
    assert from_package == set(BUILTINS), (
        "registered from rmsnorm_kernels/ but not listed in rmsnorm_kernels/implementations.py"
    )
    assert {i.name for i in REGISTRY if i.uses_triton} >= {
        "triton",
        "triton-atomic",
        "triton-workspace",
        "triton-persistent",
        "liger",
    }
    for d in (REGISTRY.get(n).describe() for n in BUILTINS):
        declared = REGISTRY.get(d["name"]).dgamma
        assert d["family"] in ("baseline", "other") if declared is None else d["family"] == declared.name
        assert d["dgamma"] == (declared.describe() if declared is not None else None)
        assert d["available"] or d["reason"]
    assert REGISTRY.get("triton").passes == ("fwd",)
    for name in ("triton-atomic", "triton-workspace", "triton-persistent"):
        assert REGISTRY.get(name).passes == ("bwd",)
        launch = REGISTRY.get(name).launch(4096, 4096, 132)
        assert {"programs", "rows_per_program", "partial_rows"} <= set(launch)


def test_unavailable_peers_say_why(monkeypatch):
    """Forced, so it checks something whether or not the peers are installed here: with the module made
    unimportable (None in sys.modules), each peer is unavailable and its reason names the module."""
    import sys

    from rmsnorm_kernels.baselines import quack_unavailable_reason
    from rmsnorm_kernels.registry import Implementation

    missing = Implementation("needs-missing", fn=lambda x, w, eps=1e-6: x, requires=("no_such_module_for_peers",))
    assert "no_such_module_for_peers" in missing.unavailable_reason()
    for name, module in (("liger", "liger_kernel"), ("quack", "quack")):
        monkeypatch.setitem(sys.modules, module, None)
        reason = REGISTRY.get(name).unavailable_reason()
        assert reason is not None and f"'{module}'" in reason, reason
        described = REGISTRY.get(name).describe()
        assert described["available"] is False and described["reason"] == reason
    if not torch.cuda.is_available():  # installed or not, QuACK says why it cannot run without a GPU
        reason = quack_unavailable_reason()
        assert reason is not None and "GPU" in reason


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", CHEAP)
def test_implementation_fwd_and_bwd(name, shape, dtype):
    check_impl(usable(name), shape, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_torch_compile_fwd_and_bwd(dtype):
    impl = usable("torch-compile")
    check_impl(impl, (6, 100), dtype)
    x, w, dy = random_inputs((6, 100), dtype)  # repeated backward, as the engine times it
    xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    y = impl.fn(xg, wg, 1e-6)
    first = torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)
    second = torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


BAD_INPUTS = [
    ("gamma length", lambda: (torch.randn(4, 8), torch.randn(7)), ValueError, "length 7"),
    ("integer dtype", lambda: (torch.randint(0, 5, (4, 8)), torch.randn(8)), TypeError, "int64"),
    ("integer weight", lambda: (torch.randn(4, 8), torch.ones(8, dtype=torch.int32)), TypeError, "int32"),
    ("empty", lambda: (torch.randn(0, 8), torch.randn(8)), ValueError, "empty"),
    ("2-d weight", lambda: (torch.randn(4, 8), torch.randn(1, 8)), ValueError, "1-D"),
    ("float64", lambda: (torch.randn(4, 8, dtype=torch.float64), torch.randn(8)), TypeError, "float64"),
    ("not a tensor", lambda: ([1.0, 2.0], torch.randn(2)), TypeError, "torch.Tensor"),
]


@pytest.mark.parametrize("name", CHEAP + ["torch-compile"])
@pytest.mark.parametrize("case,make,error,words", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_raises_a_clear_error(name, case, make, error, words):
    impl = usable(name)
    x, w = make()
    with pytest.raises(error, match=words):
        impl.fn(x, w, 1e-6)


@pytest.mark.parametrize("name", ["triton", "triton-atomic", "triton-workspace", "triton-persistent", "liger"])
def test_rows_above_the_maximum_are_refused(name):
    impl = usable(name)
    with pytest.raises(ValueError, match="65537.*maximum 65536"):
        impl.fn(torch.randn(1, 65537), torch.randn(65537), 1e-6)


def test_mismatched_devices_are_refused():
    from rmsnorm_kernels.validation import validate_rmsnorm_inputs

    meta_w = torch.empty(8, device="meta")
    with pytest.raises(ValueError, match="one device"):
        validate_rmsnorm_inputs(torch.randn(4, 8), meta_w)
    for name in ("eager", "triton-persistent"):
        with pytest.raises(ValueError, match="one device"):
            usable(name).fn(torch.randn(4, 8), meta_w, 1e-6)
