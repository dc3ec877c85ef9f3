"""Schemathesis hooks (``SCHEMATHESIS_HOOKS=bench.schemathesis_nonfinite``, used by bench/service_figures.py):
non-finite numbers in generated JSON bodies, which schemathesis itself never generates.

About one body in three of every write operation (chosen by a CRC of the generated body, so a seeded run picks
the same ones) has its first number replaced by ``NaN``, ``Infinity`` or ``-Infinity``, sent as raw JSON text.
The body is then bytes, so schemathesis revalidates it as not schema-valid (negative): its checks expect a 4xx,
and ``not_a_server_error`` still holds for it. Each such request and its answer are appended, one JSON line each,
to the file named by ``RMSNORM_NONFINITE_LOG``."""

from __future__ import annotations

import json
import os
import zlib

import schemathesis

LITERALS = (float("nan"), float("inf"), float("-inf"))


def _poison(value, literal, path=()):
    """(copy of value with its first number replaced by literal, path to it) or (value, None)."""
    if isinstance(value, bool):
        return value, None
    if isinstance(value, (int, float)):
        return literal, path
    if isinstance(value, dict):
        for key, item in value.items():
            new, where = _poison(item, literal, path + (key,))
            if where is not None:
                return {**value, key: new}, where
    if isinstance(value, list):
        for index, item in enumerate(value):
            new, where = _poison(item, literal, path + (index,))
            if where is not None:
                return value[:index] + [new] + value[index + 1 :], where
    return value, None


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.method.upper() not in ("POST", "PUT", "PATCH") or not isinstance(case.body, (dict, list)):
        return
    crc = zlib.crc32(json.dumps(case.body, sort_keys=True, default=str).encode())
    if crc % 3:
        return
    body, where = _poison(case.body, LITERALS[crc // 3 % 3])
    if where is None and isinstance(case.body, dict) and case.path == "/benchmark":
        body, where = {**case.body, "repetitions": LITERALS[crc // 3 % 3]}, ("repetitions",)
    if where is None:
        return
    case.body = json.dumps(body).encode()  # Python's json writes NaN / Infinity literals
    case.headers = {**(case.headers or {}), "Content-Type": "application/json"}


@schemathesis.hook
def after_call(context, case, response):
    body = case.body
    if not isinstance(body, bytes) or not any(word in body for word in (b"NaN", b"Infinity")):
        return
    path = os.environ.get("RMSNORM_NONFINITE_LOG")
    if not path:
        return
    try:
        detail = response.json().get("detail")
    except Exception:
        detail = None
    named = []
    if isinstance(detail, list):
        named = [".".join(map(str, e.get("loc", [])[1:])) for e in detail if isinstance(e, dict)]
    with open(path, "a") as out:
        out.write(
            json.dumps(
                {
                    "method": case.method,
                    "path": case.path,
                    "status": response.status_code,
                    "fields": named[:3],
                    "body": body[:200].decode("utf-8", "replace"),
                }
            )
            + "\n"
        )
