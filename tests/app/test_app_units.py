"""Unit tests of app.ndjson (lines, finite numbers, the streaming response and its disconnect) and app.auth (token
sources, the write rule's answers, the write-access dependency)."""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.requests import Request

from app.auth import presented_token
from app.ndjson import finite, ndjson_line
from app.settings import Settings, write_refusal


def test_ndjson_line_is_one_json_object_with_non_finite_as_null():
    line = ndjson_line(
        {"type": "row", "GBps": float("nan"), "rows": [1.5, float("inf")], "nested": {"x": -float("inf")}}
    )
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"type": "row", "GBps": None, "rows": [1.5, None], "nested": {"x": None}}
    assert finite((1.0, float("nan"))) == [1.0, None] and finite("NaN") == "NaN"


def _request(headers: dict) -> Request:
    return Request(
        {
            "type": "http",
            "method": "POST",
            "path": "/",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        }
    )


@pytest.mark.parametrize(
    "headers, token",
    [
        ({"Authorization": "Bearer abc"}, "abc"),
        ({"authorization": "bearer  abc "}, "abc"),
        ({"X-API-Token": "xyz"}, "xyz"),
        ({"Authorization": "Basic abc"}, None),
        ({}, None),
        ({"Authorization": "Bearer "}, None),
    ],
)
def test_presented_token(headers, token):
    assert presented_token(_request(headers)) == token


def test_write_rule(tmp_path):
    open_ = Settings.from_env(data_dir=tmp_path, results_dir="")
    assert write_refusal(open_, None, exposed=False, host_header="127.0.0.1:8000") is None
    assert write_refusal(open_, None, exposed=False, host_header="evil.example")[0] == 403
    assert write_refusal(open_, None, exposed=True)[0] == 403
    guarded = Settings.from_env(data_dir=tmp_path, results_dir="", api_token="t0k")
    assert write_refusal(guarded, None, exposed=True)[0] == 401
    assert write_refusal(guarded, "t0k", exposed=True, host_header="bench.example") is None  # the token suffices
    assert write_refusal(guarded, "nope", exposed=True)[0] == 403
    lax = Settings.from_env(data_dir=tmp_path, results_dir="", allow_no_token=True)
    assert write_refusal(lax, None, exposed=True, host_header="127.0.0.1") is None


def _write_request(headers: dict, server=("127.0.0.1", 8000)) -> Request:
    headers = {"content-type": "application/json", **headers}  # a JSON write, as the page and curl send it
    return Request(
        {
            "type": "http",
            "method": "POST",
            "path": "/benchmark",
            "server": server,
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        }
    )


def test_require_write_access_answers_with_the_rule(tmp_path):
    from fastapi import HTTPException

    from app.auth import request_exposed
    from app.auth import require_write_access as check_write

    def require_write_access(*args, **kwargs):  # a coroutine: FastAPI awaits it
        return asyncio.run(check_write(*args, **kwargs))

    guarded = Settings.from_env(data_dir=tmp_path, results_dir="", api_token="s3cret")
    with pytest.raises(HTTPException) as missing:
        require_write_access(_write_request({"host": "127.0.0.1"}), guarded, exposed=True)
    assert missing.value.status_code == 401 and missing.value.headers == {"WWW-Authenticate": "Bearer"}
    with pytest.raises(HTTPException) as wrong:
        require_write_access(_write_request({"authorization": "Bearer nope"}), guarded, exposed=True)
    assert wrong.value.status_code == 403 and wrong.value.headers is None
    assert require_write_access(_write_request({"x-api-token": "s3cret"}), guarded, exposed=True) is None
    local = Settings.from_env(data_dir=tmp_path, results_dir="")
    assert require_write_access(_write_request({"host": "localhost:8000"}), local, exposed=False) is None
    with pytest.raises(HTTPException) as rebound:
        require_write_access(_write_request({"host": "attacker.example"}), local, exposed=False)
    assert rebound.value.status_code == 403 and "attacker.example" in rebound.value.detail
    # the settings declare it exposed (RMSNORM_EXPOSED), or the request came in on a non-loopback address
    declared = Settings.from_env(data_dir=tmp_path, results_dir="", exposed=True)
    assert asyncio.run(request_exposed(_write_request({}), declared)) is True  # a coroutine: FastAPI awaits it
    assert asyncio.run(request_exposed(_write_request({}, server=("10.1.2.3", 8000)), local)) is True


def _serve(response, disconnect_after_lines: int | None):
    """Run an ASGI response against a fake client; returns (messages sent, whether the body's finally ran)."""
    import anyio

    sent: list[dict] = []

    async def main():
        lines_seen = anyio.Event()

        async def send(message):
            sent.append(message)
            body_lines = sum(m.get("body", b"").count(b"\n") for m in sent if m["type"] == "http.response.body")
            if disconnect_after_lines is not None and body_lines >= disconnect_after_lines:
                lines_seen.set()

        async def receive():
            if disconnect_after_lines is None:
                await anyio.sleep_forever()
            await lines_seen.wait()
            return {"type": "http.disconnect"}

        with anyio.fail_after(10):
            await response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)

    anyio.run(main)
    return sent


def test_ndjson_response_streams_lines_and_stops_when_the_client_goes():
    from app.ndjson import MEDIA_TYPE, NdjsonResponse

    state = {"finally": False}

    async def endless():
        try:
            n = 0
            while True:
                yield ndjson_line({"type": "row", "n": n})
                n += 1
                import anyio

                await anyio.sleep(0.01)
        finally:
            state["finally"] = True

    sent = _serve(NdjsonResponse(endless(), headers={"X-Run-Id": "r-1"}), disconnect_after_lines=3)
    start = sent[0]
    headers = dict((k.decode(), v.decode()) for k, v in start["headers"])
    assert start["status"] == 200 and headers["content-type"].startswith(MEDIA_TYPE)
    assert headers["x-run-id"] == "r-1" and headers["cache-control"] == "no-cache"
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert [json.loads(line)["n"] for line in body.splitlines()][:3] == [0, 1, 2]
    assert state["finally"] is True  # the body iterator was cancelled (the route's finally cancels the job)

    async def three():
        for n in range(3):
            yield ndjson_line({"n": n, "x": float("nan")})

    finished = _serve(NdjsonResponse(three()), disconnect_after_lines=None)
    lines = b"".join(m.get("body", b"") for m in finished[1:]).splitlines()
    assert [json.loads(line) for line in lines] == [{"n": n, "x": None} for n in range(3)]
    assert finished[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
