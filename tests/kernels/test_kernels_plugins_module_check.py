"""The pluggable slot from outside (module path, entry point), the RMSNorm module in a model, and the
check sweep (which must fail on a wrong implementation)."""

from importlib.metadata import EntryPoint

import pytest
import torch
from kernel_inputs import random_inputs

from engine.check import check_main, format_check_table, run_check
from rmsnorm_kernels.module import RMSNorm
from rmsnorm_kernels.registry import REGISTRY, Registry, describe_all, load_all, load_entry_points, load_path, register

load_all()


@pytest.fixture(autouse=True, scope="module")
def leave_the_global_registry_as_found():
    """The example plugin registers itself in the process-wide registry on import; take it out again so
    that tests collected after these see only what they loaded."""
    import sys

    before = set(REGISTRY.names())
    had_module = "examples.dock_plugin" in sys.modules
    yield
    for name in set(REGISTRY.names()) - before:
        REGISTRY.remove(name)
    if not had_module:  # so that a later load_path imports it afresh and it registers again
        sys.modules.pop("examples.dock_plugin", None)


def test_example_plugin_by_module_path_shows_in_the_listing():
    import sys

    REGISTRY.remove("torch-chunked")  # loaded afresh, whatever ran before
    sys.modules.pop("examples.dock_plugin", None)
    added = load_path("examples.dock_plugin")
    assert added == ["torch-chunked"]
    assert REGISTRY.get("torch-chunked").source == "path:examples.dock_plugin"
    assert load_path("examples.dock_plugin") == ["torch-chunked"]  # again: nothing new, the one of this path
    listing = {d["name"]: d for d in describe_all()}
    assert listing["torch-chunked"]["family"] == "workspace"
    assert listing["torch-chunked"]["available"] is True


def test_example_plugin_by_entry_point_shows_in_the_listing():
    registry = Registry()
    ep = EntryPoint(
        name="torch-chunked", value="examples.dock_plugin:chunked_rmsnorm", group="rmsnorm_dashboard.implementations"
    )
    added = load_entry_points(registry=registry, entry_points=[ep])
    assert added == ["torch-chunked"]
    (described,) = describe_all(registry)
    assert described["name"] == "torch-chunked" and described["source"].startswith("entry-point:")


def test_example_plugin_is_a_correct_backward():
    load_path("examples.dock_plugin")
    rows = run_check(["torch-chunked"], dtypes=("float32", "bfloat16"), shapes=((130, 33), (3, 7)))
    assert rows and all(r["ok"] and not r["skipped"] for r in rows), format_check_table(rows)


def test_rmsnorm_module_in_a_tiny_model_trains_like_eager():
    torch.manual_seed(torch.seed() % 2**31)
    x, _, _ = random_inputs((4, 5, 48), torch.float32)

    def build(impl):
        g = torch.Generator().manual_seed(1234)
        model = torch.nn.Sequential(torch.nn.Linear(48, 48), RMSNorm(48, impl=impl), torch.nn.Linear(48, 3))
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
        return model

    grads = {}
    for impl in ("eager", "triton-persistent", "triton-atomic"):
        model = build(impl)
        loss = model(x).square().mean()
        loss.backward()
        grads[impl] = [p.grad.clone() for p in model.parameters()]
        assert all(torch.isfinite(g).all() for g in grads[impl])
    for impl in ("triton-persistent", "triton-atomic"):
        for got, want in zip(grads[impl], grads["eager"]):
            assert torch.allclose(got, want, rtol=1e-4, atol=1e-5)
    assert "impl='triton-persistent'" in repr(build("triton-persistent"))


def test_rmsnorm_module_refuses_unknown_implementations():
    with pytest.raises(KeyError, match="no-such-impl"):
        RMSNorm(8, impl="no-such-impl")


def test_check_sweep_rows_and_table():
    rows = run_check(["triton", "triton-persistent", "eager"], dtypes=("float32", "float16"), shapes=((3, 100),))
    assert len(rows) == 2 + 2 + 4  # triton: fwd; persistent: bwd; eager: fwd + bwd — each × 2 dtypes
    for r in rows:
        assert {"impl", "pass", "dtype", "M", "N", "max_rel_err", "tolerance", "ok"} <= set(r)
        assert r["ok"] and 0 <= r["max_rel_err"] <= r["tolerance"]
    table = format_check_table(rows)
    assert "triton-persistent" in table and "8 passed, 0 failed" in table


def test_check_fails_on_a_wrong_implementation(capsys):
    @register("wrong-by-a-bit", family="other", registry=REGISTRY, replace=True)
    def wrong(x, weight, eps=1e-6):
        y = torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)
        return y * 1.001  # 0.1 % off: above every tolerance but fp16's 2e-3 … and bf16's

    try:
        assert check_main(["--impl", "wrong-by-a-bit", "--dtype", "float32", "--shape", "4x64"]) == 1
        out = capsys.readouterr().out
        assert "FAIL" in out and "0 passed, 2 failed" in out
        assert check_main(["--impl", "triton", "--dtype", "float32", "--shape", "4x64"]) == 0
        assert check_main(["--impl", "nothing-like-this"]) == 2
    finally:
        REGISTRY.remove("wrong-by-a-bit")


def test_check_cli_prints_each_case_as_it_is_checked(capsys, monkeypatch):
    """A check cut short by a time limit still shows the cases it finished: each row is printed (and flushed)
    when it is checked, before the next case starts."""
    import engine.check as check_module

    seen = []
    real = check_module.check_case

    def spy(impl, pass_, dtype_name, m, n, device, generator):
        seen.append(capsys.readouterr().out)  # what was printed before this case started
        return real(impl, pass_, dtype_name, m, n, device, generator)

    monkeypatch.setattr(check_module, "check_case", spy)
    assert check_main(["--impl", "eager", "--dtype", "float32", "--shape", "3x100", "--shape", "5x64"]) == 0
    tail = capsys.readouterr().out
    assert len(seen) == 4  # eager: fwd + bwd × 2 shapes
    assert "implementation" in seen[0] and " ok" not in seen[0]
    assert all(chunk.count(" ok") == 1 and "eager" in chunk for chunk in seen[1:])
    assert tail.count(" ok") == 1 and "4 passed, 0 failed, 0 skipped" in tail


def test_check_reports_a_crash_as_a_failure():
    @register("crashes", family="other", registry=REGISTRY, replace=True)
    def crashes(x, weight, eps=1e-6):
        raise RuntimeError("kernel exploded")

    try:
        rows = run_check(["crashes"], dtypes=("float32",), shapes=((2, 8),))
        assert rows and not any(r["ok"] for r in rows)
        assert "kernel exploded" in rows[0]["reason"]
    finally:
        REGISTRY.remove("crashes")
