"""The three dγ strategies, called directly with NaN-poisoned outputs and workspaces, against the fp64
reference; determinism; launch grids."""

import pytest
import torch
from kernel_inputs import DTYPES, ODD_N, random_inputs, spy_launches

from rmsnorm_kernels.poison import poisoned_outputs
from rmsnorm_kernels.reference import dx_scale, relative_error, rmsnorm_backward_reference, tolerance_for
from rmsnorm_kernels.registry import REGISTRY, load_all
from rmsnorm_kernels.triton_backward.atomic import atomic_backward
from rmsnorm_kernels.kernel_config import BackwardConfig, backward_candidates, config_for
from rmsnorm_kernels.triton_backward.persistent import persistent_backward
from rmsnorm_kernels.triton_backward.workspace import workspace_backward
from rmsnorm_kernels.triton_forward import rmsnorm_forward

STRATEGIES = {"atomic": atomic_backward, "workspace": workspace_backward, "persistent": persistent_backward}


def run_backward(strategy, x, w, dy, **kwargs):
    _, x2d, rstd = rmsnorm_forward(x, w, 1e-6)
    with poisoned_outputs():
        dx, dw = strategy(dy.reshape(x2d.shape), x2d, w, rstd, **kwargs)
    return dx, dw


def assert_backward_correct(dx, dw, x, w, dy):
    dx_ref, dw_ref = rmsnorm_backward_reference(x, w, dy)
    assert dx.dtype == x.dtype and dw.dtype == w.dtype and dw.shape == w.shape
    tol = tolerance_for(x.dtype)
    assert relative_error(dx.reshape(x.shape), dx_ref, dx_scale(x, w, dy)) <= tol
    assert relative_error(dw, dw_ref) <= tol


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", ODD_N)
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_backward_matches_reference(name, n, dtype):
    x, w, dy = random_inputs((37, n), dtype)
    dx, dw = run_backward(STRATEGIES[name], x, w, dy)
    assert_backward_correct(dx, dw, x, w, dy)


def test_persistent_with_rows_left_over_and_few_programs():
    # 50 rows over 3 programs: programs walk 17, 17 and 16 rows; every row and every partial written
    x, w, dy = random_inputs((50, 1500), torch.float32)
    dx, dw = run_backward(persistent_backward, x, w, dy, sm_count=3)
    assert_backward_correct(dx, dw, x, w, dy)


def test_widest_row():
    x, w, dy = random_inputs((3, 65536), torch.float32)
    for strategy in STRATEGIES.values():
        dx, dw = run_backward(strategy, x, w, dy)
        assert_backward_correct(dx, dw, x, w, dy)


@pytest.mark.parametrize("n", [40, 5000])  # one segment; 4096 + 512 + 392 (three, the last masked)
def test_atomic_leaves_its_accumulator_zero_for_the_next_call(monkeypatch, n):
    """A launch plan keeps the atomic backward's fp32 accumulator for the stream's next call
    (`new_zeros(kept=True)`): the drain kernel must leave it zero, so that call after call on the same buffer, on
    fresh inputs, matches fp64 (each call's dγ is that call's own, not a running sum)."""
    from rmsnorm_kernels.triton_backward import atomic

    kept = {}

    def same_buffers(shape, dtype, device, **kwargs):
        assert kwargs == {"kept": True}
        key = (tuple(shape), dtype)
        if key not in kept:
            kept[key] = torch.zeros(shape, dtype=dtype, device=device)
        return kept[key]

    monkeypatch.setattr(atomic, "new_zeros", same_buffers)
    for _ in range(3):
        x, w, dy = random_inputs((23, n), torch.float32)
        dx, dw = run_backward(atomic_backward, x, w, dy)
        assert_backward_correct(dx, dw, x, w, dy)
        assert len(kept) == 1 and all(not t.any() for t in kept.values())


@pytest.mark.parametrize("name", ["workspace", "persistent"])
def test_deterministic_strategies_are_bit_identical_on_repeats(name):
    x, w, dy = random_inputs((300, 257), torch.float32)
    first = run_backward(STRATEGIES[name], x, w, dy)
    for _ in range(2):
        again = run_backward(STRATEGIES[name], x, w, dy)
        assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


def test_persistent_is_bit_identical_for_a_given_grid_and_correct_for_any():
    x, w, dy = random_inputs((200, 333), torch.float32)
    for sm_count in (1, 5, 132):
        a = run_backward(persistent_backward, x, w, dy, sm_count=sm_count)
        b = run_backward(persistent_backward, x, w, dy, sm_count=sm_count)
        assert torch.equal(a[1], b[1])
        assert_backward_correct(*a, x, w, dy)


def test_registry_says_which_are_deterministic():
    load_all()
    assert REGISTRY.get("triton-atomic").deterministic is False
    assert REGISTRY.get("triton-workspace").deterministic is True
    assert REGISTRY.get("triton-persistent").deterministic is True
    families = {n: REGISTRY.get(n).family for n in ("triton-atomic", "triton-workspace", "triton-persistent")}
    assert families == {"triton-atomic": "atomic", "triton-workspace": "workspace", "triton-persistent": "persistent"}


@pytest.mark.parametrize("m,n", [(1, 7), (37, 100), (16384, 4096), (65536, 1024), (5, 65536)])
def test_launch_grids_cover_every_row(m, n):
    """Through the registry: each implementation's grid joined with its dγ family's numbers."""
    load_all()
    atomic_launch, workspace_launch, persistent_launch = (
        REGISTRY.get(f"triton-{name}").launch for name in ("atomic", "workspace", "persistent")
    )
    a = atomic_launch(m, n, 132)
    assert a["partial_rows"] == 1 and a["programs"] * a["rows_per_program"] >= m
    ws = workspace_launch(m, n, 132)
    assert ws["partial_rows"] == ws["programs"] and ws["programs"] * ws["rows_per_program"] >= m
    p = persistent_launch(m, n, 132)
    assert p["partial_rows"] == p["programs"] <= 132 * config_for("persistent", n, m).programs_per_sm
    assert p["programs"] * p["rows_per_program"] >= m
    assert p["programs"] <= m  # never a program with no row (its partial row would be left unwritten)
    for launch, family in ((a, "atomic"), (ws, "workspace"), (p, "persistent")):
        assert launch["family"] == family and launch["partial_bytes"] == launch["partial_rows"] * n * 4
    assert a["extra_bytes"] == a["programs"] * n * 4 * 2 and a["extra_bytes_note"].startswith("estimate")
    assert ws["extra_bytes"] == 2 * ws["programs"] * n * 4 and p["extra_bytes"] == 2 * p["programs"] * n * 4


@pytest.mark.parametrize("m,n", [(4096, 8192), (4096, 512), (16384, 4096), (65536, 1024)])
def test_workspace_grid_fills_the_device_at_few_rows(m, n):
    """At least 2 programs per SM wherever the rows allow it (4096 × 8192 was 32 programs before); a
    program still gets 4 tiles, so the loads can be pipelined."""
    from rmsnorm_kernels.triton_backward.workspace import workspace_grid

    ws = workspace_grid(m, n, 132)
    assert ws["programs"] >= min(2 * 132, m // (4 * config_for("workspace", n, m).rows))
    assert ws["programs"] * ws["rows_per_program"] >= m


def test_pipeline_depth_fits_shared_memory():
    from rmsnorm_kernels.limits import SHARED_MEMORY_BUDGET
    from rmsnorm_kernels.kernel_config import row_layout
    from rmsnorm_kernels.triton_backward.dx import pipeline_stages

    for n in (128, 1000, 4096, 5376, 8192, 11008, 16384, 65536):
        for config in backward_candidates("persistent", n):
            for size in (2, 4):
                stages = pipeline_stages(config, n, size)
                assert 1 <= stages <= config.stages
                if stages > 1:
                    per_stage = 2 * config.rows * row_layout(config, n).padded * size * config.programs_per_sm
                    assert stages * per_stage <= SHARED_MEMORY_BUDGET
    wide = BackwardConfig(
        rows=1, num_warps=32, stages=3
    )  # the GPU check found 2 stages of 65536-wide bf16 tiles need 262 KB
    assert pipeline_stages(wide, 65536, 2) == 1


def test_workspace_rows_per_program_override_and_pipelining():
    x, w, dy = random_inputs((203, 300), torch.float32)
    for rpp in (8, 64):
        config = BackwardConfig(rows=2, num_warps=4, rows_per_program=rpp)
        dx, dw = run_backward(workspace_backward, x, w, dy, config=config)
        assert_backward_correct(dx, dw, x, w, dy)


@pytest.mark.parametrize("kind", list(STRATEGIES))
@pytest.mark.parametrize("shape", [(7, 20000), (9, 300), (5, 129), (6, 5376)])
def test_every_candidate_configuration_is_correct(kind, shape):
    """Whatever the tuned table picks at a width, the answer is the reference's: every candidate the tuner may
    choose (rows, warps, k, γ reloaded, the padded layout), with few programs walking several rows each, and
    bit-identical dγ on a repeat for the deterministic strategies."""
    x, w, dy = random_inputs(shape, torch.float32)
    extra = {"sm_count": 2} if kind == "persistent" else {}
    for config in backward_candidates(kind, shape[1]):
        a = run_backward(STRATEGIES[kind], x, w, dy, config=config, **extra)
        assert_backward_correct(*a, x, w, dy)
        if kind != "atomic":
            b = run_backward(STRATEGIES[kind], x, w, dy, config=config, **extra)
            assert torch.equal(a[1], b[1]), config


def test_dependent_launch_only_on_hopper_cuda(monkeypatch):
    """PDL is asked for on every backward call: CUDA at capability ≥ 9 only, never under the interpreter, on
    the CPU, or with RMSNORM_PDL=0."""
    from rmsnorm_kernels import triton_mode

    assert triton_mode.dependent_launch("cpu") is False  # the interpreter (or a CPU tensor) here
    monkeypatch.setattr(triton_mode, "interpreting", lambda: False)
    monkeypatch.setattr(triton_mode, "_cuda_capability_major", lambda index: {0: 9, 1: 8}[index])
    assert triton_mode.dependent_launch("cpu") is False
    assert triton_mode.dependent_launch("cuda:0") is True
    assert triton_mode.dependent_launch("cuda:1") is False
    monkeypatch.setenv("RMSNORM_PDL", "0")
    assert triton_mode.dependent_launch("cuda:0") is False


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_rows_whose_stride_is_less_aligned_than_their_width(name):
    """300 bf16 elements are a multiple of 4, a row stride of 302 only of 2: the alignment the kernels promise the
    compiler (`segments.row_alignment`) must come from the strides too, or every row after the first is read from
    the wrong place (x and dy both strided: a 2-aligned view into wider buffers)."""
    base_x, w, _ = random_inputs((23, 302), torch.bfloat16)
    base_dy = torch.randn_like(base_x)
    x, dy, w = base_x[:, :300], base_dy[:, :300], w[:300].contiguous()
    assert x.stride(0) == 302 and not x.is_contiguous()
    _, x2d, rstd = rmsnorm_forward(x, w, 1e-6)
    with poisoned_outputs():
        dx, dw = STRATEGIES[name](dy, x2d, w, rstd)
    assert_backward_correct(dx, dw, x, w, dy)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [37, 67, 1001, 2050, 3003])
def test_split_persistent_backward_at_rows_starting_anywhere(n, dtype, monkeypatch):
    """``split``: a grid of 16 programs (a multiple of the vector width) walks 53 rows of a width that is not a
    multiple of 8, so each program's rows share their offset mod the vector, split into head, vector body and tail.
    Against fp64 with poisoned outputs and partials; the split path ran (VEC > 0) and dγ is bit-exact on a rerun. A
    grid that keeps no program's rows alike (3 programs) and a strided dy run unsplit, with the same answer."""
    from rmsnorm_kernels.triton_backward import persistent

    launched = spy_launches(monkeypatch, persistent, "VEC")
    config = BackwardConfig(rows=1, num_warps=4, stages=2, split=True)
    x, w, dy = random_inputs((53, n), dtype)
    dx, dw = run_backward(persistent_backward, x, w, dy, config=config, sm_count=16)
    assert launched[-1] == (16, 16 // x.element_size())
    assert_backward_correct(dx, dw, x, w, dy)
    _, dw_again = run_backward(persistent_backward, x, w, dy, config=config, sm_count=16)
    assert torch.equal(dw, dw_again)
    dx, dw = run_backward(persistent_backward, x, w, dy, config=config, sm_count=12)  # 12 → 8 programs
    assert launched[-1] == (8, 16 // x.element_size())
    assert_backward_correct(dx, dw, x, w, dy)
    dx, dw = run_backward(persistent_backward, x, w, dy, config=config, sm_count=3)
    assert launched[-1] == (3, 0)
    assert_backward_correct(dx, dw, x, w, dy)
    wide_dy = torch.cat([dy, dy[:, :5]], dim=1)[:, :n]
    dx, dw = run_backward(persistent_backward, x, w, wide_dy, config=config, sm_count=16)
    assert launched[-1] == (16, 0)
    assert_backward_correct(dx, dw, x, w, dy)


def test_split_is_a_persistent_candidate_where_rows_are_not_aligned():
    assert any(c.split for c in backward_candidates("persistent", 5299))
    assert any(c.split for c in backward_candidates("persistent", 8298))
    assert not any(c.split for c in backward_candidates("persistent", 8192))
    assert not any(c.split for c in backward_candidates("workspace", 5299))
    assert all(c.rows == 1 for c in backward_candidates("persistent", 5299) if c.split)
