"""Schemathesis against /openapi.json: generated requests (valid and invalid) never get a 5xx.

A seeded run (``derandomize``: the same examples every time) of MAX_EXAMPLES per operation. The full figure of
issue 12 (every check, the coverage and stateful phases, non-finite bodies injected, against uvicorn) is
bench/service_figures.py's part a; this test keeps the in-process core of it in the suite.

The app under test has no worker started, and a queue of length 0, so nothing generated is ever measured.
POST /benchmark is fuzzed with invalid bodies only (negative mode): a *valid* generated sweep could ask for hours
of measurements (M up to 2^20, every implementation); its valid path is covered by the other service tests."""

from __future__ import annotations

import tempfile
from pathlib import Path

import schemathesis
from schemathesis import GenerationMode
from hypothesis import HealthCheck, settings

from app.main import create_app
from app.settings import Settings

_DATA = tempfile.TemporaryDirectory(prefix="rmsnorm-schemathesis-")
# allowed_hosts: schemathesis' in-process client names the Host "testserver", which the service refuses by default
APP = create_app(
    Settings.from_env(
        data_dir=Path(_DATA.name),
        devices="cpu",
        results_dir="",
        start_workers=False,
        max_queue=0,
        allowed_hosts="testserver",
    )
)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)

MAX_EXAMPLES = 50
BOUNDED = settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@schema.exclude(method="POST", path="/benchmark").parametrize()
@BOUNDED
def test_no_server_error(case):
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:500])


def _refuse_everything(*args, **kwargs):
    """Stands in for the scheduler here: a generated body that passes validation is answered 429, never run."""
    from app.queues import QueueFull

    raise QueueFull("schemathesis run: nothing is measured here")


APP.state.service.scheduler.submit = _refuse_everything
negative = schemathesis.openapi.from_asgi("/openapi.json", APP)
negative.config.generation.update(modes=[GenerationMode.NEGATIVE])


@negative.include(method="POST", path="/benchmark").parametrize()
@BOUNDED
def test_invalid_benchmark_requests_are_client_errors(case):
    response = case.call()
    assert 400 <= response.status_code < 500, (case.body, case.query, response.status_code, response.text[:500])
