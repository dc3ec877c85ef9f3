"""How the engine writes a row's words: an exception cut to a reason, errors that JSON can carry, and the
``error`` row of a case that could not be measured at all (the service writes it when a worker died or hung).

`engine.runner` re-exports `error_row`; `DeviceBench.run_case` uses `short` and `finite` for its own rows."""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional, Union

from engine.byte_model import min_bytes
from engine.models import Case, ResultRow, RowDevice

MAX_REASON = 600
"""An exception's text in a row's reason is cut to this many characters."""
MAX_ROW_REASON = 4000
"""The longest reason a row may carry (`ResultRow.reason`)."""


def short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def finite(value: float) -> Optional[float]:
    """JSON has no inf: an output with NaN/Inf has no finite error (the reason says so)."""
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def error_row(
    case: Case,
    reason: str,
    run_id: str,
    device: Union[RowDevice, Mapping[str, Any]],
    mode: str = "cpu",
    started_at: Optional[float] = None,
) -> ResultRow:
    """The ``error`` row of a case that no `DeviceBench` could measure (its process died or hung, no device
    could take it): no timings, the pass's minimum bytes, the reason as given (cut to the row's limit)."""
    try:
        nbytes = min_bytes(case.pass_, case.M, case.N, case.dtype)
    except (KeyError, ValueError):
        nbytes = 0
    now = time.time()
    text = reason if len(reason) <= MAX_ROW_REASON else reason[: MAX_ROW_REASON - 1] + "…"
    return ResultRow.model_validate(
        {
            "run_id": run_id,
            "impl": case.impl,
            "pass": case.pass_,
            "dtype": case.dtype,
            "M": case.M,
            "N": case.N,
            "status": "error",
            "reason": text,
            "repetitions": 0,
            "bytes": nbytes,
            "mode": mode,
            "device": device.model_dump() if isinstance(device, RowDevice) else dict(device),
            "launch": None,
            "started_at": now if started_at is None else started_at,
            "ended_at": now,
        }
    )
