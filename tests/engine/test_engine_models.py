import json

import pytest
from pydantic import ValidationError

from engine.models import Case, ResultRow, RunFile, Sweep, format_validation_error
from tiny_impls import make_registry


def sweep(data):
    return Sweep.model_validate(data, context={"registry": make_registry()})


def error_of(data):
    with pytest.raises(ValidationError) as info:
        sweep(data)
    return info.value


def test_defaults_are_the_documented_sweep():
    s = sweep({})
    assert s.implementations is None
    assert s.passes == ["fwd", "bwd"] and s.dtypes == ["bfloat16"]
    assert s.M == [4096, 16384, 65536] and s.N == [512, 1024, 2048, 4096, 8192, 16384]
    assert (s.repetitions, s.warmup, s.device, s.timing, s.triton_interpreter) == (100, 10, "auto", "events", False)


@pytest.mark.parametrize(
    "alias, torch_name",
    [
        ("bf16", "bfloat16"),
        ("BF16", "bfloat16"),
        ("torch.bfloat16", "bfloat16"),
        ("fp16", "float16"),
        ("half", "float16"),
        ("float16", "float16"),
        ("fp32", "float32"),
        ("float", "float32"),
        ("float32", "float32"),
    ],
)
def test_dtype_aliases_normalise_to_torch_spelling(alias, torch_name):
    assert sweep({"dtypes": [alias]}).dtypes == [torch_name]


def test_sweep_round_trips_through_json():
    s = sweep(
        {
            "implementations": ["test-torch"],
            "dtypes": ["bf16", "fp32"],
            "M": [3, 5],
            "N": [7],
            "repetitions": 9,
            "warmup": 0,
            "device": "cuda:3",
            "timing": "cuda-graph",
            "triton_interpreter": True,
        }
    )
    again = Sweep.model_validate(json.loads(s.model_dump_json()), context={"registry": make_registry()})
    assert again == s
    assert again.device == "cuda:3" and again.dtypes == ["bfloat16", "float32"]


@pytest.mark.parametrize(
    "data, field, words",
    [
        ({"implementations": ["nope"]}, "implementations", ["nope", "test-torch", "test-fwd-only"]),
        ({"dtypes": ["int8"]}, "dtypes", ["int8", "bfloat16"]),
        ({"dtypes": ["bf16", "bfloat16"]}, "dtypes", ["repeated"]),
        ({"M": []}, "M", ["empty"]),
        ({"M": [0]}, "M", ["1.."]),
        ({"M": [1 << 21]}, "M", ["1.."]),
        ({"N": [65537]}, "N", ["65536"]),
        ({"M": list(range(1, 66))}, "M", ["64"]),
        ({"M": [1 << 20], "N": [4096]}, "N", ["M·N", "2147483648"]),
        ({"repetitions": 0}, "repetitions", []),
        ({"repetitions": 10001}, "repetitions", []),
        ({"passes": ["sideways"]}, "passes", []),
        ({"device": "gpu"}, "device", ["cuda:<index>"]),
        ({"timing": "stopwatch"}, "timing", []),
        ({"surprise": 1}, "surprise", []),
    ],
)
def test_validation_errors_name_the_field(data, field, words):
    err = error_of(data)
    assert err.errors()[0]["loc"][0] == field
    text = format_validation_error(err)
    assert text.startswith(field)
    for word in words:
        assert word in text


def test_largest_allowed_case_is_accepted():
    assert sweep({"M": [1 << 20], "N": [2048]}).M == [1 << 20]


def test_case_and_row_dump_pass_by_alias():
    case = Case(impl="a", pass_="bwd", dtype="bfloat16", M=2, N=3)
    assert case.model_dump()["pass"] == "bwd"
    assert Case.model_validate({"impl": "a", "pass": "fwd", "dtype": "float16", "M": 1, "N": 1}).pass_ == "fwd"
    assert '"pass":"bwd"' in case.model_dump_json()


def test_runfile_round_trip_keeps_extra_fields():
    header = {
        "run_id": "r1",
        "created_at": "2026-12-02T14:00:00Z",
        "device": {
            "kind": "cuda",
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-x",
            "sm_count": 132,
            "memory_bytes": 150000000000,
            "l2_bytes": 62914560,
            "capability": "9.0",
        },
        "ceiling_GBps": 4250.0,
        "ceiling_method": "device-to-device copy, 2 GiB, read+write bytes",
        "versions": {
            "torch": "2.11.0",
            "triton": "3.6.0",
            "python": "3.12.3",
            "rmsnorm_dashboard": "0.1.0",
            "liger_kernel": None,
            "quack_kernels": None,
        },
        "git_commit": "abc",
        "host": "h",
        "sweep": {"M": [1]},
        "future_field": [1, 2],
    }
    row = {
        "run_id": "r1",
        "impl": "triton-persistent",
        "pass": "bwd",
        "dtype": "bfloat16",
        "M": 16384,
        "N": 4096,
        "status": "ok",
        "reason": None,
        "median_us": 1.0,
        "min_us": 0.9,
        "max_us": 1.2,
        "q1_us": 0.95,
        "q3_us": 1.05,
        "repetitions": 100,
        "bytes": 10,
        "actual_bytes": 12,
        "GBps": 3.0,
        "pct_of_ceiling": 70.0,
        "mode": "cuda",
        "device": {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-x"},
        "launch": {"programs": 264, "rows_per_program": 62, "partial_rows": 264},
        "started_at": 1764680000.123,
        "ended_at": 1764680000.456,
        "rotating_sets": 4,
    }
    doc = {"run": header, "rows": [row], "summary": {"rows": 1}}
    parsed = RunFile.model_validate_json(json.dumps(doc))
    assert parsed.rows[0].pass_ == "bwd"
    # an older file's row (no correctness-gate, profile, allocation-count or peak fields) loads as "not verified"
    not_verified = {
        "verified": None,
        "max_rel_err": None,
        "tolerance": None,
        "profile": None,
        "device_mallocs": None,
        "peak_bytes": None,
        "set_medians_us": None,
    }
    assert {k: getattr(parsed.rows[0], k) for k in not_verified} == not_verified
    expected = {**doc, "rows": [{**row, **not_verified}]}
    assert json.loads(parsed.model_dump_json()) == expected
    assert parsed.model_dump() == expected


def test_row_rejects_unknown_status_and_mode():
    base = {
        "run_id": "r",
        "impl": "a",
        "pass": "fwd",
        "dtype": "bfloat16",
        "M": 1,
        "N": 1,
        "bytes": 1,
        "device": {"name": "cpu"},
        "started_at": 0.0,
        "ended_at": 0.0,
    }
    ResultRow.model_validate({**base, "status": "skipped", "mode": "cpu"})
    with pytest.raises(ValidationError):
        ResultRow.model_validate({**base, "status": "great", "mode": "cpu"})
    with pytest.raises(ValidationError):
        ResultRow.model_validate({**base, "status": "ok", "mode": "abacus"})


def test_git_commit_prefers_the_environment(monkeypatch):
    """A copied tree's .git can name another commit than its files; an explicit GIT_COMMIT wins."""
    from engine import device

    monkeypatch.setenv("GIT_COMMIT", "f" * 40)
    assert device.git_commit() == "f" * 40
    assert device.git_dirty() is None  # the tree's own .git is another commit's: no verdict on the files
    monkeypatch.delenv("GIT_COMMIT")
    import shutil
    import subprocess

    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]  # tests/engine/ → the checkout under test
    assert device.PACKAGE_ROOT == repo
    if shutil.which("git") is None:
        pytest.skip("no git here to compare with")
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip("the tests run from a copy that is not a git checkout")
    assert device.git_commit() == proc.stdout.strip()  # a real commit, not None
