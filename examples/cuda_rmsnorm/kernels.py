"""The host side of the CUDA kernels: which shapes they take, their block and grid, and the calls.

A row of N elements is N/8 16-byte vectors; a block of B threads (a multiple of 32, at most `MAX_BLOCK`) holds
VPT vectors per thread, VPT the smallest instantiated count (`ROW_VPTS`, `PERSISTENT_VPTS` in rmsnorm.cu) for
which ceil(N/8 / VPT) threads fit one block. Hence the widths they take: N a multiple of 8, at most
8·512·8 = 32768 for the one-block-per-row kernels and 8·512·4 = 16384 for the persistent one (whose two
shared-memory stages of x and dy rows, 8·N bytes, also fit an SM there). bf16 and fp16 only.

The persistent grid is SMs × blocks per SM from the occupancy query of the compiled kernel on this GPU. Without
a GPU (the dashboard on a laptop, CI) `estimate_blocks_per_sm` answers from the H100's limits and the registers
ptxas gave each kernel (`PTXAS_REGISTERS`), and the grid says ``"occupancy": "estimate: …"``.
"""

from __future__ import annotations

import threading
from typing import Optional

from examples.cuda_rmsnorm import build

MAX_BLOCK = 512
"""Threads of the largest block launched (the kernels' __launch_bounds__)."""
ROW_VPTS = (1, 2, 4, 8)
PERSISTENT_VPTS = (1, 2, 4)
VECTOR = 8
"""Elements per 16-byte vector (bf16/fp16)."""
MAX_N_ROWS = VECTOR * MAX_BLOCK * ROW_VPTS[-1]
MAX_N_PERSISTENT = VECTOR * MAX_BLOCK * PERSISTENT_VPTS[-1]
NAIVE_PARTIAL_ROWS = 64
"""The naive chain's column sum reduces the M×N contributions to this many fp32 rows."""
REDUCE_BLOCK = 256
"""Threads of the last-pass blocks (one column each)."""
COLUMN_SUM_BLOCK = 64
"""Threads of the naive chain's column-sum blocks (one 16-byte vector of columns each): small blocks, so that even
narrow rows give (N/8/64) × 64 blocks to spread over the SMs."""
DTYPES = {"bfloat16": "bf16", "float16": "f16"}

# ptxas (CUDA 13.0, sm_90) registers per thread of each persistent kernel: only the CPU estimate uses them.
PTXAS_REGISTERS = {("bf16", 1): 32, ("bf16", 2): 64, ("bf16", 4): 108, ("f16", 1): 32, ("f16", 2): 50, ("f16", 4): 114}
H100 = {
    "threads_per_sm": 2048,
    "blocks_per_sm": 32,
    "registers_per_sm": 65536,
    "shared_per_sm": 228 * 1024,
    "shared_per_block_reserved": 1024,
    "static_shared": 128,
}


def vectors_per_thread(N: int, vpts: tuple[int, ...]) -> Optional[tuple[int, int]]:
    """(VPT, threads per block) for a row of N elements, or None when no instantiation covers it."""
    nvec = N // VECTOR
    for vpt in vpts:
        threads = -(-nvec // vpt)
        if threads <= MAX_BLOCK:
            return vpt, max(32, -(-threads // 32) * 32)
    return None


def refusal(N: int, dtype: str, persistent: bool) -> Optional[str]:
    """Why these kernels do not take [*, N] rows of ``dtype`` (None when they do)."""
    if dtype not in DTYPES:
        return f"the CUDA kernels take bfloat16 and float16 only (16-byte vectors of 8 halves), not {dtype}"
    if N < VECTOR or N % VECTOR:
        return f"N = {N} is not a multiple of {VECTOR}: the CUDA kernels load rows as 16-byte vectors of 8 elements"
    limit = MAX_N_PERSISTENT if persistent else MAX_N_ROWS
    if N > limit:
        why = (
            "its two shared-memory stages of x and dy rows and ≤ 4 vectors per thread"
            if persistent
            else "≤ 512 threads × 8 vectors per thread"
        )
        return f"N = {N} is above the {limit} the instantiated CUDA templates cover ({why})"
    return None


def stage_bytes(N: int) -> int:
    """Dynamic shared memory of the persistent kernel: two stages of an x row and a dy row (2-byte elements)."""
    return 2 * 2 * N * 2


def estimate_blocks_per_sm(N: int, dtype: str = "bfloat16") -> tuple[int, str]:
    """Blocks of the persistent kernel one SM holds, from an H100's limits (threads, registers, shared memory)
    and the registers ptxas gave the kernel: what the occupancy API would answer there."""
    vpt, block = vectors_per_thread(N, PERSISTENT_VPTS) or (PERSISTENT_VPTS[-1], MAX_BLOCK)
    regs = PTXAS_REGISTERS[(DTYPES.get(dtype, "bf16"), vpt)]
    warps = block // 32
    per_warp = -(-regs * 32 // 256) * 256  # registers are allocated per warp in units of 256
    by_regs = (H100["registers_per_sm"] // per_warp) // warps
    by_threads = H100["threads_per_sm"] // block
    smem = stage_bytes(N) + H100["static_shared"] + H100["shared_per_block_reserved"]
    by_smem = H100["shared_per_sm"] // smem
    n = max(1, min(by_regs, by_threads, by_smem, H100["blocks_per_sm"]))
    return n, (
        f"estimate: no GPU here; an H100's limits with {regs} registers/thread (ptxas, sm_90), "
        f"{block} threads and {smem // 1024} KiB shared memory a block"
    )


# ---- the compiled module, once per process and device ------------------------------------------------------------

_lock = threading.Lock()
_modules: dict[int, object] = {}
_build_error: Optional[str] = None
_built: Optional[build.Built] = None


def module(device_index: int):
    """The loaded kernels on ``device_index`` (compiled at the first call, from the disk cache after)."""
    global _build_error, _built
    mod = _modules.get(device_index)
    if mod is not None:
        return mod
    import torch

    from examples.cuda_rmsnorm import device as loaders

    with _lock:
        mod = _modules.get(device_index)
        if mod is None:
            major, minor = torch.cuda.get_device_capability(device_index)
            attempts: list[str] = []
            for candidate in build.candidates(f"sm_{major}{minor}", attempts=attempts):
                try:  # a cubin one compiler made may not load (a driver older than that NVRTC): the next one's may
                    mod = loaders.load(candidate.cubin, device_index, check=lambda m: self_test(m, device_index))
                except Exception as exc:
                    attempts.append(f"loading the {candidate.compiler} cubin: {type(exc).__name__}: {exc}")
                    continue
                _built = candidate
                break
            if mod is None:
                _build_error = "no CUDA compiler and loader worked here: " + " | ".join(attempts)
                raise build.CompileError(_build_error)
            _modules[device_index] = mod
    return mod


def self_test(mod, device_index: int) -> None:
    """One small launch with a known answer (dγ of three partial rows), before the module is used: a loader whose
    argument passing, stream or context is wrong here fails now and the next one is tried."""
    import torch

    dev = torch.device("cuda", device_index)
    with torch.cuda.device(dev):
        partial = torch.arange(3 * 16, dtype=torch.float32, device=dev).reshape(3, 16)
        out = torch.full((16,), float("nan"), dtype=torch.bfloat16, device=dev)
        stream = torch.cuda.current_stream(dev)
        mod.launch(
            "rms_rows_sum_bf16",
            (1,),
            REDUCE_BLOCK,
            0,
            stream.cuda_stream,
            [_ptr(partial), _ptr(out), ("i32", 3), ("i32", 16)],
        )
        stream.synchronize()
        want = partial.sum(0).to(torch.bfloat16)  # integers ≤ 93: exact in bf16
        if not torch.equal(out, want):
            raise RuntimeError(f"self-test: the column sum gave {out.tolist()[:4]}…, expected {want.tolist()[:4]}…")


def build_error() -> Optional[str]:
    """Why the kernels could not be compiled or loaded in this process (None when they were, or not yet tried)."""
    return _build_error


def built() -> Optional[dict]:
    """How the kernels were built here: compiler, variant, architecture, from cache (None before the first use)."""
    if _built is None:
        return None
    return {"compiler": _built.compiler, "variant": _built.variant, "arch": _built.arch, "cached": _built.cached}


def blocks_per_sm(N: int, dtype: str, device_index: Optional[int] = None) -> tuple[int, str]:
    """(blocks of the persistent kernel per SM, how it was found): the occupancy API on the GPU, else the estimate."""
    import torch

    if torch.cuda.is_available():
        idx = torch.cuda.current_device() if device_index is None else device_index
        vpt, block = vectors_per_thread(N, PERSISTENT_VPTS)
        n = module(idx).occupancy(f"rms_persistent_{DTYPES[dtype]}_v{vpt}", block, stage_bytes(N))
        return max(1, n), f"occupancy API on {torch.cuda.get_device_name(idx)}"
    return estimate_blocks_per_sm(N, dtype)


# ---- the calls ---------------------------------------------------------------------------------------------------

_sm_counts: dict[int, int] = {}
_occupancy: dict[tuple, int] = {}


def _ptr(t) -> tuple[str, int]:
    return ("ptr", t.data_ptr())


def aligned(t):
    """Contiguous, and 16 bytes aligned (a view with an odd storage offset is copied): the kernels load 16 bytes."""
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _device(t) -> tuple[int, object, int]:
    import torch

    idx = t.device.index if t.device.index is not None else torch.cuda.current_device()
    return idx, module(idx), torch.cuda.current_stream(t.device).cuda_stream


def sm_count(device_index: int) -> int:
    n = _sm_counts.get(device_index)
    if n is None:
        import torch

        n = _sm_counts[device_index] = torch.cuda.get_device_properties(device_index).multi_processor_count
    return n


def persistent_grid(M: int, N: int, dtype: str, device_index: int) -> int:
    """G = min(M, SMs × blocks per SM): the occupancy query, once per (N, dtype, device)."""
    key = (N, dtype, device_index)
    per_sm = _occupancy.get(key)
    if per_sm is None:
        per_sm = _occupancy[key] = blocks_per_sm(N, dtype, device_index)[0]
    return max(1, min(M, sm_count(device_index) * per_sm))


def forward(x2, w, eps: float):
    """y, rstd of contiguous aligned x2 [M, N] and w [N] (same dtype): one block per row."""
    import torch
    from rmsnorm_kernels.poison import new_output

    M, N = x2.shape
    t = DTYPES[str(x2.dtype).replace("torch.", "")]
    vpt, block = vectors_per_thread(N, ROW_VPTS)
    y = new_output((M, N), x2.dtype, x2.device)
    rstd = new_output((M,), torch.float32, x2.device)
    _, mod, stream = _device(x2)
    mod.launch(
        f"rms_fwd_{t}_v{vpt}",
        (M,),
        block,
        0,
        stream,
        [_ptr(x2), _ptr(w), _ptr(y), _ptr(rstd), ("i32", N), ("f32", float(eps))],
    )
    return y, rstd


def _sum_rows(mod, t: str, stream: int, partial, P: int, dw, N: int) -> None:
    mod.launch(
        f"rms_rows_sum_{t}",
        (-(-N // REDUCE_BLOCK),),
        REDUCE_BLOCK,
        0,
        stream,
        [_ptr(partial), _ptr(dw), ("i32", P), ("i32", N)],
    )


def backward_naive(x2, w, dy2, rstd):
    """dx, dγ: one block per row writes dx and its dγ contributions (M×N, x's dtype); a column sum reduces them to
    64 fp32 rows; a second sums those. Three kernels."""
    import torch
    from rmsnorm_kernels.poison import new_output

    M, N = x2.shape
    t = DTYPES[str(x2.dtype).replace("torch.", "")]
    vpt, block = vectors_per_thread(N, ROW_VPTS)
    dx = new_output((M, N), x2.dtype, x2.device)
    contrib = new_output((M, N), x2.dtype, x2.device)
    partial = new_output((NAIVE_PARTIAL_ROWS, N), torch.float32, x2.device)
    dw = new_output((N,), x2.dtype, x2.device)
    _, mod, stream = _device(x2)
    mod.launch(
        f"rms_naive_rows_{t}_v{vpt}",
        (M,),
        block,
        0,
        stream,
        [_ptr(x2), _ptr(w), _ptr(dy2), _ptr(rstd), _ptr(dx), _ptr(contrib), ("i32", N)],
    )
    mod.launch(
        f"rms_contrib_colsum_{t}",
        (-(-(N // VECTOR) // COLUMN_SUM_BLOCK), NAIVE_PARTIAL_ROWS),
        COLUMN_SUM_BLOCK,
        0,
        stream,
        [_ptr(contrib), _ptr(partial), ("i32", M), ("i32", N)],
    )
    _sum_rows(mod, t, stream, partial, NAIVE_PARTIAL_ROWS, dw, N)
    return dx, dw


def backward_persistent(x2, w, dy2, rstd):
    """dx, dγ: G persistent blocks, row t+1 copied (cp.async) while row t is computed, one fp32 partial row per
    block; then the column sum of the G rows."""
    import torch
    from rmsnorm_kernels.poison import new_output

    M, N = x2.shape
    dtype = str(x2.dtype).replace("torch.", "")
    t = DTYPES[dtype]
    vpt, block = vectors_per_thread(N, PERSISTENT_VPTS)
    idx, mod, stream = _device(x2)
    G = persistent_grid(M, N, dtype, idx)
    dx = new_output((M, N), x2.dtype, x2.device)
    partial = new_output((G, N), torch.float32, x2.device)
    dw = new_output((N,), x2.dtype, x2.device)
    mod.launch(
        f"rms_persistent_{t}_v{vpt}",
        (G,),
        block,
        stage_bytes(N),
        stream,
        [_ptr(x2), _ptr(w), _ptr(dy2), _ptr(rstd), _ptr(dx), _ptr(partial), ("i32", M), ("i32", N)],
    )
    _sum_rows(mod, t, stream, partial, G, dw, N)
    return dx, dw


def kernel_names() -> dict[str, list[str]]:
    """Every kernel the host may launch, with the argument kinds it passes (``ptr``, ``i32``, ``f32``), in order: what
    the tests compare with the entry points NVRTC compiles (their names and parameter types)."""
    ptr = "ptr"
    out: dict[str, list[str]] = {}
    for t in DTYPES.values():
        for vpt in ROW_VPTS:
            out[f"rms_fwd_{t}_v{vpt}"] = [ptr, ptr, ptr, ptr, "i32", "f32"]
            out[f"rms_naive_rows_{t}_v{vpt}"] = [ptr] * 6 + ["i32"]
        for vpt in PERSISTENT_VPTS:
            out[f"rms_persistent_{t}_v{vpt}"] = [ptr] * 6 + ["i32", "i32"]
        out[f"rms_contrib_colsum_{t}"] = [ptr, ptr, "i32", "i32"]
        out[f"rms_rows_sum_{t}"] = [ptr, ptr, "i32", "i32"]
    return out
