"""CLI: the correctness gate in the table and the file, --profile / --preset, and `compare`'s exit codes."""

import copy
import json

import pytest

from engine.models import RunFile
from rmsnorm_kernels.registry import REGISTRY
from rmsnorm_dash import cli
from test_cli_commands import HERE


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch):
    monkeypatch.setenv("RMSNORM_CEILING_BYTES", str(1 << 20))
    monkeypatch.syspath_prepend(str(HERE))
    yield
    for name in ("cli-test-torch", "cli-test-wrong"):
        REGISTRY.remove(name)


def test_wrong_plugin_is_timed_but_wrong_never_best(tmp_path, capsys):
    out = tmp_path / "run.json"
    code = cli.main(
        (
            "bench --impl cli-test-torch,cli-test-wrong --plugin cli_test_plugin:impl "
            "--plugin cli_test_plugin:wrong --pass fwd,bwd --dtype fp16 --m 64 "
            f"--n 128 --reps 3 --warmup 1 --device cpu --out {out} --quiet --baseline cli-test-torch"
        ).split()
    )
    assert code == 0
    text = capsys.readouterr().out
    run = RunFile.model_validate_json(out.read_text())
    wrong = [r for r in run.rows if r.impl == "cli-test-wrong"]
    assert len(wrong) == 2 and all(r.status == "wrong" and r.verified is False and r.GBps > 0 for r in wrong)
    assert all(r.status == "ok" and r.verified is True for r in run.rows if r.impl == "cli-test-torch")
    assert run.summary["wrong"] == 2
    assert {b["impl"] for b in run.summary["best"].values()} == {"cli-test-torch"}
    assert "wrong" in text and "1 ok" not in text and "2 wrong" in text and "1.00×" in text
    for line in text.splitlines():  # the ★ never sits on a wrong cell
        assert not ("★" in line and "wrong" in line.split("★")[1].split("│")[0])
    md = cli.main(["table", str(out), "--markdown"])
    assert md == 0
    table = capsys.readouterr().out
    assert "wrong (" in table and "**★" in table


def test_profile_and_preset_flags(tmp_path, capsys):
    out = tmp_path / "run.json"
    code = cli.main(
        (
            "bench --impl cli-test-torch --plugin cli_test_plugin:impl --pass fwd "
            "--dtype fp32 --preset models --m 8 --reps 2 --warmup 1 --device cpu "
            f"--out {out} --quiet --profile"
        ).split()
    )
    assert code == 0
    run = RunFile.model_validate_json(out.read_text())
    from engine.presets import get_preset

    assert run.run.sweep["preset"] == "models" and run.run.sweep["N"] == get_preset("models")["N"]
    assert run.run.sweep["M"] == [8]
    assert all(r.profile["source"] == "cpu" and r.profile["kernels"] for r in run.rows)


def _doc(run_id, gbps, timing="events"):
    """A small result file: two shapes × two implementations with the given GB/s."""
    rows = []
    for (m, n), by_impl in gbps.items():
        for impl, value in by_impl.items():
            rows.append(
                {
                    "run_id": run_id,
                    "impl": impl,
                    "pass": "bwd",
                    "dtype": "bfloat16",
                    "M": m,
                    "N": n,
                    "status": "ok" if value else "error",
                    "median_us": 1.0 if value else None,
                    "GBps": value,
                    "bytes": 1,
                    "mode": "cuda",
                    "device": {"name": "GPU"},
                    "started_at": 0.0,
                    "ended_at": 0.0,
                    "timing": timing,
                }
            )
    return {
        "run": {
            "run_id": run_id,
            "created_at": "2026-12-02T00:00:00Z",
            "ceiling_method": "m",
            "ceiling_GBps": 1.0,
            "versions": {},
            "sweep": {"timing": timing},
            "device": {"kind": "cuda", "name": "GPU", "sm_count": 1, "memory_bytes": 1, "l2_bytes": 1},
        },
        "rows": rows,
        "summary": {},
    }


BASE = {(4096, 4096): {"a": 1000.0, "b": 2000.0}, (4096, 8192): {"a": 1000.0, "b": 2000.0}}


def _write(tmp_path, name, doc):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_compare_better_is_exit_0(tmp_path, capsys):
    new = copy.deepcopy(BASE)
    new[(4096, 4096)]["a"] = 1100.0
    new[(2048, 1000)] = {"a": 5.0}
    code = cli.main(["compare", _write(tmp_path, "b", _doc("base", BASE)), _write(tmp_path, "n", _doc("new", new))])
    out = capsys.readouterr().out
    assert code == 0
    assert "1.100" in out and "only in new: bwd/bfloat16/2048x1000" in out and "all 4 at or above 0.97" in out


def test_compare_worse_is_exit_1_and_names_the_row(tmp_path, capsys):
    new = copy.deepcopy(BASE)
    new[(4096, 8192)]["b"] = 1900.0  # 0.95
    del new[(4096, 4096)]
    base, new_path = _write(tmp_path, "b", _doc("base", BASE)), _write(tmp_path, "n", _doc("new", new))
    assert cli.main(["compare", base, new_path]) == 1
    out = capsys.readouterr().out
    assert "0.950  BELOW" in out and "only in base: bwd/bfloat16/4096x4096" in out
    assert cli.main(["compare", base, new_path, "--fail-below", "0.9"]) == 0
    capsys.readouterr()
    assert cli.main(["compare", base, new_path, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["min_ratio"] == pytest.approx(0.95) and doc["only_in_base"] == ["bwd/bfloat16/4096x4096"]
    assert {r["impl"] for r in doc["rows"]} == {"a", "b"} and doc["base"] == {"run_id": "base", "timing": "events"}


def test_compare_mixed_timing_refused_unless_allowed(tmp_path, capsys):
    base = _write(tmp_path, "b", _doc("base", BASE))
    new = _write(tmp_path, "n", _doc("new", BASE, timing="cuda-graph"))
    with pytest.raises(SystemExit) as info:
        cli.main(["compare", base, new])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "timed differently" in err and "cuda-graph" in err and "--allow-mixed-timing" in err
    assert cli.main(["compare", base, new, "--allow-mixed-timing"]) == 0


def test_compare_leaves_out_rows_not_ok(tmp_path, capsys):
    new = copy.deepcopy(BASE)
    new[(4096, 4096)]["a"] = None  # an error row now: not a ratio, not a pass either
    assert (
        cli.main(["compare", _write(tmp_path, "b", _doc("base", BASE)), _write(tmp_path, "n", _doc("new", new))]) == 0
    )
    assert "3 at or above" in capsys.readouterr().out


def test_compare_with_nothing_in_common_fails(tmp_path, capsys):
    other = {(1024, 512): {"a": 10.0}}
    assert (
        cli.main(["compare", _write(tmp_path, "b", _doc("base", BASE)), _write(tmp_path, "n", _doc("new", other))]) == 1
    )
    assert "no shape and implementation measured ok in both runs" in capsys.readouterr().out
