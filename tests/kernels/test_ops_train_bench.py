"""`rmsnorm-dash train-bench` on CPU (tiny Llama, Triton interpreter): every variant's losses agree with the
model's own RMSNorm, eager and compiled, and the JSON file says where and how it was measured."""

import json

import pytest

pytest.importorskip("transformers")


def test_train_bench_cpu_writes_agreeing_losses(tmp_path):
    from rmsnorm_dash.cli import main

    out = tmp_path / "train.json"
    rc = main(
        [
            "train-bench",
            "--device",
            "cpu",
            "--variants",
            "hf,triton-persistent,triton-atomic",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--out",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert rc == 0
    assert result["kind"] == "train-bench" and result["label"].startswith("CPU")
    assert result["config"]["hidden_size"] == 64 and result["versions"]["torch"] and result["created_at"]
    rows = {(r["variant"], r["mode"]): r for r in result["rows"]}
    assert set(rows) == {(v, m) for v in ("hf", "triton-persistent", "triton-atomic") for m in ("eager", "compile")}
    for (variant, mode), row in rows.items():
        assert row["status"] == "ok", row
        assert len(row["losses"]) == 3 and len(row["step_ms"]) == 2 and row["step_ms_median"] > 0
        assert row["losses_agree"] is True and row["max_rel_loss_diff_vs_hf"] <= 1e-4
        if variant != "hf":
            assert row["replaced"] == 5
