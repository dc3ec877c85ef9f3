"""bench/cuda_plugins_table.py: the short table of the CUDA plug-ins' run, from result files: GB/s per shape, the
ratio triton-persistent / cuda-persistent, where the Triton kernel loses and by how much, wrong and error rows named."""

import json
import random

from scripts import load_script

table = load_script("cuda_plugins_table")


def row(impl, dtype, M, N, gbps=None, status="ok", reason=None):
    return {
        "impl": impl,
        "pass": "bwd",
        "dtype": dtype,
        "M": M,
        "N": N,
        "status": status,
        "reason": reason,
        "GBps": gbps,
        "median_us": 10.0,
    }


def test_ratios_losses_and_failures(tmp_path, capsys):
    cp = [random.uniform(1000, 3000) for _ in range(3)]
    rows = [row("cuda-persistent", "bfloat16", 4096, n, g) for n, g in zip((2048, 4096, 8192), cp)]
    rows += [
        row("triton-persistent", "bfloat16", 4096, 2048, cp[0] * 0.8),  # loses by 20 %
        row("triton-persistent", "bfloat16", 4096, 4096, cp[1] * 1.25),
        row("triton-persistent", "bfloat16", 4096, 8192, status="wrong", reason="dx off"),
        row("cuda-naive", "bfloat16", 4096, 2048, status="error", reason="boom"),
        row("quack", "bfloat16", 4096, 2048, status="skipped", reason="not installed"),
        {**row("eager", "bfloat16", 4096, 2048, 5.0), "pass": "fwd"},
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": rows}))
    assert table.main([str(path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "| bfloat16 | 4096×2048 |" in x)
    assert f"| err | {cp[0]:.0f} | {cp[0] * 0.8:.0f} | – | skip | – | **0.80** |" in line
    assert "| 1.25 |" in next(x for x in out.splitlines() if "4096×4096" in x)
    assert "over 2 shapes" in out and "loses at 1: bfloat16 4096×2048 (20 % slower)" in out
    assert "- wrong: triton-persistent bfloat16 4096×8192: dx off" in out and "- error: cuda-naive" in out
    assert "eager" not in out  # forward rows are not in the backward table
