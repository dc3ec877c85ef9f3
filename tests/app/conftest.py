"""Fixtures of the service tests (helpers live in service_harness.py)."""

from pathlib import Path

import pytest

import service_harness  # noqa: F401  (sets RMSNORM_CEILING_BYTES before any worker starts)


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory, request) -> Path:
    return tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
