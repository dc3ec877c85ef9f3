"""bench/dropin_check.py's host table (issue 16): every implementation's forward and backward timed in interleaved
rounds and paired with F.rms_norm's call of the same round; on CPU (the Triton interpreter) the real thing, small."""

import random

import pytest

from tests.bench.scripts import load_script


@pytest.fixture(scope="module")
def dropin():
    return load_script("dropin_check")


def test_host_table_pairs_every_implementation_with_torch_native_and_checks_values(dropin, monkeypatch):
    calls = []
    real = dropin._host_us

    def counting(call):
        calls.append(call)
        return real(call)

    monkeypatch.setattr(dropin, "_host_us", counting)
    rows = dropin.host_overhead(rounds=3, rng=random.Random(1), device="cpu", shapes=((6, 40),))
    assert [r["impl"] for r in rows] == ["torch-native", *dropin.IMPLS]
    assert len(calls) == 2 * 3 * len(rows)  # fwd and bwd, every round, every implementation
    for r in rows:
        assert r["rounds"] == 3 and r["fwd_host_us"] > 0 and r["bwd_host_us"] > 0
        assert r["correct"] and r["max_rel_err"] < 2e-2
        if r["impl"] == "torch-native":
            assert "host_le_native" not in r
        else:
            assert r["fwd_paired_ratio"] > 0 and r["bwd_paired_ratio"] > 0
            assert r["host_le_native"] == (r["fwd_paired_ratio"] <= 1 and r["bwd_paired_ratio"] <= 1)
