import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmsnorm_dash import cli
from engine.models import RunFile
from rmsnorm_kernels.registry import REGISTRY

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PLUGIN = "cli_test_plugin:impl"


@pytest.fixture(autouse=True)
def small_ceiling(monkeypatch):
    monkeypatch.setenv("RMSNORM_CEILING_BYTES", str(1 << 20))
    monkeypatch.syspath_prepend(str(HERE))
    yield
    REGISTRY.remove("cli-test-torch")


def exit_code_and_stderr(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    return info.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["bench", "--impl", "no-such-kernel", "--device", "cpu"], ["implementations", "no-such-kernel", "eager"]),
        (["bench", "--dtype", "int4", "--device", "cpu"], ["dtypes", "int4", "bf16"]),
        (["bench", "--m", "1048576", "--n", "4096", "--device", "cpu"], ["N", "M·N", "2147483648"]),
        (["bench", "--m", "12,abc", "--device", "cpu"], ["--m", "integers"]),
        (["bench", "--reps", "0", "--device", "cpu"], ["repetitions"]),
        (["bench", "--pass", "sideways", "--device", "cpu"], ["passes"]),
        (["bench", "--device", "tpu"], ["--device"]),
        (["bench", "--plugin", "no_such_module_xyz:thing", "--device", "cpu"], ["no_such_module_xyz"]),
        (["plot"], ["file"]),
        ([], ["COMMAND"]),
        (["frobnicate"], ["frobnicate"]),
    ],
)
def test_bad_arguments_exit_2_with_a_readable_message(argv, words, capsys):
    code, err = exit_code_and_stderr(argv, capsys)
    assert code == 2
    assert "Traceback" not in err
    for word in words:
        assert word in err
    assert len(err) < 2500


def test_cuda_device_without_gpu_is_refused(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    code, err = exit_code_and_stderr(["bench", "--device", "cuda:0"], capsys)
    assert code == 2 and "no CUDA GPU" in err


def test_engine_on_cpu_writes_a_valid_result_file_and_plot(tmp_path, capsys):
    out, html = tmp_path / "run.json", tmp_path / "run.html"
    code = cli.main(
        (
            f"bench --impl eager,cli-test-torch --plugin {PLUGIN} --pass fwd,bwd "
            "--dtype bf16,fp32 --m 32 --n 64,128 --reps 3 --warmup 1 --device cpu "
            f"--out {out} --plot {html}"
        ).split()
    )
    assert code == 0
    captured = capsys.readouterr()
    run = RunFile.model_validate_json(out.read_text())
    assert len(run.rows) == 2 * 2 * 2 * 1 * 2
    assert all(r.status == "ok" and r.median_us > 0 and r.GBps > 0 for r in run.rows), [r.reason for r in run.rows]
    assert run.run.device.kind == "cpu" and run.run.ceiling_GBps > 0 and "1 MiB" in run.run.ceiling_method
    assert run.summary["complete"] is True and run.summary["ok"] == 16
    assert set(run.run.sweep["implementations"]) == {"eager", "cli-test-torch"}
    assert json.loads(out.read_text())["rows"][0]["pass"] in ("fwd", "bwd")
    assert "★" in captured.out and "eager" in captured.out and "cli-test-torch" in captured.out
    assert "Plotly.newPlot" in html.read_text()


def test_bench_writes_the_rows_so_far_while_it_runs(tmp_path, monkeypatch):
    """A sweep that is killed (a lent machine taken back) keeps what it measured: the result file is rewritten,
    marked incomplete, as rows arrive, and replaced whole each time (no half-written file, no temporary left)."""
    out = tmp_path / "run.json"
    writes = []
    real_write = cli.write_result_file

    def spy(path, run):
        real_write(path, run)
        on_disk = RunFile.model_validate_json(path.read_text())
        writes.append((len(on_disk.rows), on_disk.summary["complete"]))

    monkeypatch.setattr(cli, "CHECKPOINT_S", 0.0)
    monkeypatch.setattr(cli, "write_result_file", spy)
    assert (
        cli.main(
            (
                f"bench --impl eager,cli-test-torch --plugin {PLUGIN} --pass fwd "
                "--dtype fp32 --m 8 --n 32,64 --reps 2 --warmup 0 --device cpu "
                f"--out {out} --quiet"
            ).split()
        )
        == 0
    )
    assert writes[:-1] == [(k, k == 4) for k in range(1, 5)] and writes[-1] == (4, True)
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_bench_rounds_interleave_and_merge(tmp_path):
    """--rounds 3: each shape's implementations measured three times in turn; one row per case, its median round
    with every round's median; the header says how many rounds."""
    out = tmp_path / "run.json"
    assert (
        cli.main(
            (
                f"bench --impl eager,cli-test-torch --plugin {PLUGIN} --pass fwd "
                "--dtype fp32 --m 8 --n 32,64 --reps 2 --warmup 0 --device cpu "
                f"--out {out} --quiet --rounds 3"
            ).split()
        )
        == 0
    )
    run = RunFile.model_validate_json(out.read_text())
    assert run.run.sweep["rounds"] == 3 and run.summary["complete"] is True
    assert sorted((r.impl, r.N) for r in run.rows) == [
        ("cli-test-torch", 32),
        ("cli-test-torch", 64),
        ("eager", 32),
        ("eager", 64),
    ]
    for r in run.rows:
        medians = r.model_extra["round_medians_us"]
        assert r.model_extra["rounds"] == 3 and len(medians) == 3 and r.median_us == sorted(medians)[1]
    code = subprocess.run(
        [sys.executable, "-m", "rmsnorm_dash", "bench", "--rounds", "12", "--device", "cpu"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).returncode
    assert code == 2


def test_cpu_run_without_shapes_uses_small_defaults_and_says_so(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        cli.main(
            (
                f"bench --impl cli-test-torch --plugin {PLUGIN} --pass fwd --reps 2 "
                f"--warmup 0 --device cpu --out {out} --quiet"
            ).split()
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "small CPU defaults" in err
    run = RunFile.model_validate_json(out.read_text())
    assert run.run.sweep["M"] == cli.CPU_DEFAULT_M and run.run.sweep["N"] == cli.CPU_DEFAULT_N


def test_triton_on_cpu_needs_interpreter_flag(tmp_path):
    out = tmp_path / "r.json"
    args = (f"bench --impl triton --pass fwd --m 4 --n 64 --reps 2 --warmup 1 --device cpu --out {out} --quiet").split()
    assert cli.main(args) == 0
    row = RunFile.model_validate_json(out.read_text()).rows[0]
    if os.environ.get("TRITON_INTERPRET") != "1":
        assert row.status == "skipped"
        return
    assert row.status == "skipped" and "--interpreter" in row.reason
    assert cli.main(args + ["--interpreter"]) == 0
    row = RunFile.model_validate_json(out.read_text()).rows[0]
    assert row.status == "ok" and row.mode == "interpreter" and row.median_us > 0


def test_plot_command(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        cli.main(
            (
                f"bench --impl cli-test-torch --plugin {PLUGIN} --pass fwd --m 8 "
                f"--n 32 --reps 2 --device cpu --out {out} --quiet"
            ).split()
        )
        == 0
    )
    assert cli.main(["plot", str(out), "--out", str(tmp_path / "c.html")]) == 0
    assert "cli-test-torch" in (tmp_path / "c.html").read_text()
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": 3}')
    code, err = exit_code_and_stderr(["plot", str(bad)], capsys)
    assert code == 2 and "not a result file" in err


def test_list_shows_registry_with_availability(capsys):
    assert cli.main(["list", "--json", "--plugin", PLUGIN]) == 0
    entries = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert entries["cli-test-torch"]["available"] is True
    assert "eager" in entries and "triton-persistent" in entries
    assert all(e["available"] or e["reason"] for e in entries.values())
    assert cli.main(["list"]) == 0
    assert "eager" in capsys.readouterr().out


def test_check_delegates_to_kernels_check(monkeypatch):
    import engine.check

    seen = []
    monkeypatch.setattr(engine.check, "check_main", lambda argv: seen.append(argv) or 3)
    assert cli.main(["check", "--impl", "eager"]) == 3
    assert seen == [["--impl", "eager"]]


def test_serve_passes_its_options_through(monkeypatch, tmp_path):
    app_main = pytest.importorskip("app.main")
    seen = {}
    monkeypatch.setattr(app_main, "serve", lambda **kw: seen.update(kw))
    assert (
        cli.main(["serve", "--host", "0.0.0.0", "--port", "8123", "--data", str(tmp_path), "--devices", "cpu*2"]) == 0
    )
    assert seen == {"host": "0.0.0.0", "port": 8123, "data_dir": tmp_path, "devices": "cpu*2"}


def test_console_script_exits_2_on_bad_args():
    proc = subprocess.run(
        [sys.executable, "-m", "rmsnorm_dash", "bench", "--dtype", "int4", "--device", "cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "dtypes" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_module_imports_no_web_stack_or_torch():
    code = "import sys, rmsnorm_dash.cli; bad = [m for m in ('torch', 'triton', 'fastapi', 'uvicorn', 'starlette', 'jinja2') if m in sys.modules]; print(bad)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_default_result_path_is_device_slug_and_date(tmp_path):
    from engine.models import RunHeader

    header = RunHeader.model_validate(
        {
            "run_id": "r",
            "created_at": "2026-12-02T14:05:09Z",
            "ceiling_GBps": 1.0,
            "ceiling_method": "m",
            "versions": {},
            "sweep": {},
            "device": {
                "kind": "cuda",
                "index": 0,
                "name": "NVIDIA H200",
                "sm_count": 132,
                "memory_bytes": 1,
                "l2_bytes": 1,
            },
        }
    )
    first = cli.default_result_path(header, tmp_path)
    assert first == tmp_path / "nvidia-h200-2026-12-02.json"
    first.write_text("{}")
    assert cli.default_result_path(header, tmp_path) == tmp_path / "nvidia-h200-2026-12-02-140509.json"


def test_list_shows_the_cuda_plugin_unavailable_with_the_reason():
    """The CUDA example plug-in, by module path, in a fresh process (as a user runs it): listed with its family and,
    without a GPU, why it cannot run here."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "rmsnorm_dash", "list", "--json", "--plugin", "examples.cuda_rmsnorm"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    entries = {e["name"]: e for e in json.loads(out.stdout)}
    assert entries["cuda-naive"]["family"] == "naive-chain" and entries["cuda-persistent"]["family"] == "persistent"
    for name in ("cuda-naive", "cuda-persistent"):
        assert entries[name]["available"] is False and "needs an NVIDIA GPU" in entries[name]["reason"]
        assert entries[name]["source"] == "path:examples.cuda_rmsnorm"
