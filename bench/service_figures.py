"""Issue 12's figures, measured on this machine (any machine: the service runs on the CPU, ``devices=cpu``).

Each part starts the app under uvicorn on loopback (``app.main.serve``, through app/live_server.py's `LiveServer`, the
service tests' launcher) with one CPU worker, in a fresh temporary data folder, with ``results/`` not imported, and
stops it afterwards:

a. a seeded schemathesis run of every operation (``--max-examples``, phases examples, coverage, fuzzing and
   stateful, every check), non-finite numbers injected into a third of the write bodies
   (bench/schemathesis_nonfinite.py) → 5xx answers and schema-conformance failures. The app runs with
   ``RMSNORM_MAX_QUEUE=0`` and its one CPU worker kept busy by a sweep of the test plug-in ``slow-eager`` (it
   sleeps), so a schema-valid generated ``POST /benchmark`` is answered 429 at once instead of queueing CPU work;
   its valid path (a 200 stream) is what part c measures.
b. ``/api/health`` latency (median, max) while 20 MB bodies are POSTed to /benchmark and to /api/runs/import,
   both announced (Content-Length) and streamed (chunked): every one must be refused 413 (bench/big_body_health.py).
c. 12 concurrent clients each POSTing a small CPU sweep (eager/torch-native, fwd, float32, tiny M/N): how many
   streamed, how many got 429, rows received vs expected, none lost or duplicated (streams and store agree).
d. tests/app/test_app_case_timeout.py run 10 times in a row beside one busy-loop process per core.

    python bench/service_figures.py [--parts abcd] [--max-examples 50] [--seed 20261203] [--out results/checks]

writes ``results/checks/service-figures-cpu-<date>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.live_server import LiveServer  # noqa: E402  (the launcher tests/app/service_harness.py uses too)
from big_body_health import part_b  # noqa: E402

PYTHON = sys.executable
BIN = Path(sys.executable).parent
CONFORMANCE_CHECKS = (
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)


# -- a: schemathesis ---------------------------------------------------------------------------------------------


def keep_device_busy(url: str, stop: threading.Event) -> threading.Thread:
    """A slow-eager sweep (sleeps, ~0 CPU) holding the one worker until ``stop``: every other valid sweep is 429."""
    body = {
        "implementations": ["slow-eager"],
        "passes": ["fwd"],
        "dtypes": ["float32"],
        "M": list(range(1, 65)),
        "N": [64],
        "repetitions": 10000,
        "warmup": 0,
        "verify": False,
    }

    def hold():
        try:
            with httpx.stream("POST", url + "/benchmark", json=body, timeout=None) as response:
                assert response.status_code == 200, response.read()
                for _ in response.iter_lines():
                    if stop.is_set():
                        return
        except httpx.HTTPError:
            if not stop.is_set():  # the server stopping under the held stream is the end of part a, not an error
                raise

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not httpx.get(url + "/api/health", timeout=5).json()["gpus"][0]["busy"]:
        assert time.monotonic() < deadline, "the blocking sweep did not start"
        time.sleep(0.2)
    return thread


def part_a(work: Path, max_examples: int, seed: int) -> dict:
    data = work / "a"
    data.mkdir()
    report = data / "report"
    nonfinite_log = data / "nonfinite.ndjson"
    with LiveServer(data, max_queue=0, plugins="tests.app.slow_plugin") as server:
        stop = threading.Event()
        _holder = keep_device_busy(server.url, stop)
        command = [
            str(BIN / "schemathesis"),
            "run",
            server.url + "/openapi.json",
            "--max-examples",
            str(max_examples),
            "--seed",
            str(seed),
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--checks",
            "all",
            "--workers",
            "1",
            "--request-timeout",
            "60",
            "--generation-database",
            "none",
            "--suppress-health-check",
            "all",
            "--no-color",
            "--report",
            "ndjson",
            "--report-ndjson-path",
            str(report / "events.ndjson"),
        ]
        started = time.monotonic()
        proc = subprocess.run(
            command,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=3600,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "SCHEMATHESIS_HOOKS": "bench.schemathesis_nonfinite",
                "RMSNORM_NONFINITE_LOG": str(nonfinite_log),
            },
        )
        elapsed = time.monotonic() - started
        stop.set()
        logged_500 = server.server_errors_logged()
    counts = count_events(report / "events.ndjson")
    injected = [json.loads(line) for line in nonfinite_log.read_text().splitlines()] if nonfinite_log.exists() else []
    tail = proc.stdout.strip().splitlines()
    return {
        "command": " ".join(command[1:]).replace(server.url, "http://127.0.0.1:PORT"),
        "exit_code": proc.returncode,
        "seconds": round(elapsed, 1),
        "max_examples": max_examples,
        "seed": seed,
        "app": "RMSNORM_MAX_QUEUE=0, the one CPU worker held by a slow-eager sweep: a valid generated sweep is 429",
        **counts,
        "server_errors_in_log": logged_500,
        "nonfinite_bodies_sent": len(injected),
        "nonfinite_answers": dict(sorted(_tally(str(i["status"]) for i in injected).items())),
        "nonfinite_422_naming_a_field": sum(1 for i in injected if i["status"] == 422 and i["fields"]),
        "summary_lines": [line for line in tail if line.strip()][-25:],
        "stderr_tail": proc.stderr[-1500:],
    }


def _tally(values) -> dict:
    out: dict = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return out


def count_events(path: Path) -> dict:
    """Requests, their statuses, and the failed checks (by name) in schemathesis' NDJSON event report."""
    statuses: dict[str, int] = {}
    failures: dict[str, int] = {}
    operations: set[str] = set()
    examples: list[str] = []
    seen = set()
    for line in path.read_text().splitlines() if path.exists() else []:
        event = json.loads(line)
        for scenario in _find(event, "status_code"):
            code = scenario.get("status_code")
            if isinstance(code, int) and "elapsed" in scenario:
                statuses[str(code)] = statuses.get(str(code), 0) + 1
        for check in _find(event, "status"):
            if "name" in check and check.get("status") in ("failure", "FAILURE", "failed"):
                key = (check["name"], json.dumps(check.get("failure_info") or check.get("context"), default=str)[:300])
                if key in seen:
                    continue
                seen.add(key)
                failures[check["name"]] = failures.get(check["name"], 0) + 1
                if len(examples) < 20:
                    examples.append(f"{check['name']}: {key[1]}")
        for item in _find(event, "label"):
            if isinstance(item.get("label"), str) and " /" in item["label"]:
                operations.add(item["label"])
    return {
        "responses_by_status": dict(sorted(statuses.items())),
        "responses_5xx": sum(n for code, n in statuses.items() if code.startswith("5")),
        "failed_checks": failures,
        "schema_conformance_failures": sum(failures.get(name, 0) for name in CONFORMANCE_CHECKS),
        "server_error_failures": failures.get("not_a_server_error", 0),
        "operations_seen": sorted(operations),
        "failure_examples": examples,
    }


def _find(value, key):
    if isinstance(value, dict):
        if key in value:
            yield value
        for item in value.values():
            yield from _find(item, key)
    elif isinstance(value, list):
        for item in value:
            yield from _find(item, key)


# -- c: 12 concurrent clients ---------------------------------------------------------------------------------------

SMALL_SWEEP = {
    "implementations": ["eager", "torch-native"],
    "passes": ["fwd"],
    "dtypes": ["float32"],
    "M": [8, 16, 32, 64],
    "N": [64, 128],
    "repetitions": 3,
    "warmup": 1,
}
CLIENTS = 12


def part_c(work: Path) -> dict:
    data = work / "c"
    data.mkdir()
    expected_keys = {
        (i, "fwd", "float32", m, n)
        for i in SMALL_SWEEP["implementations"]
        for m in SMALL_SWEEP["M"]
        for n in SMALL_SWEEP["N"]
    }
    barrier = threading.Barrier(CLIENTS)

    def client(_):
        barrier.wait()
        with httpx.stream("POST", url + "/benchmark", json=SMALL_SWEEP, timeout=600) as response:
            if response.status_code != 200:
                response.read()
                return {"status": response.status_code}
            lines = [json.loads(raw) for raw in response.iter_lines() if raw.strip()]
        rows = [line for line in lines if line["type"] == "row"]
        summary = [line for line in lines if line["type"] == "summary"]
        return {
            "status": 200,
            "run_id": response.headers.get("x-run-id"),
            "rows": rows,
            "complete": bool(summary and summary[0]["complete"]),
        }

    with LiveServer(data) as server:
        url = server.url
        with ThreadPoolExecutor(CLIENTS) as pool:
            results = list(pool.map(client, range(CLIENTS)))
        streamed = [r for r in results if r["status"] == 200]
        stored = {r["run_id"]: httpx.get(f"{url}/api/runs/{r['run_id']}", timeout=30).json() for r in streamed}
    problems = []
    for r in streamed:
        keys = [(row["impl"], row["pass"], row["dtype"], row["M"], row["N"]) for row in r["rows"]]
        if len(keys) != len(set(keys)):
            problems.append(f"{r['run_id']}: duplicated rows")
        if set(keys) != expected_keys:
            problems.append(f"{r['run_id']}: missing {sorted(expected_keys - set(keys))[:3]}")
        if not all(row["status"] == "ok" for row in r["rows"]):
            problems.append(
                f"{r['run_id']}: rows not ok: {[row.get('reason') for row in r['rows'] if row['status'] != 'ok'][:2]}"
            )
        store_keys = sorted((w["impl"], w["pass"], w["dtype"], w["M"], w["N"]) for w in stored[r["run_id"]]["rows"])
        if store_keys != sorted(keys):
            problems.append(f"{r['run_id']}: the store differs from the stream")
    received = sum(len(r["rows"]) for r in streamed)
    return {
        "clients": CLIENTS,
        "sweep": SMALL_SWEEP,
        "max_queue": 8,
        "answers": dict(sorted(_tally(str(r["status"]) for r in results).items())),
        "streamed": len(streamed),
        "got_429": sum(1 for r in results if r["status"] == 429),
        "rows_expected": len(streamed) * len(expected_keys),
        "rows_received": received,
        "complete_runs": sum(1 for r in streamed if r["complete"]),
        "distinct_run_ids": len({r["run_id"] for r in streamed}),
        "problems": problems,
        "none_lost_or_duplicated": not problems and received == len(streamed) * len(expected_keys),
    }


# -- d: the case-timeout test under a CPU load -----------------------------------------------------------------------


def part_d(work: Path, times: int = 10) -> dict:
    burners = [subprocess.Popen([PYTHON, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    outcomes = []
    try:
        for attempt in range(times):
            started = time.monotonic()
            proc = subprocess.run(
                [PYTHON, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/app/test_app_case_timeout.py"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=900,
            )
            outcomes.append(
                {
                    "passed": proc.returncode == 0,
                    "seconds": round(time.monotonic() - started, 1),
                    "tail": proc.stdout.strip().splitlines()[-1][:300] if proc.stdout.strip() else "",
                }
            )
            print(f"  case-timeout run {attempt + 1}: {outcomes[-1]}", flush=True)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    return {
        "runs": times,
        "passes": sum(o["passed"] for o in outcomes),
        "cpu_load": f"{len(burners)} busy-loop processes (one per core)",
        "outcomes": outcomes,
    }


# -- the report -------------------------------------------------------------------------------------------------------


def machine() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    def v(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return {
        "label": f"CPU machine, {os.cpu_count()} cores (shared), {platform.processor() or platform.machine()}",
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            name: v(name)
            for name in (
                "torch",
                "triton",
                "fastapi",
                "starlette",
                "pydantic",
                "pydantic-settings",
                "uvicorn",
                "httpx",
                "schemathesis",
                "hypothesis",
            )
        },
        "git_commit": commit.stdout.strip() or None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="abcd")
    parser.add_argument("--max-examples", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "checks")
    args = parser.parse_args()
    today = datetime.date.today().isoformat()
    path = args.out / f"service-figures-cpu-{today}.json"
    document = json.loads(path.read_text()) if path.exists() else {}  # parts measured earlier today are kept
    document.update(
        {"what": "issue 12 service figures (bench/service_figures.py)", "date": today, "machine": machine()}
    )
    parts = {
        "a": ("schemathesis", lambda w: part_a(w, args.max_examples, args.seed)),
        "b": ("health_while_big_bodies_refused", part_b),
        "c": ("concurrent_clients", part_c),
        "d": ("case_timeout_under_load", part_d),
    }
    with tempfile.TemporaryDirectory(prefix="service-figures-") as folder:
        for key in args.parts:
            name, run = parts[key]
            print(f"part {key}: {name}", flush=True)
            started = time.monotonic()
            document[name] = run(Path(folder))
            document[name]["part_seconds"] = round(time.monotonic() - started, 1)
            document[name]["git_commit"] = document["machine"]["git_commit"]  # parts kept from earlier keep theirs
            print(json.dumps(document[name], indent=1, default=str)[:3000], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, default=str) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
