"""How many bytes a pass must move at least: the numerator of effective bandwidth.

With ``s`` the element size of the dtype (2 for bfloat16/float16, 4 for float32) and rstd kept in fp32:

- forward  = read x (M·N·s) + read γ (N·s) + write y (M·N·s) + write rstd (M·4)
- backward = read x and dy (2·M·N·s) + read γ (N·s) + read rstd (M·4) + write dx (M·N·s) + write dγ (N·s)

Effective bandwidth = minimum bytes / median time. It is the same for every implementation of a case,
so GB/s compare like time does, and the copy ceiling (read + write bytes of a device-to-device copy)
is the same kind of number.

``actual_bytes`` adds the traffic a backward strategy is known to add on top of the minimum, so a chart
can show why a variant is slower. The implementation says it, through its ``launch(M, N, sm_count)``: the
numbers of its dγ family (``extra_bytes`` and ``extra_bytes_note``; `rmsnorm_kernels.families.extra_traffic` reads
them). Without a launch, or when it declares no extra traffic (and for the forward): unknown, ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from engine.models import DTYPE_BYTES
from rmsnorm_kernels.families import extra_traffic

RSTD_BYTES = 4


def element_size(dtype: str) -> int:
    """Bytes of one element of a torch dtype name (``"bfloat16"`` → 2)."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"no byte size known for dtype {dtype!r}") from None


def min_bytes(pass_: str, M: int, N: int, dtype: str) -> int:
    """Minimum bytes moved by one pass over an [M, N] input (see the module docstring)."""
    s = element_size(dtype)
    if pass_ == "fwd":
        return M * N * s + N * s + M * N * s + M * RSTD_BYTES
    if pass_ == "bwd":
        return 2 * M * N * s + N * s + M * RSTD_BYTES + M * N * s + N * s
    raise ValueError(f"pass must be 'fwd' or 'bwd', got {pass_!r}")


@dataclass(frozen=True)
class ActualBytes:
    bytes: int
    note: str
    """What was added, and whether it is exact or an estimate."""


def actual_bytes(pass_: str, M: int, N: int, dtype: str, launch: Optional[dict]) -> Optional[ActualBytes]:
    """Minimum bytes plus the extra traffic the implementation's launch declares, or ``None``."""
    if pass_ != "bwd" or not launch:
        return None
    extra = extra_traffic(launch, N)
    if extra is None:
        return None
    return ActualBytes(min_bytes(pass_, M, N, dtype) + extra[0], extra[1])
