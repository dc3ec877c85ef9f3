"""The one list of built-in implementations: importing a module registers what it defines.

A new built-in backward is one new module under `kernels/` plus one line here; a plugin outside the
package needs no line at all (entry point or module path, see `kernels/registry.py`)."""

from importlib import import_module

BUILTIN_MODULES = (
    "kernels.baselines",
    "kernels.triton_backward.atomic",
    "kernels.triton_backward.workspace",
    "kernels.triton_backward.persistent",
    "kernels.triton_rmsnorm",
)

for _module in BUILTIN_MODULES:
    import_module(_module)
