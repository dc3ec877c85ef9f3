"""Test plugin (``RMSNORM_PLUGINS=tests.app.crash_plugin``): an implementation that kills the process running it,
the way a kernel fault or the OOM killer would. Only ever loaded into a test server's processes.

Inside a benchmark worker (``rmsnorm-worker-*``) it exits with code 3; anywhere else it raises instead, so that
a process that merely lists or validates implementations can never be taken down by it."""

import multiprocessing
import os

from rmsnorm_kernels.registry import register

EXIT_CODE = 3


@register(
    "crash-exit",
    passes=("fwd", "bwd"),
    family="other",
    description="test only: the process running it exits with code 3 (a worker crash)",
    source="plugin",
)
def crash_exit(x, weight, eps=1e-6):
    if multiprocessing.current_process().name.startswith("rmsnorm-worker-"):
        os._exit(EXIT_CODE)
    raise RuntimeError("crash-exit only crashes benchmark worker processes")
