"""Each shared fact has one home (rmsnorm_kernels/limits.py, rmsnorm_kernels/segments.py): no other source file of the
kernels or the engine spells the number again or defines the helper again (checked on the code, not on
docstrings and comments)."""

import ast
from pathlib import Path

from rmsnorm_kernels import limits

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.joinpath("rmsnorm_kernels").rglob("*.py"), *ROOT.joinpath("engine").rglob("*.py")])


def _constants(path: Path) -> list[tuple[int, object]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and type(node.value) is int
    ]


def _products(path: Path) -> list[tuple[int, int]]:
    """Literal products like ``200 * 1024``, folded."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Mult)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.right, ast.Constant)
            and type(node.left.value) is type(node.right.value) is int
        ):
            out.append((node.lineno, node.left.value * node.right.value))
    return out


def test_sources_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"rmsnorm_kernels/limits.py", "rmsnorm_kernels/triton_forward.py", "engine/runner.py"} <= names


def test_default_sm_count_and_shared_memory_budget_live_only_in_limits():
    home = ROOT / "rmsnorm_kernels" / "limits.py"
    facts = {limits.DEFAULT_SM_COUNT: "DEFAULT_SM_COUNT", limits.SHARED_MEMORY_BUDGET: "SHARED_MEMORY_BUDGET"}
    found = [
        (p.relative_to(ROOT).as_posix(), line, facts[value])
        for p in SOURCES
        if p != home
        for line, value in [*_constants(p), *_products(p)]
        if value in facts
    ]
    assert found == [], f"spelled again instead of imported from rmsnorm_kernels.limits: {found}"


def test_next_power_of_two_and_max_n_are_defined_once():
    defined = {"next_power_of_two": [], "MAX_N": []}
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in defined:
                defined[node.name].append(path.relative_to(ROOT).as_posix())
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in defined:
                        defined[target.id].append(path.relative_to(ROOT).as_posix())
    assert defined == {"next_power_of_two": ["rmsnorm_kernels/segments.py"], "MAX_N": ["rmsnorm_kernels/limits.py"]}


def test_the_kernels_read_the_shared_values():
    from rmsnorm_kernels import triton_mode
    from rmsnorm_kernels.triton_backward import dx
    from rmsnorm_kernels.validation import MAX_N

    assert triton_mode.INTERPRETER_SM_COUNT == limits.DEFAULT_SM_COUNT
    assert dx.SHARED_MEMORY_BUDGET is limits.SHARED_MEMORY_BUDGET
    assert MAX_N is limits.MAX_N
