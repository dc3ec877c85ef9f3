"""Shared facts with one home (torch-free, so the request models and the service can import them): the
widest row any implementation is asked for, the device the grids are planned for when none is named, the
shared memory a pipelined kernel may use, and the spelling of a device."""

import re

MAX_N = 65536
"""Widest row (N) the engine accepts and the Triton kernels support (one row is held on chip by one program)."""

DEFAULT_SM_COUNT = 132
"""An H100/H200's SM count: the grid a ``launch()`` plans when no SM count is given, and the count the kernels
assume under Triton's CPU interpreter (so that launch grids there look like the GPU's)."""

SHARED_MEMORY_BUDGET = 200 * 1024
"""Bytes of shared memory one SM may give the software-pipelined loads of its programs (the H100/H200 have
227 KB): the pipeline depth of every persistent kernel is cut until its buffers fit."""

DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d{1,3})?)$")
"""A device as a request names it: ``auto``, ``cpu``, ``cuda`` or ``cuda:<index>``."""
