"""bench/host_paired.py (issue 16): ours against F.rms_norm's host time, paired call by call so that the host's drift
cancels. On CPU (the Triton interpreter): a real run of every implementation, and the pairing itself with a host
whose speed drifts round by round."""

import json

import pytest

from tests.bench.scripts import load_script


@pytest.fixture(scope="module")
def host_paired():
    return load_script("host_paired")


def test_a_real_run_times_every_implementation_and_writes_its_file(host_paired, tmp_path, capsys):
    assert (
        host_paired.main(["--device", "cpu", "--m", "5", "--n", "24,40", "--rounds", "3", "--out", str(tmp_path)]) == 0
    )
    doc = json.loads((tmp_path / "host-paired.json").read_text())
    assert doc["kind"] == "host-paired" and doc["rounds"] == 3 and doc["baseline"] == "torch-native"
    got = {(r["pass"], r["N"], r["impl"]) for r in doc["rows"]}
    assert got == {("fwd", n, i) for n in (24, 40) for i in ("torch-native", "triton")} | {
        ("bwd", n, i)
        for n in (24, 40)
        for i in ("torch-native", "triton-persistent", "triton-workspace", "triton-atomic")
    }
    for r in doc["rows"]:
        assert 0 < r["host_us_q1"] <= r["host_us"] <= r["host_us_q3"]
        assert ("paired_ratio" in r) == (r["impl"] != "torch-native")
        if "paired_ratio" in r:
            assert r["paired_ratio"] > 0 and 0 <= r["rounds_at_or_below"] <= 3
    assert len(doc["summary"]) == 4 and "≤ torch-native at" in capsys.readouterr().out


@pytest.mark.parametrize("factor, verdict", [(0.9, "at 1 of 1"), (1.1, "at 0 of 1")])
def test_calls_are_interleaved_round_by_round_so_a_drifting_host_cancels(
    host_paired, monkeypatch, tmp_path, factor, verdict
):
    """The host slows down with every call (×1 at the first timed call, ×2.2 at the last): each of our calls costs
    ``factor`` × what torch-native's would cost at that moment. Timed in blocks, one implementation after another,
    the later ones would look up to 2× slower; interleaved (every implementation once per round, in a shuffled
    order) each paired ratio is ``factor`` within three calls' drift."""
    from rmsnorm_kernels.registry import REGISTRY

    names = {
        id(REGISTRY.get(i).fn): i for i in ("torch-native", "triton-persistent", "triton-workspace", "triton-atomic")
    }
    calls = []

    def drifting(wl, i):
        impl = names[id(wl.fn)]
        calls.append((i, impl))
        base = 100e-6 * (1 + 0.01 * len(calls))
        return base if impl == "torch-native" else base * factor

    monkeypatch.setattr(host_paired, "timed_call", drifting)
    host_paired.main(
        [
            "--device",
            "cpu",
            "--m",
            "4",
            "--n",
            "16",
            "--pass",
            "bwd",
            "--rounds",
            "31",
            "--seed",
            "3",
            "--out",
            str(tmp_path),
        ]
    )
    rounds = [calls[k : k + 4] for k in range(0, len(calls), 4)]
    assert len(rounds) == 31 and all(sorted(i for _, i in r) == sorted(names.values()) for r in rounds)
    assert len({tuple(i for _, i in r) for r in rounds}) > 1  # a fresh order each round
    assert all(len({i for i, _ in r}) == 1 for r in rounds)  # one repetition index per round
    doc = json.loads((tmp_path / "host-paired.json").read_text())
    for r in doc["rows"]:
        if r["impl"] != "torch-native":
            assert r["paired_ratio"] == pytest.approx(factor, rel=0.035)
            assert r["rounds_at_or_below"] == (31 if factor < 1 else 0)
    assert all(verdict in line for line in doc["summary"])


def test_each_round_opens_with_its_hook_then_calls_every_name_once(host_paired):
    import random

    log = []
    samples = host_paired.interleaved(
        ("a", "b", "c"),
        4,
        random.Random(5),
        lambda name, r: log.append((r, name)) or float(len(log)),
        lambda r, order: log.append((r, "start", tuple(order))),
    )
    for r in range(4):
        start, *calls = log[4 * r : 4 * r + 4]
        assert start[:2] == (r, "start") and [c for c in calls] == [(r, name) for name in start[2]]
    assert {k: len(v) for k, v in samples.items()} == {"a": 4, "b": 4, "c": 4}


@pytest.mark.parametrize(
    "flag, value, says", [("--m", "abc", "comma-separated whole numbers"), ("--n", "512,0", "at least 1")]
)
def test_bad_sizes_are_refused_with_the_flag_named(host_paired, capsys, flag, value, says):
    with pytest.raises(SystemExit) as exit_:
        host_paired.main(["--device", "cpu", flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and says in err
