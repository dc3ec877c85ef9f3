"""A kernel that hangs never blocks a device: a case still unanswered after ``RMSNORM_CASE_TIMEOUT_S`` is an error
row naming the timeout, its worker is killed and restarted, and the next case (and the next request) run.

The copy ceiling is made slower than the case limit (tests/app/slow_ceiling_plugin.py): the worker measures it
while it gets ready and a restarted one reuses it, so no case pays it, however fast this machine copies memory."""

from __future__ import annotations

import pytest
from service_harness import TEST_PLUGINS, TINY_SWEEP, LiveServer, lines_of, post_stream

pytestmark = pytest.mark.server

TIMEOUT_S = 8


def test_hung_case_becomes_an_error_row_and_the_sweep_goes_on(tmp_path):
    server = LiveServer(
        tmp_path / "data",
        plugins=TEST_PLUGINS + ",tests.app.slow_ceiling_plugin",
        env={"RMSNORM_CASE_TIMEOUT_S": str(TIMEOUT_S)},
    ).start()
    try:
        # hang-eager never returns; eager's 3 repetitions of an 8x64 case take well under a second
        hung = {
            "implementations": ["hang-eager", "eager"],
            "passes": ["fwd"],
            "dtypes": ["float32"],
            "M": [8],
            "N": [64],
            "repetitions": 3,
            "warmup": 1,
        }
        stream = post_stream(server.url, hung)
        rows = lines_of(stream, "row")
        assert [r["impl"] for r in rows] == ["hang-eager", "eager"]
        slow, fast = rows
        assert slow["status"] == "error"
        assert f"did not answer within {TIMEOUT_S} s and was killed" in slow["reason"]
        assert "hang-eager fwd float32 M=8 N=64" in slow["reason"] and "restarted" in slow["reason"]
        assert fast["status"] == "ok" and fast["median_us"] > 0, fast[
            "reason"
        ]  # the restarted worker measured the next case
        summary = lines_of(stream, "summary")[0]
        assert (summary["ok"], summary["error"]) == (1, 1)
        assert server.health()["gpus"][0]["restarts"] == 1
        assert lines_of(stream, "header")[0]["ceiling_GBps"] > 0  # measured once, at start-up
        # the device takes the next request as usual
        again = post_stream(server.url, {**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"]})
        assert all(r["status"] == "ok" for r in lines_of(again, "row"))
    finally:
        server.stop()
