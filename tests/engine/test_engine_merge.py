"""A sweep measured in two launches (engine.merge, `rmsnorm-dash merge`): real CPU runs, the first cut short."""

import json

import pytest

from engine.merge import merge_runs
from engine.models import RunFile, Sweep
from engine.runner import run_sweep
from rmsnorm_dash.cli import main
from tiny_impls import make_registry

SMALL_CEILING = 1 << 20


@pytest.fixture
def registry():
    return make_registry()


def launch(registry, **over):
    data = {
        "implementations": ["test-torch"],
        "passes": ["fwd", "bwd"],
        "dtypes": ["bf16"],
        "M": [32],
        "N": [64, 128],
        "repetitions": 3,
        "warmup": 1,
        "device": "cpu",
        **over,
    }
    return run_sweep(
        Sweep.model_validate(data, context={"registry": registry}), registry=registry, ceiling_bytes=SMALL_CEILING
    )


def cut_short(run, keep):
    rows = [r for r in run.rows if keep(r)]
    return run.model_copy(update={"rows": rows, "summary": {**run.summary, "complete": False, "rows": len(rows)}})


def test_a_cut_short_sweep_and_its_missing_shapes_make_one_complete_file(registry, tmp_path):
    whole = launch(registry)
    first = cut_short(whole, lambda r: not (r.pass_ == "bwd" and r.N == 128))
    second = launch(registry, passes=["bwd"], N=[128, 64])  # re-measures bwd 64 too: the later row wins
    # headers name the second only: launches within one second are ordered by their rows' start
    second = second.model_copy(update={"run": second.run.model_copy(update={"created_at": first.run.created_at})})
    merged = merge_runs([second, first])  # in any order: by time
    assert merged.run.run_id == first.run.run_id
    assert [m["run_id"] for m in merged.run.model_extra["merged_from"]] == [first.run.run_id, second.run.run_id]
    assert merged.summary["complete"] is True and merged.summary["rows"] == 4 == len(merged.rows)
    cases = [(r.pass_, r.N) for r in merged.rows]
    assert cases == [("bwd", 64), ("bwd", 128), ("fwd", 64), ("fwd", 128)]  # the engine's order
    by_case = {(r.pass_, r.N): r for r in merged.rows}
    later = {(r.pass_, r.N): r for r in second.rows}
    earlier = {(r.pass_, r.N): r for r in first.rows}
    assert by_case["bwd", 64].median_us == later["bwd", 64].median_us != earlier["bwd", 64].median_us
    assert by_case["fwd", 128].median_us == earlier["fwd", 128].median_us
    assert {r.run_id for r in merged.rows} == {first.run.run_id}
    assert merged.summary["best"]["bwd/bfloat16/32x128"]["GBps"] == later["bwd", 128].GBps

    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "merged.json"
    a.write_text(first.model_dump_json())
    b.write_text(second.model_dump_json())
    assert main(["merge", str(a), str(b), "--out", str(out)]) == 0
    assert RunFile.model_validate_json(out.read_text()).summary["complete"] is True


def test_still_missing_cases_leave_it_incomplete(registry):
    whole = launch(registry)
    first = cut_short(whole, lambda r: r.pass_ == "fwd")
    merged = merge_runs([first, launch(registry, passes=["bwd"], N=[64])])
    assert merged.summary["complete"] is False and len(merged.rows) == 3


def test_launches_that_measured_differently_are_refused(registry, tmp_path, capsys):
    first = launch(registry, passes=["fwd"])
    other_gpu = first.model_copy(
        update={"run": first.run.model_copy(update={"device": first.run.device.model_copy(update={"name": "Other"})})}
    )
    with pytest.raises(ValueError, match="differ in GPU"):
        merge_runs([first, other_gpu])
    with pytest.raises(ValueError, match="not a case of"):
        merge_runs([first, launch(registry, passes=["fwd"], N=[256])])
    with pytest.raises(ValueError, match="two result files"):
        merge_runs([first])
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"run": {"run_id": "x"}}))
    with pytest.raises(SystemExit) as exit_:
        main(["merge", str(a), str(a), "--out", str(tmp_path / "m.json")])
    assert exit_.value.code == 2 and "not a result file" in capsys.readouterr().err
    good = tmp_path / "good.json"
    good.write_text(first.model_dump_json())
    with pytest.raises(SystemExit) as exit_:
        main(["merge", str(good), str(good), "--out", str(tmp_path / "no-such-dir" / "m.json")])
    assert exit_.value.code == 2 and "cannot write" in capsys.readouterr().err
