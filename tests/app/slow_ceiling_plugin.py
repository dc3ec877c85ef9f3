"""Test plugin (only in test_app_case_timeout): ``hang-eager`` hangs (as a deadlocked kernel would), and the copy
ceiling takes ``CEILING_SLEEP_S``, longer than the case time limit there, whatever this machine's memory speed: a
worker that measured it inside a case would time out."""

import multiprocessing
import time

import engine.runner as engine
from rmsnorm_kernels.registry import register

CEILING_SLEEP_S = 10.0
_measure_copy = engine.measure_copy


def _slow_measure_copy(*args, **kwargs):
    time.sleep(CEILING_SLEEP_S)
    return _measure_copy(*args, **kwargs)


engine.measure_copy = _slow_measure_copy


@register(
    "hang-eager",
    passes=("fwd",),
    family="baseline",
    source="plugin",
    description="test only: hangs for an hour inside a benchmark worker (a hung kernel)",
)
def hang_eager(x, weight, eps=1e-6):
    if multiprocessing.current_process().name.startswith("rmsnorm-worker-"):
        time.sleep(3600)
    raise RuntimeError("hang-eager only hangs benchmark worker processes")
