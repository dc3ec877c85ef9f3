"""The README tells the truth: its curl examples work as written against a running server, its plugin example is
the file in examples/, and its results tables are generated from the committed GPU result file."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.app.service_harness import LiveServer

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_plugin_example_is_the_example_file():
    block = next(b for b in _code_blocks("python") if "@register(" in b)
    source = (ROOT / "examples" / "dock_plugin.py").read_text(encoding="utf-8")
    code = source.split('"""', 2)[2].lstrip("\n")  # the file without its module docstring
    assert block.strip() == code.strip()


def test_results_section_is_generated_from_the_committed_file():
    from engine.models import RunFile
    from engine.report import markdown_tables

    section = README.split("<!-- results:start -->\n", 1)[1].split("<!-- results:end -->", 1)[0]
    files = sorted((ROOT / "results").glob("*.json"))
    if not files:
        assert "no GPU result committed yet" in section
        return
    runs = [RunFile.model_validate_json(f.read_text(encoding="utf-8")) for f in files]
    assert all(r.run.device.kind == "cuda" for r in runs), "results/ must hold real GPU runs only"
    runs.sort(key=lambda r: r.run.created_at)
    expected = "\n".join(markdown_tables(r) for r in runs)
    assert section.strip() == expected.strip(), "regenerate with: make readme-results"


@pytest.mark.server
def test_curl_examples_work_as_written(tmp_path):
    """Every `curl` line of the API section, run by bash against a live server (port swapped for a free one)."""
    api = README.split("## The API (`curl`)", 1)[1].split("\n## ", 1)[0]
    lines = [
        line.split("  #")[0].strip()
        for block in re.findall(r"```bash\n(.*?)```", api, flags=re.S)
        for line in block.splitlines()
        if line.startswith("curl ")
    ]
    assert any("POST localhost:8000/benchmark" in line for line in lines)
    server = LiveServer(tmp_path / "data").start()
    try:
        run_id = None
        for line in lines:
            cmd = line.replace("localhost:8000", f"127.0.0.1:{server.port}")
            if "RUN_ID" in cmd:
                if "DELETE" in cmd:
                    continue  # run last, below
                cmd = cmd.replace("RUN_ID", run_id)
            if "@results/FILE.json" in cmd:
                exported = tmp_path / "export.json"
                subprocess.run(["curl", "-sf", "-o", str(exported), f"{server.url}/api/runs/{run_id}"], check=True)
                doc = json.loads(exported.read_text())
                doc["run"]["run_id"] = doc["run"]["run_id"] + "-copy"
                for row in doc["rows"]:
                    row["run_id"] = doc["run"]["run_id"]
                exported.write_text(json.dumps(doc))
                cmd = cmd.replace("@results/FILE.json", f"@{exported}")
            out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, (line, out.stderr)
            text = out.stdout.strip()
            assert text, line
            if "/benchmark" in cmd:
                events = [json.loads(x) for x in text.splitlines()]
                assert events[0]["type"] == "queued" and events[-1]["type"] == "summary"
                rows = [e for e in events if e["type"] == "row"]
                assert len(rows) == 2 * 2 * 2 * 2 and all(r["status"] == "ok" for r in rows)
                run_id = events[-1]["run_id"]
            elif cmd.endswith(".csv"):
                assert (
                    text.splitlines()[0].lstrip('"').startswith(("run_id", "impl")) and len(text.splitlines()) == 17
                )  # cells quoted (issue 34)
            else:
                json.loads(text)
        delete = next(line for line in lines if "DELETE" in line)
        out = subprocess.run(
            ["bash", "-c", delete.replace("localhost:8000", f"127.0.0.1:{server.port}").replace("RUN_ID", run_id)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and json.loads(out.stdout)
        listed = subprocess.run(["curl", "-s", f"{server.url}/api/runs"], capture_output=True, text=True).stdout
        assert run_id not in [r["run_id"] for r in json.loads(listed)]
    finally:
        server.stop()
