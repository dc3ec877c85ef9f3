"""Which device a run measures, and the facts a result needs to be believed later: the device's name,
SMs, memory and L2, the software versions, the git commit, the time — gathered into the run header
(`run_header`).

On CPU the "SM count" is the number of logical cores and ``l2_bytes`` the last-level cache.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import torch

from engine.models import DeviceInfo, RowDevice, RunHeader

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
"""The checkout (or editable install): git is asked here, the service finds static/, templates/, results/ here."""


def resolve(spec: str = "auto") -> torch.device:
    """``"auto"`` → the first GPU if there is one, else the CPU; ``"cuda"`` → ``cuda:0``. Raises ValueError
    for a GPU that is not there."""
    spec = (spec or "auto").strip().lower()
    if spec == "auto":
        return torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {spec!r} asked for, but no CUDA GPU is visible to this process")
        index = 0 if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"device {spec!r} asked for, but only {torch.cuda.device_count()} GPU(s) are visible")
        return torch.device("cuda", index)
    if device.type != "cpu":
        raise ValueError(f"unsupported device {spec!r}")
    return device


def describe(device: torch.device) -> DeviceInfo:
    """The run header's ``device``."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return DeviceInfo(
            kind="cuda",
            index=device.index,
            name=props.name,
            uuid=_gpu_uuid(props),
            sm_count=props.multi_processor_count,
            memory_bytes=props.total_memory,
            l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
            capability=f"{props.major}.{props.minor}",
        )
    return DeviceInfo(
        kind="cpu",
        index=None,
        name=cpu_name(),
        uuid=None,
        sm_count=os.cpu_count() or 1,
        memory_bytes=_meminfo_bytes("MemTotal") or 0,
        l2_bytes=cpu_last_level_cache_bytes(),
        capability=None,
    )


def row_device(info: DeviceInfo) -> RowDevice:
    return RowDevice(index=info.index, name=info.name, uuid=info.uuid)


def slug(info: DeviceInfo) -> str:
    """``"NVIDIA H200"`` → ``"nvidia-h200"`` (result file names)."""
    text = re.sub(r"\(r\)|\(tm\)|cpu @.*$", "", info.name.lower())
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:40].strip("-")
    return text if info.kind == "cuda" else f"cpu-{text}" if text else "cpu"


def _gpu_uuid(props) -> Optional[str]:
    uuid = getattr(props, "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def cpu_last_level_cache_bytes() -> int:
    """Largest cache of cpu0 from sysfs (L3 on most machines); 32 MiB when it cannot be read."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        match = re.match(r"(\d+)([KMG]?)", text)
        if match:
            sizes.append(int(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)])
    return max(sizes) if sizes else 32 << 20


def _meminfo_bytes(key: str) -> Optional[int]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def free_memory_bytes(device: torch.device) -> int:
    """Memory a case may allocate now: free GPU memory (``torch.cuda.mem_get_info``) plus what torch's
    caching allocator holds unused; on CPU the kernel's ``MemAvailable``."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free + max(cached, 0))
    available = _meminfo_bytes("MemAvailable")
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            available = 4 << 30
    return int(available)


def _dist_version(*names: str) -> Optional[str]:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def package_version() -> str:
    """This project's version: the installed distribution's, else the source tree's (a GPU host runs it uninstalled)."""
    from rmsnorm_kernels import __version__

    return _dist_version("rmsnorm-dashboard") or __version__


def versions() -> dict[str, Optional[str]]:
    return {
        "torch": torch.__version__,
        "triton": _dist_version("triton", "pytorch-triton"),  # not imported: see use_triton_interpreter_without_gpu
        "python": platform.python_version(),
        "rmsnorm_dashboard": package_version(),
        "liger_kernel": _dist_version("liger-kernel", "liger_kernel"),
        "quack_kernels": _dist_version("quack-kernels", "quack_kernels"),
        "native_node": native_node_state(),
    }


def native_node_state() -> Optional[str]:
    """How the eager Triton path ran: "loaded" (the C++ node, `rmsnorm_kernels.native`), the reason it is not,
    or None where it was never asked for (no Triton case on a GPU in this process)."""
    from rmsnorm_kernels import native

    if native.STATE["module"] is not None:
        return "loaded"
    return native.STATE["error"] or ("off" if not native.enabled() else None)


def git_commit() -> Optional[str]:
    """Env ``GIT_COMMIT`` when set (a copied tree's own ``.git`` can name another commit than the files it
    holds: the lent GPU's copy reported the session's first commit), else ``git rev-parse HEAD`` of the
    checkout this package runs from, else None."""
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=5, check=False
        )
        if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", out.stdout.strip()):
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def git_dirty() -> Optional[bool]:
    """Whether the checkout has uncommitted changes to tracked files (None outside a git checkout, and where
    ``GIT_COMMIT`` names the files' commit: the tree's own .git is then another commit's, so a diff against it
    says nothing about the files)."""
    if os.environ.get("GIT_COMMIT"):
        return None
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=PACKAGE_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def host() -> str:
    return socket.gethostname()


def run_header(info: DeviceInfo, run_id: str, sweep: dict[str, Any], ceiling: Any, ceiling_method: str) -> RunHeader:
    """The header of a run on this device: the device, its measured copy ceiling (an `engine.ceiling.Ceiling`,
    or None when it could not be measured: ``ceiling_method`` says why), the versions, the commit, the host, now,
    and the sweep as run (``sweep``: the request, its implementation list resolved)."""
    return RunHeader(
        run_id=run_id,
        created_at=utc_now_iso(),
        device=info,
        ceiling_GBps=ceiling.GBps if ceiling else None,
        ceiling_method=ceiling_method,
        ceiling_bytes=ceiling.nbytes if ceiling else None,
        versions=versions(),
        git_commit=git_commit(),
        git_dirty=git_dirty(),
        host=host(),
        sweep=sweep,
        kernel_configs=kernel_configs(info),
    )


def kernel_configs(info: DeviceInfo) -> dict[str, Any]:
    """Which configuration the Triton kernels ran with on this device: the tuned table (its name, the device it was
    tuned on, when) or the rule (`rmsnorm_kernels.kernel_config`)."""
    from rmsnorm_kernels.kernel_config import arch_of, describe as describe_configs

    capability = tuple(int(p) for p in info.capability.split(".")) if info.kind == "cuda" and info.capability else None
    try:
        return describe_configs(arch_of(capability, info.name))
    except (OSError, ValueError) as exc:  # a malformed table: the run says so instead of failing
        return {"table": None, "source": "error", "error": str(exc)[:200]}


def use_triton_interpreter_without_gpu() -> bool:
    """Without a GPU, Triton kernels can only run under Triton's interpreter, which must be switched on
    (``TRITON_INTERPRET=1``) before Triton is first imported. Call this at process start (the CLI and the
    service's workers do); returns whether the interpreter is on."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return True
    if torch.cuda.is_available():
        return False
    if "triton" in sys.modules:
        return False
    os.environ["TRITON_INTERPRET"] = "1"
    return True
