"""The pluggable slot: every RMSNorm implementation the project knows is one `Implementation` here.

An implementation joins in one of three ways, and then appears in the API, the CLI and every chart
with no other edit:

1. a decorator in its own module::

       from rmsnorm_kernels.families import BackwardFamily
       from rmsnorm_kernels.registry import register

       MY_FAMILY = BackwardFamily("my-tree", "dγ partials summed pairwise", partial_rows=...)

       @register("my-rmsnorm", passes=("fwd", "bwd"), family=MY_FAMILY, launch=my_grid,
                 deterministic=True, description="what it does in one line")
       def my_rmsnorm(x, weight, eps):
           return MyAutogradFunction.apply(x, weight, eps)

   (``family`` may also be a plain name: ``"baseline"``, ``"other"``, or an existing strategy's name to be
   drawn like it; see `rmsnorm_kernels/families.py`);

2. a Python entry point in the group ``rmsnorm_dashboard.implementations`` whose object is an
   `Implementation` (or a decorated function, or a module whose import registers entries);
3. a ``module:object`` (or plain ``module``) path given at run time (``RMSNORM_PLUGINS`` env var,
   ``--plugin`` on the CLI, :func:`load_path`).

The function contract: ``fn(x, weight, eps) -> y`` for ``x`` of shape ``[..., N]`` and ``weight`` of
shape ``[N]``, autograd-capable when ``"bwd"`` is in ``passes`` (the engine times the backward through
``torch.autograd.grad``). This module imports no torch, no Triton and no web stack.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable, Iterable, Optional, Union

from rmsnorm_kernels.families import BackwardFamily, FamilyLaunch, check_family_name
from rmsnorm_kernels.limits import DEFAULT_SM_COUNT

ENTRY_POINT_GROUP = "rmsnorm_dashboard.implementations"
PLUGINS_ENV = "RMSNORM_PLUGINS"

PASSES = ("fwd", "bwd")
EXAMPLE_SHAPE = (16384, 4096)
"""(M, N) of the example launch each listing entry carries (on a device of `DEFAULT_SM_COUNT` SMs)."""

RmsNormFn = Callable[..., Any]


@dataclass(frozen=True)
class Implementation:
    """One registered RMSNorm implementation (a row of ``/api/implementations``)."""

    name: str
    fn: RmsNormFn = field(repr=False, compare=False)
    passes: tuple[str, ...] = ("fwd", "bwd")
    deterministic: bool = True
    family: Union[str, BackwardFamily] = "other"
    """How it reduces dγ: a `BackwardFamily` (its numbers then join every ``launch()`` result), or a name only
    (``baseline``, ``other``, or a strategy's name to be drawn like it). Stored as the name; the descriptor
    is ``dgamma``."""
    description: str = ""
    requires: tuple[str, ...] = ()
    """Importable modules it needs (e.g. ``liger_kernel``); missing ones make it unavailable, with the reason."""
    available_when: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)
    """Extra check run on demand: returns ``None`` when usable here, else the reason it is not."""
    supports: Callable[[int, int, str], str | None] | None = field(default=None, repr=False, compare=False)
    """``supports(M, N, dtype) -> None | reason``: the shapes and dtypes (``"bfloat16"``…) it takes. A case it does
    not take is a ``skipped`` row with that reason, decided before anything is allocated (and a skipped case of
    ``rmsnorm-dash check``), never a call that fails or a wrong result. ``None``: it takes every shape the engine
    asks for."""
    launch: Callable[[int, int, int], dict] | None = field(default=None, repr=False, compare=False)
    """``launch(M, N, sm_count) -> {"programs": G, "rows_per_program": r, ...}``: the real grid the kernel
    uses for that shape on a device with ``sm_count`` SMs (the dock scene draws it). ``None`` for opaque
    baselines. With a `BackwardFamily` the result also carries the family's numbers (``family``,
    ``partial_rows``, ``partial_bytes``, ``extra_bytes``, ``extra_bytes_note``: `rmsnorm_kernels.families`), which is
    all the engine's byte model and memory estimate read; a plain launch may give them itself."""
    uses_triton: bool = False
    """It launches Triton kernels (on CPU it then runs only under the Triton interpreter)."""
    source: str = "builtin"
    """Where it came from: ``builtin``, ``entry-point:<dist>``, ``path:<module:object>`` or ``plugin``."""
    fused: Optional[bool] = None
    """Its autograd saves only rstd, no fp32 copies of x (the memory estimate); default: it has a ``launch``."""
    dgamma: Optional[BackwardFamily] = field(default=None, repr=False)
    """The `BackwardFamily` given as ``family`` (set by the constructor), else ``None``."""

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str) or any(c.isspace() for c in self.name):
            raise ValueError(f"implementation name must be a non-empty string without spaces, got {self.name!r}")
        if not callable(self.fn):
            raise TypeError(f"implementation {self.name!r}: fn must be callable, got {type(self.fn).__name__}")
        bad = [p for p in self.passes if p not in PASSES]
        if bad or not self.passes:
            raise ValueError(
                f"implementation {self.name!r}: passes must be a non-empty subset of {PASSES}, got {self.passes!r}"
            )
        if isinstance(self.family, BackwardFamily):
            object.__setattr__(self, "dgamma", self.family)
            object.__setattr__(self, "family", self.family.name)
        try:
            check_family_name(self.family)
        except ValueError as exc:
            raise ValueError(f"implementation {self.name!r}: {exc}") from None
        if self.dgamma is not None:
            if self.dgamma.name != self.family:
                raise ValueError(
                    f"implementation {self.name!r}: family {self.family!r} is not its dγ family {self.dgamma.name!r}"
                )
            if self.launch is None:
                raise ValueError(
                    f"implementation {self.name!r}: a BackwardFamily needs the launch grid its "
                    "numbers are computed from (launch=...)"
                )
            object.__setattr__(self, "launch", FamilyLaunch(self.launch, self.dgamma))
        if self.fused is None:
            object.__setattr__(self, "fused", self.launch is not None)

    def unavailable_reason(self) -> str | None:
        """``None`` when this implementation can run in this process, else a plain-spoken reason."""
        for module in self.requires:
            try:
                importlib.import_module(module)
            except Exception as exc:  # ImportError, but also broken installs raising anything
                return (
                    f"needs the Python module '{module}', which cannot be imported here ({type(exc).__name__}: {exc})"
                )
        if self.available_when is not None:
            try:
                return self.available_when()
            except Exception as exc:
                return f"availability check failed: {type(exc).__name__}: {exc}"
        return None

    def shape_refusal(self, M: int, N: int, dtype: str) -> str | None:
        """``None`` when it takes an [M, N] input of ``dtype``, else why not (its `supports` hook)."""
        if self.supports is None:
            return None
        try:
            return self.supports(M, N, dtype)
        except Exception as exc:
            return f"shape check failed: {type(exc).__name__}: {exc}"

    def describe(self) -> dict:
        """JSON-ready description (what the API and ``rmsnorm-dash list`` show)."""
        reason = self.unavailable_reason()
        return {
            "name": self.name,
            "passes": list(self.passes),
            "deterministic": self.deterministic,
            "family": self.family,
            "description": self.description,
            "available": reason is None,
            "reason": reason,
            "source": self.source,
            "uses_triton": self.uses_triton,
            "fused": self.fused,
            "dgamma": self.dgamma.describe() if self.dgamma is not None else None,
            "launch_example": self.example_launch(),
        }

    def example_launch(self, shape: tuple[int, int] = EXAMPLE_SHAPE, sm_count: int = DEFAULT_SM_COUNT) -> dict | None:
        """``{"M", "N", "sm_count", **launch(M, N, sm_count)}`` at ``shape``; ``None`` without a launch (or when
        the plugin's launch fails: the listing must not)."""
        if self.launch is None:
            return None
        M, N = shape
        try:
            return {"M": M, "N": N, "sm_count": sm_count, **dict(self.launch(M, N, sm_count))}
        except Exception:
            return None


class Registry:
    """Name → `Implementation`, in registration order."""

    def __init__(self) -> None:
        self._impls: dict[str, Implementation] = {}

    def add(self, impl: Implementation, *, replace: bool = False) -> Implementation:
        if not isinstance(impl, Implementation):
            raise TypeError(f"expected an Implementation, got {type(impl).__name__}")
        if impl.name in self._impls and not replace and self._impls[impl.name] is not impl:
            raise ValueError(f"an implementation named {impl.name!r} is already registered")
        self._impls[impl.name] = impl
        return impl

    def remove(self, name: str) -> None:
        self._impls.pop(name, None)

    def get(self, name: str) -> Implementation:
        try:
            return self._impls[name]
        except KeyError:
            known = ", ".join(self._impls) or "none"
            raise KeyError(f"unknown implementation {name!r}; registered: {known}") from None

    def names(self) -> list[str]:
        return list(self._impls)

    def __iter__(self):
        return iter(list(self._impls.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._impls

    def __len__(self) -> int:
        return len(self._impls)


REGISTRY = Registry()


def register(
    name: str,
    *,
    passes: Iterable[str] = ("fwd", "bwd"),
    deterministic: bool = True,
    family: Union[str, BackwardFamily] = "other",
    description: str = "",
    requires: Iterable[str] = (),
    available_when: Callable[[], str | None] | None = None,
    supports: Callable[[int, int, str], str | None] | None = None,
    launch: Callable[[int, int, int], dict] | None = None,
    uses_triton: bool = False,
    fused: Optional[bool] = None,
    source: str = "builtin",
    registry: Registry | None = None,
    replace: bool = False,
) -> Callable[[RmsNormFn], RmsNormFn]:
    """Decorator: register ``fn(x, weight, eps)`` under ``name``. The function itself is returned unchanged,
    with the record attached as ``fn.implementation``."""

    def decorate(fn: RmsNormFn) -> RmsNormFn:
        impl = Implementation(
            name=name,
            fn=fn,
            passes=tuple(passes),
            deterministic=deterministic,
            family=family,
            description=description or (fn.__doc__ or "").strip().split("\n")[0],
            requires=tuple(requires),
            available_when=available_when,
            supports=supports,
            launch=launch,
            uses_triton=uses_triton,
            fused=fused,
            source=source,
        )
        (registry if registry is not None else REGISTRY).add(impl, replace=replace)
        fn.implementation = impl  # type: ignore[attr-defined]
        return fn

    return decorate


def _adopt(obj: Any, source: str, registry: Registry) -> list[Implementation]:
    """Register whatever a plugin object is: an Implementation, a decorated function, or a list of them.
    A module (or a registering function already run) may have registered itself on import."""
    found: list[Implementation] = []
    if isinstance(obj, Implementation):
        found.append(obj)
    elif callable(obj) and isinstance(getattr(obj, "implementation", None), Implementation):
        found.append(obj.implementation)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            found.extend(_adopt(item, source, registry))
        return found
    for impl in found:
        # a plugin's @register ran on import and labelled it "builtin": name where it really came from
        if impl.source == "builtin" and source != "builtin":
            impl = _with_source(impl, source)
        if (
            impl.name not in registry
            or registry.get(impl.name) != impl
            or registry.get(impl.name).source != impl.source
        ):
            registry.add(impl, replace=True)
    return found


def _with_source(impl: Implementation, source: str) -> Implementation:
    from dataclasses import replace as dc_replace

    return dc_replace(impl, source=source)


def load_path(path: str, registry: Registry | None = None) -> list[str]:
    """Load ``module`` or ``module:object`` and register what it provides. Returns the names it added."""
    registry = registry if registry is not None else REGISTRY
    before = set(registry.names())
    module_name, _, attr = path.partition(":")
    if not module_name:
        raise ValueError(f"plugin path must look like 'package.module' or 'package.module:object', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import plugin module {module_name!r}: {exc}") from exc
    if not attr:  # a plain module registers on import: label what it added
        for name in [n for n in registry.names() if n not in before]:
            if registry.get(name).source == "builtin":
                registry.add(_with_source(registry.get(name), f"path:{path}"), replace=True)
    if attr:
        try:
            obj = getattr(module, attr)
        except AttributeError:
            raise ValueError(f"plugin module {module_name!r} has no attribute {attr!r}") from None
        adopted = _adopt(obj, f"path:{path}", registry)
        if not adopted and set(registry.names()) == before:
            raise TypeError(f"{path!r} is neither an Implementation nor a @register-ed function")
    return [n for n in registry.names() if n not in before] or [i.name for i in registry if i.source == f"path:{path}"]


def load_entry_points(registry: Registry | None = None, entry_points: Iterable[Any] | None = None) -> list[str]:
    """Load every entry point of the ``rmsnorm_dashboard.implementations`` group. A broken plugin is skipped
    with a warning, never fatal: the rest of the registry still works."""
    import warnings

    registry = registry if registry is not None else REGISTRY
    before = set(registry.names())
    eps = entry_points if entry_points is not None else metadata.entry_points(group=ENTRY_POINT_GROUP)
    for ep in eps:
        try:
            obj = ep.load()
        except Exception as exc:
            warnings.warn(f"rmsnorm plugin entry point {ep.name!r} failed to load: {exc}", RuntimeWarning, stacklevel=2)
            continue
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value
        _adopt(obj, f"entry-point:{dist}", registry)
    return [n for n in registry.names() if n not in before]


_LOADED = False
"""The one "registry loaded" flag: built-ins, entry points and ``RMSNORM_PLUGINS`` were loaded once."""


def load_all(extra_paths: Iterable[str] = (), registry: Registry | None = None) -> Registry:
    """Populate the registry: the built-in implementations, installed entry points, then the
    ``RMSNORM_PLUGINS`` env var (comma-separated paths) and ``extra_paths``. Safe to call repeatedly."""
    global _LOADED
    registry = registry if registry is not None else REGISTRY
    if not _LOADED:
        importlib.import_module("rmsnorm_kernels.implementations")  # registers the built-ins
        load_entry_points(registry)
        _LOADED = True
    paths = [p.strip() for p in os.environ.get(PLUGINS_ENV, "").split(",") if p.strip()]
    for path in [*paths, *extra_paths]:
        load_path(path, registry)
    return registry


def default_registry() -> Registry:
    """The global registry, populated on first use (`load_all` once per process; later calls only return it)."""
    return REGISTRY if _LOADED else load_all()


def describe_all(registry: Registry | None = None) -> list[dict]:
    return [impl.describe() for impl in (registry if registry is not None else REGISTRY)]
