"""Interleaved rounds (engine.rounds): each shape's implementations repeated in turn, one row per case from its rounds."""

import pytest

from engine.models import Case, ResultRow
from engine.rounds import interleave, merge_rounds


def case(impl, n, pass_="fwd"):
    return Case(impl=impl, pass_=pass_, dtype="bfloat16", M=64, N=n)


def row(impl="a", median=10.0, status="ok", started=1.0, **extra):
    base = {
        "run_id": "r",
        "impl": impl,
        "pass": "fwd",
        "dtype": "bfloat16",
        "M": 64,
        "N": 128,
        "status": status,
        "bytes": 100,
        "mode": "cuda",
        "device": {"index": 0, "name": "GPU"},
        "started_at": started,
        "ended_at": started + 1,
    }
    if status in ("ok", "wrong"):
        base.update(
            median_us=median,
            min_us=median * 0.9,
            max_us=median * 1.2,
            q1_us=median * 0.95,
            q3_us=median * 1.05,
            GBps=100 / median,
            repetitions=5,
        )
    return ResultRow.model_validate({**base, **extra})


def test_interleave_repeats_each_shapes_group_before_the_next_shape():
    cases = [case("a", 128), case("b", 128), case("a", 256), case("b", 256), case("a", 256, "bwd")]
    got = [(c.impl, c.N, c.pass_) for c in interleave(cases, 3)]
    assert (
        got
        == [("a", 128, "fwd"), ("b", 128, "fwd")] * 3
        + [("a", 256, "fwd"), ("b", 256, "fwd")] * 3
        + [("a", 256, "bwd")] * 3
    )
    assert interleave(cases, 1) == cases
    with pytest.raises(ValueError, match="rounds"):
        interleave(cases, 0)


def test_merge_keeps_the_median_round_whole_and_lists_every_rounds_median():
    rounds = [row(median=12.0, started=1.0), row(median=10.0, started=5.0, host_us=3.0), row(median=30.0, started=9.0)]
    merged = merge_rounds(rounds)
    assert merged.median_us == 12.0 and merged.q1_us == 12.0 * 0.95 and merged.GBps == 100 / 12.0  # one round's row
    assert merged.model_extra["round_medians_us"] == [12.0, 10.0, 30.0] and merged.model_extra["rounds"] == 3
    assert merged.started_at == 1.0 and merged.ended_at == 10.0
    assert merged.host_us == 3.0 and merged.model_extra["round_host_us"] == [3.0]  # only the round that had one
    even = merge_rounds([row(median=4.0), row(median=2.0)])
    assert even.median_us == 2.0  # the lower middle one: a faster round never hides behind the mean of two


def test_a_wrong_round_makes_the_case_wrong_and_untimed_rounds_are_left_out():
    merged = merge_rounds(
        [
            row(median=10.0),
            row(median=11.0, status="wrong", reason="off the reference"),
            row(status="error", reason="boom"),
        ]
    )
    assert merged.status == "wrong" and merged.reason == "off the reference" and merged.verified is False
    assert merged.model_extra["round_medians_us"] == [10.0, 11.0] and merged.model_extra["rounds"] == 3
    skipped = merge_rounds([row(status="skipped", reason="no GPU"), row(status="skipped", reason="no GPU")])
    assert skipped.status == "skipped" and skipped.median_us is None
    with pytest.raises(ValueError, match="different cases"):
        merge_rounds([row(impl="a"), row(impl="b")])


def test_host_time_is_the_median_of_the_rounds_host_times_not_the_gpu_median_rounds():
    rounds = [row(median=10.0, host_us=150.0), row(median=11.0, host_us=90.0), row(median=12.0, host_us=100.0)]
    merged = merge_rounds(rounds)
    assert merged.median_us == 11.0  # the GPU's median round (whose own host time was 90)
    assert merged.host_us == 100.0 and merged.model_extra["round_host_us"] == [150.0, 90.0, 100.0]
    assert (
        "host_us" not in merge_rounds([row(median=10.0), row(median=11.0)]).model_extra
    )  # none had one: none invented
