"""Shared facts with one home (torch-free, so the request models and the service can import them):
the widest row any implementation is asked for, and the spelling of a device."""

import re

MAX_N = 65536
"""Widest row (N) the engine accepts and the Triton kernels support (one row is held on chip by one program)."""

DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d{1,3})?)$")
"""A device as a request names it: ``auto``, ``cpu``, ``cuda`` or ``cuda:<index>``."""
