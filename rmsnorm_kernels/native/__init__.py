"""The native node (``node.cpp``): launch plans replayed from C++, inside a C++ autograd node.

The eager path's steady state is a launch plan (`rmsnorm_kernels.launch_plans`) replayed through a Python
``autograd.Function``. On a slow host the Python node alone costs more than ``F.rms_norm``'s whole backward
(docs/NOTES.md, "Eighth session"). Here a recorded plan is *described* (every launch as its cubin's function
handle, grid, launch options and parameters: tensor slots or constant bits, in the order Triton's launcher passes
them) and registered with the C++ module under the call's key (M, N, dtypes, device, eps, dγ strategy). From
then on `rmsnorm_kernels.triton_backward.function.eager_rmsnorm` gets its result from ``rms_norm`` here: outputs
allocated by ATen, cubins launched with ``cuLaunchKernelEx``, and, when a gradient is wanted, a C++ node whose
backward replays the backward plan. Nothing is chosen twice: every constant is the recorded one.

The module is compiled on first use with the host's C++ compiler against the installed torch (about 15 s; kept in
``RMSNORM_NATIVE_DIR``, default ``~/.cache/rmsnorm_dashboard/native``, named by a hash of the source and the
versions). `module()` starts that build in the background and answers None until it is loaded, so a first call
never waits for a compiler; `ensure()` builds and loads in the foreground (the benchmark engine, before timing).
``RMSNORM_NATIVE=0`` turns it off. Without a compiler, or when the build fails, the Python path stays (the
reason is kept in `STATE`). Plans that cannot be described (a kernel with global scratch, a parameter type the
description does not know) are never registered: their calls keep the Python path."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

import torch

from rmsnorm_kernels import poison
from rmsnorm_kernels.launch_record import Slot

SOURCE = Path(__file__).with_name("node.cpp")
STATE: dict = {"module": None, "error": None, "building": False, "path": None}
_LOCK = threading.Lock()
_OFFERED: set = set()
_HANDLES: dict = {}


def enabled() -> bool:
    return os.environ.get("RMSNORM_NATIVE", "1") != "0"


def _torch_lib() -> Path:
    return Path(torch.__file__).parent / "lib"


def cuda_build_possible() -> bool:
    """The installed torch is a CUDA build whose libc10_cuda can be linked (the CUDA node launches cubins)."""
    return bool(torch.version.cuda) and (_torch_lib() / "libc10_cuda.so").exists()


def _triton_include() -> Path | None:
    try:
        import triton
    except ImportError:
        return None
    path = Path(triton.__file__).parent / "backends" / "nvidia" / "include"
    return path if (path / "cuda.h").exists() else None


def compiler() -> str:
    """The C++ compiler: ``CXX``, else the first of c++, g++, clang++ on the PATH."""
    if os.environ.get("CXX"):
        return os.environ["CXX"]
    for name in ("c++", "g++", "clang++"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("no C++ compiler (c++, g++ or clang++) on the PATH; set CXX")


def _node_flags(include: Path) -> list:
    """-DRMSNORM_INTRUSIVE_NODE where this torch's autograd nodes are intrusive_ptr targets (newer torch), not
    shared_ptr ones: read from the header that defines ``struct TORCH_API Node``."""
    for name in ("node.h", "function.h"):
        header = include / "torch" / "csrc" / "autograd" / name
        if header.exists() and "struct TORCH_API Node" in (text := header.read_text(errors="replace")):
            return (
                ["-DRMSNORM_INTRUSIVE_NODE"]
                if "intrusive_ptr_target" in text.split("struct TORCH_API Node", 1)[1][:200]
                else []
            )
    return []


def build_command(output: Path, *, cuda: bool, name: str, extra: tuple = ()) -> list:
    """The compiler command line (``cuda``: the CUDA build, which includes c10/cuda and Triton's CUDA headers)."""
    include = Path(torch.__file__).parent / "include"
    cmd = [
        compiler(),
        "-O2",
        "-std=c++17",
        "-fPIC",
        "-shared",
        "-w",
        str(SOURCE),
        "-o",
        str(output),
        f"-I{include}",
        f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}",
        f"-I{sysconfig.get_paths()['include']}",
        f"-DTORCH_EXTENSION_NAME={name}",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        *_node_flags(include),
        *extra,
        f"-L{_torch_lib()}",
        f"-Wl,-rpath,{_torch_lib()}",
        "-lc10",
        "-ltorch",
        "-ltorch_cpu",
        "-ltorch_python",
    ]
    if cuda:
        triton_include = _triton_include()
        if triton_include is None:
            raise RuntimeError("Triton's CUDA headers (triton/backends/nvidia/include) are not installed")
        cmd[cmd.index("-L" + str(_torch_lib())) : 0] = [f"-I{triton_include}", "-DRMSNORM_NATIVE_CUDA"]
        if (_torch_lib() / "libc10_cuda.so").exists():
            cmd.append("-lc10_cuda")
    return cmd


def _build_dir() -> Path:
    return Path(os.environ.get("RMSNORM_NATIVE_DIR") or Path.home() / ".cache" / "rmsnorm_dashboard" / "native")


def _name(cuda: bool) -> str:
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(f"{torch.__version__}|{sys.version}|{cuda}".encode())
    return f"rmsnorm_native_{digest.hexdigest()[:16]}"


def build(cuda: bool | None = None) -> Path:
    """Compile the module (if not already there) and return its path. ``cuda``: default, when possible."""
    cuda = cuda_build_possible() if cuda is None else cuda
    name = _name(cuda)
    directory = _build_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.so"
    if path.exists():
        return path
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        out = Path(tmp) / path.name
        done = subprocess.run(build_command(out, cuda=cuda, name=name), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"building the native node failed ({done.returncode}):\n{done.stderr[-4000:]}")
        os.replace(out, path)
    return path


def load(path: Path):
    name = path.name.split(".")[0]
    spec = importlib.util.spec_from_file_location(
        name, path, loader=importlib.machinery.ExtensionFileLoader(name, str(path))
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.set_poison(poison._depth)
    return mod


def _listen_poison(depth: int) -> None:
    mod = STATE["module"]
    if mod is not None:
        mod.set_poison(depth)


poison.add_listener(_listen_poison)


def ensure(cuda: bool | None = None):
    """Build (if needed) and load the module in the foreground; the module, or None with the reason in STATE."""
    with _LOCK:
        if STATE["module"] is None and enabled():
            try:
                path = build(cuda)
                STATE["module"], STATE["path"], STATE["error"] = load(path), str(path), None
            except Exception as exc:  # no compiler, a failed build: the Python path stays
                STATE["error"] = f"{type(exc).__name__}: {exc}"
    return STATE["module"]


def module():
    """The loaded module, or None (then a background build is started once, unless it is off or failed)."""
    mod = STATE["module"]
    if mod is not None or STATE["building"] or STATE["error"] or not enabled():
        return mod
    STATE["building"] = True
    threading.Thread(target=ensure, name="rmsnorm-native-build", daemon=True).start()
    return None


def reset() -> None:
    """Forget the registered keys (the plans' caches were cleared); the module stays loaded."""
    _OFFERED.clear()
    _HANDLES.clear()
    mod = STATE["module"]
    if mod is not None:
        mod.clear()


# ------------------------------------------------------------------------------------------ descriptions
_INT_BITS = {"i1": 8, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "u1": 8, "u8": 8, "u16": 16, "u32": 32, "u64": 64}


def _param(ty, value):
    """(slot, bits) of one kernel parameter, or None where the description does not know its type."""
    if not isinstance(ty, str):
        return None
    if ty.startswith("*"):
        if isinstance(value, Slot):
            return (int(value), 0)
        return (-1, 0) if value is None else None
    if ty in _INT_BITS and isinstance(value, (bool, int)):
        return (-1, int(value) & ((1 << _INT_BITS[ty]) - 1))
    if ty in ("fp32", "f32") and isinstance(value, (int, float)):
        return (-1, struct.unpack("<I", struct.pack("<f", float(value)))[0])
    if ty == "fp64" and isinstance(value, (int, float)):
        return (-1, struct.unpack("<Q", struct.pack("<d", float(value)))[0])
    return None


def describe_launch(compiled, grid: tuple, template: list, tail: tuple):
    """A recorded launch as the C++ side takes it, or None. ``template``: the positional arguments (tensors as
    `Slot`), ``tail``: the constexpr / keyword values after them, in the kernel's parameter order."""
    run = compiled.run
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None
    signature = list(compiled.src.signature.values())
    values = list(template) + list(tail)
    if len(signature) != len(values):
        return None
    params = []
    for ty, value in zip(signature, values):
        if ty == "constexpr":
            continue
        p = _param(ty, value)
        if p is None:
            return None
        params.append(p)
    num_warps, num_ctas, shared = compiled.packed_metadata
    return (
        int(compiled.function),
        tuple(int(g) for g in grid),
        int(num_warps),
        int(num_ctas),
        int(shared),
        bool(getattr(run, "launch_pdl", False)),
        bool(getattr(run, "launch_cooperative_grid", False)),
        params,
    )


def describe(plan) -> tuple | None:
    """(n_inputs, outputs, launches, returned) of a `launch_plans.Plan`, or None where a launch cannot be described."""
    launches = []
    for compiled, _run, g0, g1, g2, template, _slots, tail in plan.launches:
        d = describe_launch(compiled, (g0, g1, g2), template, tail)
        if d is None:
            return None
        launches.append(d)
    outputs = [(list(shape), dtype, kind) for shape, dtype, kind in plan.outputs]
    returned = [-1 if s is None else int(s) for s in plan.returned]
    return plan.n_inputs, outputs, launches, returned


def _handle(mod, plan) -> int:
    """The C++ plan of a `launch_plans.Plan` (made once per plan), or 0 where it cannot be described."""
    handle = _HANDLES.get(plan)
    if handle is None:
        description = describe(plan)
        handle = _HANDLES[plan] = 0 if description is None else mod.make_plan(*description)
    return handle


def offer(
    mod, strategy, x2d: torch.Tensor, w: torch.Tensor, eps: float, forward, forward_no_rstd, backward, tag
) -> bool:
    """Register the plans the Python path recorded for one call's key: the forward (``forward``, or for calls
    without a gradient ``forward_no_rstd``) and the strategy's ``backward`` (`launch_plans.Plan`, None when not
    recorded yet, False when given up on). ``x2d``: the call's rows, ``w``: γ as the kernels read it. True when
    the key now has a native path."""
    if tag in _OFFERED:
        return False
    if forward is False or backward is False:
        _OFFERED.add(tag)  # the Python path for good
        return False
    plain = forward or forward_no_rstd
    if not plain:
        return False
    m, n = x2d.shape
    args = (m, n, x2d.dtype, w.dtype, str(x2d.device), float(eps), id(strategy))
    fwd = _handle(mod, plain)
    if fwd:
        mod.register_plans(*args, fwd, 0)
    if forward and backward:
        fwd, bwd = _handle(mod, forward), _handle(mod, backward)
        _OFFERED.add(tag)
        if not (fwd and bwd):
            return False
        mod.register_plans(*args, fwd, bwd)
    return bool(fwd)
