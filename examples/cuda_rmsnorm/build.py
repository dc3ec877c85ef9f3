"""Compile ``rmsnorm.cu`` to a cubin for one GPU architecture, at first use, with what the host has; cache it on disk.

Compilers, in order (the first that works wins; each one's failure is kept for the reason shown when none does):

1. NVRTC through ``cuda-bindings`` (``cuda.bindings.nvrtc``: the ``cuda-python`` packages, with ``libnvrtc`` from a
   CUDA toolkit or the ``nvidia-cuda-nvrtc`` wheel);
2. ``nvcc`` (``$CUDA_HOME/bin``, ``/usr/local/cuda/bin`` or ``PATH``) in a subprocess.

Each tries the source with the toolkit's ``cuda_pipeline.h`` first (``-DRMS_USE_CUDA_PIPELINE``), when an include
directory holding it is found, then without it (the same three cp.async primitives spelled in PTX in the source).

The cubin is cached under ``$RMSNORM_CUDA_CACHE`` (default ``~/.cache/rmsnorm-dashboard/cuda``), named by a hash
of the source, the architecture, the options and the compiler: a second process, or a second run, loads it
without compiling. Torch-free (the tests compile here without a GPU).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_PATH = Path(__file__).with_name("rmsnorm.cu")
CACHE_ENV = "RMSNORM_CUDA_CACHE"


def source() -> str:
    return SOURCE_PATH.read_text()


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "rmsnorm-dashboard" / "cuda")


def toolkit_roots() -> list[Path]:
    """Where a CUDA toolkit may be: $CUDA_HOME / $CUDA_PATH, /usr/local/cuda, the directory above nvcc on PATH."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    seen, out = set(), []
    for r in roots:
        if r and r not in seen and Path(r).is_dir():
            seen.add(r)
            out.append(Path(r))
    return out


def pipeline_include_dir() -> Path | None:
    """A toolkit include directory with cuda_pipeline.h (NVRTC has no such header built in)."""
    for root in toolkit_roots():
        for inc in (root / "include", *sorted(root.glob("targets/*/include"))):
            if (inc / "cuda_pipeline.h").is_file():
                return inc
    return None


def nvcc_path() -> str | None:
    for root in toolkit_roots():
        if (root / "bin" / "nvcc").is_file():
            return str(root / "bin" / "nvcc")
    return shutil.which("nvcc")


def variants() -> list[tuple[str, list[str]]]:
    """(name, extra options): with the toolkit's cuda_pipeline.h where one is found, then the PTX spelling."""
    out = []
    inc = pipeline_include_dir()
    if inc is not None:
        out.append(("cuda_pipeline.h", ["-DRMS_USE_CUDA_PIPELINE", f"-I{inc}"]))
    out.append(("inline PTX cp.async", []))
    return out


class CompileError(RuntimeError):
    """No compiler produced a cubin; the message lists every attempt and why it failed."""


@dataclass
class Built:
    cubin: bytes
    compiler: str
    variant: str
    arch: str
    cached: bool
    attempts: list[str] = field(default_factory=list)


# ---- the compilers ----------------------------------------------------------------------------------------------


def nvrtc_version() -> str | None:
    """``"13.0"`` when cuda.bindings' NVRTC can be loaded here, else None."""
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}" if int(err) == 0 else None
    except Exception:
        return None


def compile_nvrtc(src: str, arch: str, options: list[str], output: str = "cubin") -> bytes:
    """NVRTC through cuda.bindings: ``output`` "cubin" (for ``arch`` like "sm_90") or "ptx"."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"rmsnorm.cu", 0, [], [])
    _nvrtc_ok(err, "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", *[o.encode() for o in options]]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if int(err) != 0:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CompileError(f"NVRTC: {err.name}: {log.decode(errors='replace').strip()[:1500]}")
        get_size, get = (
            (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
            if output == "cubin"
            else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)
        )
        err, size = get_size(prog)
        _nvrtc_ok(err, get_size.__name__)
        buf = b" " * size
        (err,) = get(prog, buf)
        _nvrtc_ok(err, get.__name__)
        return buf
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _nvrtc_ok(err, what: str) -> None:
    if int(err) != 0:
        raise CompileError(f"NVRTC: {what} failed: {getattr(err, 'name', err)}")


def compile_nvcc(src: str, arch: str, options: list[str], output: str = "cubin") -> bytes:
    """nvcc in a subprocess (``-cubin`` or ``-ptx``), at most two minutes."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise CompileError("nvcc: not found ($CUDA_HOME/bin, /usr/local/cuda/bin, PATH)")
    with tempfile.TemporaryDirectory(prefix="rmsnorm-cuda-") as tmp:
        cu, out = Path(tmp) / "rmsnorm.cu", Path(tmp) / f"rmsnorm.{output}"
        cu.write_text(src)
        cmd = [nvcc, f"-{output}", f"-arch={arch}", "-std=c++17", "-O3", *options, "-o", str(out), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise CompileError(f"nvcc: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:1500]}")
        return out.read_bytes()


COMPILERS = (("nvrtc", compile_nvrtc), ("nvcc", compile_nvcc))


def candidates(arch: str, *, use_cache: bool = True, attempts: list[str] | None = None):
    """Cubins of ``rmsnorm.cu`` for ``arch`` (e.g. "sm_90"), one per compiler that works, in the order above: each
    from the disk cache, else compiled (then cached). A caller that cannot load one takes the next. Every failed
    attempt is appended to ``attempts``."""
    src = source()
    attempts = attempts if attempts is not None else []
    for compiler, fn in COMPILERS:
        for variant, options in variants():
            key = hashlib.sha256("\0".join([src, arch, compiler, *options]).encode()).hexdigest()[:24]
            path = cache_dir() / f"rmsnorm-{arch}-{compiler}-{key}.cubin"
            if use_cache and path.is_file() and path.stat().st_size > 0:
                yield Built(path.read_bytes(), compiler, variant, arch, True, attempts)
                break  # this compiler's other variant would be the same kernels
            try:
                cubin = fn(src, arch, options)
            except Exception as exc:  # an import error, a missing library, a compile error: try the next
                attempts.append(f"{compiler} ({variant}): {type(exc).__name__}: {exc}")
                continue
            if use_cache:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_suffix(f".{os.getpid()}.tmp")
                    tmp.write_bytes(cubin)
                    tmp.replace(path)  # atomic: a concurrent process never reads half a file
                except OSError:
                    pass  # an unwritable cache only costs the next process a compile
            yield Built(cubin, compiler, variant, arch, False, attempts)
            break


def build(arch: str, *, use_cache: bool = True) -> Built:
    """The first cubin `candidates` gives; CompileError listing every attempt when no compiler worked."""
    attempts: list[str] = []
    for built in candidates(arch, use_cache=use_cache, attempts=attempts):
        return built
    raise CompileError("no CUDA compiler worked here: " + " | ".join(attempts))


def compiler_available() -> str | None:
    """None when some compiler can be tried here, else why none can."""
    if nvrtc_version() is not None or nvcc_path() is not None:
        return None
    return (
        "no CUDA compiler here: neither NVRTC through cuda-bindings (pip install cuda-bindings "
        "nvidia-cuda-nvrtc) nor nvcc was found"
    )
