"""Load the cubin on a GPU and launch its kernels on torch's current stream with raw pointers.

Loaders, in order: CuPy (``cupy.cuda.function.Module``: ``moduleLoadData``, launches through ``cuLaunchKernel``
with numpy scalars as arguments), then cuda-bindings (``cuda.bindings.driver``). Both run in the CUDA runtime's
primary context, the one torch uses, so pointers and streams are shared as they are. Each also answers the
occupancy query (``cuOccupancyMaxActiveBlocksPerMultiprocessor``) and raises a kernel's dynamic shared-memory
limit to what it asks for (`raise_limit`).
"""

from __future__ import annotations

import ctypes

import numpy as np

MAX_DYNAMIC_SHARED = 8
"""CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES."""


def raise_limit(already: int, nbytes: int) -> bool:
    """Must a kernel's dynamic shared-memory limit be raised before it asks for ``nbytes``? Whenever it asks for more
    than it was given: the default 48 KiB counts the kernel's static shared memory too (an H100, 6144-wide rows:
    exactly 48 KiB of stages beside 128 B static failed with CUDA_ERROR_INVALID_VALUE)."""
    return nbytes > already


class _StreamPtr:
    """What CuPy's launcher reads from a stream: ``.ptr`` (here torch's current stream handle)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


def _arg(value):
    """A kernel argument as CuPy passes it: pointers as 64-bit, ints as int32, floats as float32."""
    kind, v = value
    return {"ptr": np.uint64, "i32": np.int32, "f32": np.float32}[kind](v)


class CupyModule:
    name = "cupy"

    def __init__(self, cubin: bytes, device_index: int) -> None:
        import cupy
        from cupy.cuda import driver, function

        self._driver = driver
        with cupy.cuda.Device(device_index):
            self._module = function.Module()
            self._module.load(cubin)
        self._functions: dict[str, object] = {}
        self._smem: dict[str, int] = {}

    def function(self, name: str):
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = self._module.get_function(name)
        return fn

    def allow_shared(self, name: str, nbytes: int) -> None:
        if raise_limit(self._smem.get(name, 0), nbytes):
            self._driver.funcSetAttribute(self.function(name).ptr, MAX_DYNAMIC_SHARED, int(nbytes))
            self._smem[name] = nbytes

    def occupancy(self, name: str, block: int, smem: int) -> int:
        self.allow_shared(name, smem)
        return int(self._driver.occupancyMaxActiveBlocksPerMultiprocessor(self.function(name).ptr, block, smem))

    def launch(self, name: str, grid: tuple, block: int, smem: int, stream: int, args: list) -> None:
        self.allow_shared(name, smem)
        self.function(name)(tuple(grid), (block,), [_arg(a) for a in args], smem, _StreamPtr(stream))


class BindingsModule:
    name = "cuda-bindings"

    def __init__(self, cubin: bytes, device_index: int) -> None:
        from cuda.bindings import driver

        self._d = driver
        self._check(driver.cuInit(0), "cuInit")
        err, ctx = driver.cuCtxGetCurrent()
        if int(err) != 0 or not int(ctx):  # torch made its primary context current; if not, make it so
            err, dev = driver.cuDeviceGet(device_index)
            self._check((err,), "cuDeviceGet")
            err, ctx = driver.cuDevicePrimaryCtxRetain(dev)
            self._check((err,), "cuDevicePrimaryCtxRetain")
            self._check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        err, self._module = driver.cuModuleLoadData(cubin)
        self._check((err,), "cuModuleLoadData")
        self._functions: dict[str, object] = {}
        self._smem: dict[str, int] = {}

    def _check(self, result, what: str) -> None:
        err = result[0] if isinstance(result, tuple) else result
        if int(err) != 0:
            raise RuntimeError(f"{what} failed: {getattr(err, 'name', err)}")

    def function(self, name: str):
        fn = self._functions.get(name)
        if fn is None:
            err, fn = self._d.cuModuleGetFunction(self._module, name.encode())
            self._check((err,), f"cuModuleGetFunction({name})")
            self._functions[name] = fn
        return fn

    def allow_shared(self, name: str, nbytes: int) -> None:
        if raise_limit(self._smem.get(name, 0), nbytes):
            attr = self._d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._check(self._d.cuFuncSetAttribute(self.function(name), attr, int(nbytes)), "cuFuncSetAttribute")
            self._smem[name] = nbytes

    def occupancy(self, name: str, block: int, smem: int) -> int:
        self.allow_shared(name, smem)
        err, n = self._d.cuOccupancyMaxActiveBlocksPerMultiprocessor(self.function(name), block, smem)
        self._check((err,), "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return int(n)

    def launch(self, name: str, grid: tuple, block: int, smem: int, stream: int, args: list) -> None:
        self.allow_shared(name, smem)
        types = {"ptr": ctypes.c_void_p, "i32": ctypes.c_int, "f32": ctypes.c_float}
        values = tuple(v for _, v in args)
        ctypes_ = tuple(types[k] for k, _ in args)
        g = (tuple(grid) + (1, 1))[:3]
        self._check(
            self._d.cuLaunchKernel(
                self.function(name), g[0], g[1], g[2], block, 1, 1, smem, self._d.CUstream(stream), (values, ctypes_), 0
            ),
            "cuLaunchKernel",
        )


LOADERS = (("cupy", CupyModule), ("cuda-bindings", BindingsModule))


def load(cubin: bytes, device_index: int, check=None):
    """The first loader that loads ``cubin`` on the device and passes ``check(module)`` (a small launch whose result
    is known: arguments, stream and context as they will be used); RuntimeError listing every attempt otherwise."""
    attempts = []
    for name, cls in LOADERS:
        try:
            module = cls(cubin, device_index)
            if check is not None:
                check(module)
            return module
        except Exception as exc:
            attempts.append(f"{name}: {type(exc).__name__}: {exc}")
    raise RuntimeError("no loader could load and run the CUDA module: " + " | ".join(attempts))


def loader_available() -> str | None:
    """None when a loader can be imported here, else why none can."""
    import importlib.util

    for module in ("cupy", "cuda.bindings"):
        try:
            if importlib.util.find_spec(module) is not None:
                return None
        except (ImportError, ValueError):
            continue
    return "no way to launch a CUDA module here: neither CuPy (cupy-cuda12x/13x) nor cuda-bindings is installed"
