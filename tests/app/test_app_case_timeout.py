"""A kernel that hangs never blocks a device: a case still unanswered after ``RMSNORM_CASE_TIMEOUT_S`` is an error
row naming the timeout, its worker is killed and restarted, and the next case (and the next request) run."""

from __future__ import annotations

import pytest
from service_harness import TEST_PLUGINS, TINY_SWEEP, LiveServer, lines_of, post_stream

pytestmark = pytest.mark.server

TIMEOUT_S = 4


def test_hung_case_becomes_an_error_row_and_the_sweep_goes_on(tmp_path):
    server = LiveServer(tmp_path / "data", plugins=TEST_PLUGINS,
                        env={"RMSNORM_CASE_TIMEOUT_S": str(TIMEOUT_S)}).start()
    try:
        # slow-eager sleeps 0.05 s per call: 200 timed + 1 warm-up calls last ≥ 10 s, past the 4 s limit
        hung = {"implementations": ["slow-eager", "eager"], "passes": ["fwd"], "dtypes": ["float32"], "M": [8],
                "N": [64], "repetitions": 200, "warmup": 1}
        stream = post_stream(server.url, hung)
        rows = lines_of(stream, "row")
        assert [r["impl"] for r in rows] == ["slow-eager", "eager"]
        slow, fast = rows
        assert slow["status"] == "error"
        assert f"did not answer within {TIMEOUT_S} s and was killed" in slow["reason"]
        assert "slow-eager fwd float32 M=8 N=64" in slow["reason"] and "restarted" in slow["reason"]
        assert fast["status"] == "ok" and fast["median_us"] > 0  # the restarted worker measured the next case
        summary = lines_of(stream, "summary")[0]
        assert (summary["ok"], summary["error"]) == (1, 1)
        assert server.health()["gpus"][0]["restarts"] == 1
        # the device takes the next request as usual
        again = post_stream(server.url, {**TINY_SWEEP, "implementations": ["eager"], "passes": ["fwd"]})
        assert all(r["status"] == "ok" for r in lines_of(again, "row"))
    finally:
        server.stop()
