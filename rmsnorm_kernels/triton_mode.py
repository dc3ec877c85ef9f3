"""Where the Triton kernels run in this process: natively on a CUDA GPU, under Triton's CPU interpreter
(``TRITON_INTERPRET=1``, set before triton is first imported), or nowhere — and the plain-spoken reason."""

from __future__ import annotations

import functools

from rmsnorm_kernels.limits import DEFAULT_SM_COUNT

INTERPRETER_SM_COUNT = DEFAULT_SM_COUNT
"""SM count assumed under the interpreter (`rmsnorm_kernels.limits.DEFAULT_SM_COUNT`), so launch grids look like the GPU's."""


@functools.lru_cache(maxsize=1)
def interpreting() -> bool:
    """True when ``@triton.jit`` functions of this process are interpreted on the CPU. Triton decides this
    when a kernel is decorated, so a probe kernel decorated now tells what ours got at import."""
    import triton

    from triton.runtime.interpreter import InterpretedFunction

    @triton.jit
    def _probe():
        pass

    return isinstance(_probe, InterpretedFunction)


def triton_unavailable_reason() -> str | None:
    """``None`` when Triton kernels can run here, else why not."""
    try:
        import triton  # noqa: F401
    except Exception as exc:  # not installed, or a broken install
        return f"Triton cannot be imported here ({type(exc).__name__}: {exc})"
    if interpreting():
        return None
    import torch

    if torch.cuda.is_available():
        return None
    return (
        "needs a CUDA GPU, or Triton's CPU interpreter (TRITON_INTERPRET=1 set before triton is imported); "
        "neither is active in this process"
    )


@functools.lru_cache(maxsize=None)
def _cuda_sm_count(index: int) -> int:
    import torch

    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device) -> int:
    """Streaming multiprocessors of ``device`` (``INTERPRETER_SM_COUNT`` for CPU tensors)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return _cuda_sm_count(device.index if device.index is not None else torch.cuda.current_device())
    return INTERPRETER_SM_COUNT


def install_interpreter_numpy_fix() -> None:
    """Make Triton 3.6's interpreter work with NumPy ≥ 2.4.

    The interpreter holds every scalar as a 1-element, 1-D array and turns it into a Python int with
    ``int(array)``, which NumPy 2.4 made an error ("only 0-dimensional arrays can be converted to Python
    scalars"): any ``range``/``tl.range`` with a run-time bound then fails. This re-defines the patched
    ``tensor.__index__`` to take the single element explicitly. No effect on compiled (GPU) kernels;
    installed once, only when interpreting."""
    if not interpreting():
        return
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "numpy_index_fix", False):
        return

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patch_lang_tensor.numpy_index_fix = True
    interpreter._patch_lang_tensor = patch_lang_tensor


install_interpreter_numpy_fix()


@functools.lru_cache(maxsize=None)
def _cuda_capability(index: int) -> tuple[int, int]:
    import torch

    return tuple(torch.cuda.get_device_capability(index))


def _cuda_capability_major(index: int) -> int:
    return _cuda_capability(index)[0]


def arch(device) -> str:
    """The kernel-config key of ``device`` ("sm90" for an H100, "sm90-h200" for an H200, which has a table of its own;
    `kernel_config.DEFAULT_ARCH` on CPU and under the interpreter), which picks the tuned table
    (`rmsnorm_kernels.kernel_config.arch_of`)."""
    import torch

    from rmsnorm_kernels.kernel_config import arch_of

    device = torch.device(device)
    if interpreting() or device.type != "cuda":
        return arch_of(None)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return arch_of(_cuda_capability(index), _cuda_name(index))


@functools.lru_cache(maxsize=None)
def _cuda_name(index: int) -> str:
    import torch

    return torch.cuda.get_device_name(index)


def dependent_launch(device) -> bool:
    """Whether a follow-up kernel on ``device`` may be launched with programmatic dependent launch (PDL:
    it starts as the kernel before it drains and waits in ``gdc_wait`` for that kernel's writes): native
    CUDA on compute capability ≥ 9.0 (Hopper), unless ``RMSNORM_PDL=0``. Asked on every backward call, so
    the capability is looked up once per device, like `sm_count`'s."""
    import os

    import torch

    if interpreting() or os.environ.get("RMSNORM_PDL", "1") == "0":
        return False
    device = torch.device(device)
    if device.type != "cuda":
        return False
    return _cuda_capability_major(device.index if device.index is not None else torch.cuda.current_device()) >= 9


def dependent_launch_options(pdl: bool) -> dict:
    """The launch keywords of a follow-up kernel queued with programmatic dependent launch when ``pdl`` is set."""
    return {"launch_pdl": True} if pdl else {}
