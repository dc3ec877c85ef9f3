"""The CUDA plug-in (examples/cuda_rmsnorm) without a GPU: it loads the documented way, lists itself unavailable with
the reason, declares the shapes it takes (the rest are skipped rows), its dγ families' byte model matches a hand count
of the naive chain's five passes, its grids are the documented estimate (or a recorded occupancy), and its CUDA source
compiles to PTX under NVRTC (or nvcc; when one is installed) with the entry points, parameter types and launches the host
side uses."""

import json
import re
import sys

import pytest
import torch

from engine.byte_model import actual_bytes, min_bytes
from engine.check import run_check
from engine.memory import footprint
from engine.models import Case
from engine.presets import MODEL_WIDTHS
from engine.runner import DeviceBench
from rmsnorm_kernels.registry import REGISTRY, describe_all, load_all, load_path

load_all()
NAMES = ["cuda-naive", "cuda-persistent"]


@pytest.fixture(autouse=True, scope="module")
def leave_the_global_registry_as_found():
    before = set(REGISTRY.names())
    yield
    for name in set(REGISTRY.names()) - before:
        REGISTRY.remove(name)
    for module in [m for m in sys.modules if m == "examples.cuda_rmsnorm"]:
        sys.modules.pop(module)


@pytest.fixture(scope="module")
def plugin():
    for name in NAMES:
        REGISTRY.remove(name)
    sys.modules.pop("examples.cuda_rmsnorm", None)
    assert load_path("examples.cuda_rmsnorm") == NAMES
    import examples.cuda_rmsnorm as module

    return module


def test_loads_by_module_path_and_lists_itself_unavailable_with_the_reason(plugin):
    listing = {d["name"]: d for d in describe_all()}
    for name in NAMES:
        entry = listing[name]
        assert entry["source"] == "path:examples.cuda_rmsnorm"
        assert entry["passes"] == ["fwd", "bwd"] and entry["deterministic"] is True and entry["fused"] is True
        assert entry["available"] is False
        assert "needs an NVIDIA GPU" in entry["reason"] and "torch.cuda.is_available() is False" in entry["reason"]
    assert listing["cuda-naive"]["family"] == "naive-chain"
    assert listing["cuda-naive"]["dgamma"]["name"] == "naive-chain"
    assert listing["cuda-persistent"]["family"] == "persistent"
    assert listing["cuda-naive"]["launch_example"]["programs"] == 16384  # one block per row at the example shape


def test_a_call_on_cpu_fails_plainly_and_a_shape_it_does_not_take_names_why(plugin):
    x, w = torch.randn(4, 16, dtype=torch.bfloat16), torch.ones(16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="CUDA device"):
        plugin.cuda_naive(x, w)
    with pytest.raises(ValueError, match="multiple of 8"):
        plugin.cuda_persistent(torch.randn(4, 12, dtype=torch.bfloat16), torch.ones(12, dtype=torch.bfloat16))


def test_shapes_it_takes_and_the_reasons_for_the_others(plugin):
    naive, persistent = REGISTRY.get("cuda-naive"), REGISTRY.get("cuda-persistent")
    for n in MODEL_WIDTHS:  # every model width, both dtypes
        for dtype in ("bfloat16", "float16"):
            assert naive.shape_refusal(4096, n, dtype) is None and persistent.shape_refusal(4096, n, dtype) is None
    assert "multiple of 8" in naive.shape_refusal(64, 12345, "bfloat16")
    assert "float32" in persistent.shape_refusal(64, 4096, "float32")
    assert persistent.shape_refusal(64, 16384 + 8, "bfloat16").startswith("N = 16392 is above the 16384")
    assert naive.shape_refusal(64, 16384 + 8, "bfloat16") is None  # one block per row reaches further
    assert naive.shape_refusal(64, 32768 + 8, "bfloat16").startswith("N = 32776 is above the 32768")


def test_engine_and_check_skip_the_shapes_a_plugin_does_not_take(plugin):
    """The registry's `supports` hook, through the engine's admission (a skipped row, before allocation) and
    `rmsnorm-dash check` (a skipped case): here with a copy of the CUDA plug-in that looks available."""
    from dataclasses import replace

    REGISTRY.add(
        replace(REGISTRY.get("cuda-persistent"), name="cuda-persistent-here", available_when=None), replace=True
    )
    bench = DeviceBench("cpu", ceiling_bytes=1 << 20)
    row = bench.run_case(Case(impl="cuda-persistent-here", pass_="bwd", dtype="bfloat16", M=8, N=4100), 2, 1)
    assert row.status == "skipped" and "does not take this shape" in row.reason and "multiple of 8" in row.reason
    taken = bench.run_case(Case(impl="cuda-persistent-here", pass_="bwd", dtype="bfloat16", M=8, N=4096), 2, 1)
    assert taken.status == "error" and "CUDA device" in taken.reason  # admitted: it ran (and a CPU tensor is refused)
    rows = run_check(["cuda-persistent-here"], dtypes=("float32",), shapes=((3, 4096),), device="cpu")
    assert [(r["skipped"], r["ok"], r["N"]) for r in rows] == [(True, True, 4096)] * 2  # fwd and bwd
    assert "bfloat16 and float16 only" in rows[0]["reason"]


def test_the_naive_chain_byte_model_is_the_hand_count_of_its_five_passes(plugin):
    M, N, s = 16384, 4096, 2
    launch = REGISTRY.get("cuda-naive").launch(M, N, 132)
    # kernel 1 (one block per row): read x, dy, γ, rstd; write dx and the M×N contributions
    k1 = M * N * s + M * N * s + N * s + M * 4 + M * N * s + M * N * s
    # kernel 2 (column sum): read the contributions, write 64 fp32 partial rows
    k2 = M * N * s + 64 * N * 4
    # kernel 3: read the 64 rows, write dγ
    k3 = 64 * N * 4 + N * s
    assert actual_bytes("bwd", M, N, "bfloat16", launch).bytes == k1 + k2 + k3
    assert k1 + k2 + k3 - min_bytes("bwd", M, N, "bfloat16") == 2 * M * N * s + 2 * 64 * N * 4  # 5 passes, not 3
    assert launch["partial_rows"] == 64 and launch["partial_bytes"] == M * N * s + 64 * N * 4
    # the memory estimate holds the M×N contributions as well as the partial rows
    assert footprint("bwd", M, N, s, True, launch).transient >= M * N * s + 64 * N * 4
    persistent = REGISTRY.get("cuda-persistent").launch(M, N, 132)
    assert actual_bytes("bwd", M, N, "bfloat16", persistent).bytes == (
        min_bytes("bwd", M, N, "bfloat16") + 2 * persistent["programs"] * N * 4
    )


@pytest.mark.parametrize("N, per_sm", [(4096, 4), (16384, 1), (2048, 8)])
def test_persistent_grid_without_a_gpu_is_the_labelled_estimate(plugin, monkeypatch, tmp_path, N, per_sm):
    monkeypatch.setattr(plugin, "RECORDED", tmp_path / "absent.json")
    grid = REGISTRY.get("cuda-persistent").launch(65536, N, 132)
    assert grid["blocks_per_sm"] == per_sm and grid["programs"] == 132 * per_sm
    assert grid["rows_per_program"] == -(-65536 // grid["programs"])
    assert grid["occupancy"].startswith("estimate: no GPU here")
    assert grid["shared_memory_bytes"] == 8 * N and grid["threads_per_block"] * grid["vectors_per_thread"] * 8 >= N
    small = REGISTRY.get("cuda-persistent").launch(100, N, 132)
    assert small["programs"] == 100 and small["rows_per_program"] == 1  # never more blocks than rows
    recorded = tmp_path / "recorded.json"
    recorded.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "blocks_per_sm": {"bfloat16": {str(N): 3}}}))
    monkeypatch.setattr(plugin, "RECORDED", recorded)
    grid = REGISTRY.get("cuda-persistent").launch(65536, N, 132)
    assert grid["programs"] == 396 and grid["occupancy"].startswith("recorded: the occupancy API on NVIDIA H100")


# ---- the CUDA source under NVRTC, and the host's launches against what it compiled --------------------------------


def compiled_ptx(options):
    """PTX of rmsnorm.cu for sm_90: NVRTC where cuda-bindings and libnvrtc are installed, else nvcc, else skip."""
    from examples.cuda_rmsnorm import build

    if build.nvrtc_version() is not None:
        return build.compile_nvrtc(build.source(), "sm_90", options, output="ptx").decode()
    if build.nvcc_path() is not None:
        return build.compile_nvcc(build.source(), "sm_90", options, output="ptx").decode()
    pytest.skip("neither NVRTC (cuda-bindings + nvidia-cuda-nvrtc) nor nvcc is installed here")


PTX_KIND = {"u64": "ptr", "u32": "i32", "s32": "i32", "f32": "f32"}


def entries(ptx: str) -> dict[str, list[str]]:
    """Entry point → its parameters' kinds, from the PTX."""
    out = {}
    for name, params in re.findall(r"\.entry (\w+)\(([^)]*)\)", ptx):
        out[name] = [PTX_KIND[t] for t in re.findall(r"\.param \.(\w+)", params)]
    return out


@pytest.fixture(scope="module")
def ptx_entries():
    return entries(compiled_ptx([]))


def test_the_source_compiles_under_nvrtc_with_every_entry_point_the_host_names(ptx_entries):
    from examples.cuda_rmsnorm import kernels

    assert ptx_entries == kernels.kernel_names()


def test_the_pipeline_variant_compiles_with_the_toolkit_header_and_uses_cp_async():
    from examples.cuda_rmsnorm import build

    inc = build.pipeline_include_dir()
    if inc is None:
        pytest.skip("no CUDA toolkit include directory with cuda_pipeline.h here")
    ptx = compiled_ptx(["-DRMS_USE_CUDA_PIPELINE", f"-I{inc}"])
    body = ptx.split(".entry rms_persistent_bf16_v4")[1].split(".entry")[0]
    assert "cp.async.cg.shared.global" in body and "cp.async.wait_group 1" in body and "cp.async.commit_group" in body


class Recorder:
    def __init__(self):
        self.calls = []

    def launch(self, name, grid, block, smem, stream, args):
        self.calls.append((name, tuple(grid), block, smem, [kind for kind, _ in args]))


@pytest.mark.parametrize(
    "dtype, M, N",
    [
        (torch.bfloat16, 1000, 4096),
        (torch.float16, 77, 2880),
        (torch.bfloat16, 300, 16384),
        (torch.float16, 5, 32768),
        (torch.bfloat16, 33, 16376),
        (torch.float16, 9, 24),
    ],
)
def test_every_launch_names_a_compiled_entry_with_its_parameter_types(ptx_entries, monkeypatch, dtype, M, N):
    from examples.cuda_rmsnorm import kernels

    rec = Recorder()
    monkeypatch.setattr(kernels, "_device", lambda t: (0, rec, 0))
    monkeypatch.setattr(kernels, "persistent_grid", lambda M, N, dtype, idx: min(M, 132))
    x, w, dy = torch.randn(M, N, dtype=dtype), torch.randn(N, dtype=dtype), torch.randn(M, N, dtype=dtype)
    _, rstd = kernels.forward(x, w, 1e-6)
    kernels.backward_naive(x, w, dy, rstd)
    if N <= kernels.MAX_N_PERSISTENT:
        kernels.backward_persistent(x, w, dy, rstd)
    for name, grid, block, smem, kinds in rec.calls:
        assert ptx_entries[name] == kinds, name
        assert block % 32 == 0 and block <= kernels.MAX_BLOCK
    nvec = N // 8
    fwd, rows, colsum, rows_sum, *rest = rec.calls
    vpt = int(fwd[0].rsplit("_v", 1)[1])
    assert fwd[1] == (M,) and fwd[2] * vpt >= nvec and rows[1] == (M,)
    assert colsum[1] == (-(-nvec // 64), 64) and colsum[2] == 64 and rows_sum[1] == (-(-N // 256),)
    if rest:
        persistent, last = rest
        assert persistent[1] == (min(M, 132),) and persistent[3] == 8 * N and last[0].startswith("rms_rows_sum")


def test_a_loader_that_loads_but_fails_the_self_test_gives_way_to_the_next(monkeypatch):
    from examples.cuda_rmsnorm import device

    class Loader:
        def __init__(self, cubin, index):
            self.cubin, self.index = cubin, index

    class Broken(Loader):
        def __init__(self, cubin, index):
            raise OSError("libcuda not found")

    class Wrong(Loader):
        answer = 41

    class Right(Loader):
        answer = 42

    def check(module):
        if module.answer != 42:
            raise RuntimeError(f"self-test: got {module.answer}")

    monkeypatch.setattr(device, "LOADERS", (("broken", Broken), ("wrong", Wrong), ("right", Right)))
    assert isinstance(device.load(b"cubin", 0, check=check), Right)
    monkeypatch.setattr(device, "LOADERS", (("broken", Broken), ("wrong", Wrong)))
    with pytest.raises(
        RuntimeError, match=re.escape("broken: OSError: libcuda not found | wrong: RuntimeError: self-test: got 41")
    ):
        device.load(b"cubin", 0, check=check)


def test_the_shared_memory_limit_is_raised_for_any_larger_request_even_exactly_48_kib():
    # 6144-wide rows ask for exactly 48 KiB of stages; with the kernel's static memory that is past the default, and
    # the launch failed (CUDA_ERROR_INVALID_VALUE, H100) until the limit was raised for it too
    from examples.cuda_rmsnorm import device

    calls = []

    class Driver:
        def funcSetAttribute(self, fn, attr, value):
            calls.append((fn, attr, value))

    class Fn:
        ptr = 7

    module = object.__new__(device.CupyModule)
    module._driver, module._functions, module._smem = Driver(), {"k": Fn()}, {}
    for nbytes in (8 * 6144, 8 * 6144, 8 * 4096, 8 * 7168, 0):
        module.allow_shared("k", nbytes)
    assert calls == [(7, device.MAX_DYNAMIC_SHARED, 8 * 6144), (7, device.MAX_DYNAMIC_SHARED, 8 * 7168)]
