"""The one list of built-in implementations: importing a module registers what it defines.

A new built-in Triton backward is its kernels' module under `rmsnorm_kernels/triton_backward/` plus its entry in
`rmsnorm_kernels/triton_rmsnorm.py` (and `rmsnorm_kernels/ops.py` for the custom op); a plugin outside the
package needs no line at all (entry point or module path, see `rmsnorm_kernels/registry.py`)."""

from importlib import import_module

BUILTIN_MODULES = (
    "rmsnorm_kernels.baselines",
    "rmsnorm_kernels.triton_rmsnorm",
)

for _module in BUILTIN_MODULES:
    import_module(_module)
