"""`iter_run` with cases fed by the caller (what the service's worker process does over its pipe) and the public
`error_row` the service uses for a case no worker could measure."""

import random

import pytest

from engine.byte_model import min_bytes
from engine.models import Case, ResultRow, RunHeader, Sweep
from engine.runner import DeviceBench, error_row, iter_run, plan
from tiny_impls import make_registry

SMALL_CEILING = 1 << 20


@pytest.fixture
def registry():
    return make_registry()


def _sweep(registry, **over):
    data = {
        "implementations": ["test-torch", "test-fwd-only"],
        "passes": ["fwd"],
        "dtypes": ["fp32"],
        "M": [16, 32],
        "N": [64],
        "repetitions": 2,
        "warmup": 0,
        "device": "cpu",
    }
    data.update(over)
    return Sweep.model_validate(data, context={"registry": registry})


def test_cases_are_drawn_lazily_one_per_row(registry):
    sweep = _sweep(registry)
    planned = plan(sweep, registry)
    random.shuffle(planned)
    drawn: list[Case] = []

    def feed():
        for case in planned[:3]:
            drawn.append(case)
            yield case

    bench = DeviceBench("cpu", ceiling_bytes=SMALL_CEILING, registry=registry)
    run = iter_run(sweep, registry=registry, bench=bench, cases=feed(), implementations=["test-torch"], run_id="r-1")
    header = next(run)
    assert isinstance(header, RunHeader) and drawn == []  # the header comes before any case is asked for
    assert header.sweep["implementations"] == ["test-torch"] and header.run_id == "r-1"
    first = next(run)
    assert isinstance(first, ResultRow) and len(drawn) == 1  # one case drawn per row, not ahead
    assert (first.impl, first.M) == (planned[0].impl, planned[0].M)
    rest = list(run)
    assert [(r.impl, r.M) for r in [first, *rest]] == [(c.impl, c.M) for c in planned[:3]]
    assert all(r.run_id == "r-1" and r.status == "ok" for r in [first, *rest])


def test_verify_and_profile_of_the_sweep_reach_the_rows(registry):
    sweep = _sweep(registry, implementations=["test-torch"], M=[16], verify=False)
    rows = list(iter_run(sweep, registry=registry, ceiling_bytes=SMALL_CEILING, cases=plan(sweep, registry)))[1:]
    assert rows and all(r.verified is None for r in rows)  # verify off: not checked
    checked = list(
        iter_run(
            _sweep(registry, implementations=["test-torch"], M=[16]), registry=registry, ceiling_bytes=SMALL_CEILING
        )
    )[1:]
    assert all(r.verified is True for r in checked)


def test_error_row_carries_the_reason_and_the_minimum_bytes():
    case = Case(impl="x", pass_="bwd", dtype="bfloat16", M=random.randint(1, 999), N=random.randint(1, 999))
    row = error_row(case, "worker died", run_id="r-2", device={"name": "cpu:1", "index": 1}, started_at=5.0)
    assert row.status == "error" and row.reason == "worker died" and row.run_id == "r-2"
    assert row.bytes == min_bytes("bwd", case.M, case.N, "bfloat16")
    assert (row.M, row.N, row.pass_, row.device.name, row.started_at) == (case.M, case.N, "bwd", "cpu:1", 5.0)
    assert row.median_us is None and row.ended_at >= 5.0
    assert len(error_row(case, "y" * 5000, run_id="r", device={"name": "d"}).reason) == 4000


def test_a_run_freezes_the_heap_it_starts_with_and_still_frees_a_case_cycle(registry):
    """The case-end `gc.collect()` must not rescan the process's long-lived heap (issue 37: 75 ms a call), but a
    cycle made during a run is still collected."""
    import gc
    import weakref

    class Node:
        pass

    gc.unfreeze()
    try:
        before = gc.get_freeze_count()
        long_lived = Node()
        long_lived.me = long_lived  # alive at the run's start: frozen, not freed
        run = iter_run(
            _sweep(registry),
            registry=registry,
            bench=DeviceBench("cpu", ceiling_bytes=SMALL_CEILING, registry=registry),
        )
        next(run)
        assert gc.get_freeze_count() > before
        assert not any(obj is long_lived for obj in gc.get_objects())  # frozen: out of every generation's scan
        late = Node()
        late.me = late  # made after the header: a cycle the collector must still find
        dead = weakref.ref(late)
        del late
        assert [row.status for row in run] == ["ok"] * 4
        gc.collect()
        assert dead() is None
    finally:
        gc.unfreeze()
