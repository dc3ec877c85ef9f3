"""The implementations as the layers above the engine see them: the listing, each one's launch grid, and the
loading of plug-ins. The service and the CLI go through here and never import ``rmsnorm_kernels.registry`` themselves.

    prepare_process(plugins)   before anything imports Triton: the interpreter when there is no GPU (the
                               engine's rule), then the registry with the built-ins, entry points,
                               ``RMSNORM_PLUGINS`` and ``plugins``; returns the registry
    load_registry(plugins)     the same registry, Triton's mode left as the caller set it (the CLI's way)
    list_implementations()     one dict per implementation (``/api/implementations``)
    launch_grids(M, N, sm)     ``{name: launch grid or None}`` (``/api/launch``)
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Optional

from rmsnorm_kernels.registry import Registry, default_registry, describe_all, load_all
from rmsnorm_kernels.triton_mode import INTERPRETER_SM_COUNT

log = logging.getLogger("rmsnorm.engine")

DEFAULT_SM_COUNT = INTERPRETER_SM_COUNT
"""The SM count launch grids are planned for when no GPU says its own (an H100/H200's; the one home of 132)."""


def prepare_process(plugins: Iterable[str] = (), interpreter_on_cpu: bool = False) -> Registry:
    """Switch Triton to its interpreter where it must be (``interpreter_on_cpu``: always, for a process that
    benchmarks on the CPU; else only when there is no GPU), then load the registry with ``plugins``."""
    import os

    from engine.device import use_triton_interpreter_without_gpu

    if interpreter_on_cpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first triton import
    else:
        use_triton_interpreter_without_gpu()
    registry = default_registry()
    plugins = tuple(plugins)
    if plugins:
        load_all(extra_paths=plugins, registry=registry)
    return registry


def load_registry(plugins: Iterable[str] = ()) -> Registry:
    """The registry with the built-ins, entry points, ``RMSNORM_PLUGINS`` and ``plugins`` loaded (ValueError or
    TypeError for a path that is no plug-in); Triton's interpreter is left as the caller set it."""
    return load_all(extra_paths=tuple(plugins))


def list_implementations(registry: Optional[Registry] = None) -> list[dict[str, Any]]:
    """Every registered implementation: name, passes, deterministic, family, description, available + reason, source."""
    return describe_all(default_registry() if registry is None else registry)


def launch_grids(
    M: int, N: int, sm_count: int = DEFAULT_SM_COUNT, registry: Optional[Registry] = None
) -> dict[str, Optional[dict[str, Any]]]:
    """``{implementation: launch grid or None}``: the grid each kernel would launch for an [M, N] input; None for
    an implementation without one, or whose launch function failed (logged; the others still answer)."""
    out: dict[str, Optional[dict[str, Any]]] = {}
    for impl in default_registry() if registry is None else registry:
        if impl.launch is None:
            out[impl.name] = None
            continue
        try:
            out[impl.name] = dict(impl.launch(M, N, sm_count))
        except Exception as exc:  # one plugin's bad launch function must not hide the others
            log.warning("launch(%s, %s, %s) of %s failed: %s", M, N, sm_count, impl.name, exc)
            out[impl.name] = None
    return out
