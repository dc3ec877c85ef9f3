"""The SQLite store on its own: live writes, reading back as a result file, CSV, import, delete, interrupted runs."""

import csv
import io
import json
import random

from app.store import Store

HEADER = {"run_id": "r1", "created_at": "2026-12-02T14:00:00Z", "device": {"kind": "cpu", "name": "Some CPU"}}


def row(impl: str, pass_: str, median: float, launch=None) -> dict:
    return {
        "run_id": "r1",
        "impl": impl,
        "pass": pass_,
        "status": "ok",
        "median_us": median,
        "device": {"index": 0, "name": "Some CPU", "label": "cpu:0"},
        "launch": launch,
    }


def test_live_run_round_trip(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    store.begin_run("r1", HEADER)
    store.add_row("r1", row("eager", "fwd", 1.5))
    store.add_row("r1", row("triton", "bwd", 2.5, {"programs": 264, "rows_per_program": 4}))
    running = store.get_run("r1")
    assert running["summary"] == {"complete": False, "rows": 2, "running": True}
    store.finish_run("r1", {"rows": 2, "complete": True}, complete=True)
    document = store.get_run("r1")
    assert document["run"] == HEADER and [r["impl"] for r in document["rows"]] == ["eager", "triton"]
    assert store.list_runs() == [
        {
            "run_id": "r1",
            "created_at": HEADER["created_at"],
            "device_name": "Some CPU",
            "kind": "cpu",
            "rows": 2,
            "complete": True,
            "source": "live",
            "timing": document["rows"][0].get("timing"),
            "label": None,
            "git_commit": None,
            "git_dirty": None,
            "versions": {"torch": None, "triton": None},
            "shapes": None,
            "counts": {"ok": 2, "skipped": 0, "error": 0, "wrong": 0},
            "implementations": ["eager", "triton"],
            "passes": ["bwd", "fwd"],
        }
    ]
    table = list(csv.DictReader(io.StringIO(store.export_csv("r1"))))
    assert [t["launch.programs"] for t in table] == ["", "264"] and "launch" not in table[0]
    assert [float(t["median_us"]) for t in table] == [1.5, 2.5] and table[0]["device.label"] == "cpu:0"
    assert store.delete_run("r1") is True and store.get_run("r1") is None and store.delete_run("r1") is False


def test_split_run_keeps_every_header(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    store.begin_run("r1", HEADER)
    other = {**HEADER, "device": {"kind": "cpu", "name": "Some CPU", "label": "cpu:1"}}
    store.add_header("r1", other)
    assert store.get_run("r1")["headers"] == [HEADER, other]


def test_import_is_idempotent_and_survives_reopening(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    document = {"run": HEADER, "rows": [row("eager", "fwd", 1.0)], "summary": {"complete": True}}
    assert store.import_run(document) is True
    assert store.import_run(document) is False
    reopened = Store(tmp_path / "db.sqlite3")
    assert reopened.get_run("r1")["rows"] == document["rows"]
    assert reopened.list_runs()[0]["source"] == "import"


def test_listing_names_the_file_commit_versions_shapes_and_counts_each_status(tmp_path):
    sweep = {"M": [4096, 16384], "N": [2880, 4096], "dtypes": ["bfloat16"], "repetitions": 20}
    header = {
        **HEADER,
        "git_commit": "abc1234",
        "git_dirty": True,
        "versions": {"torch": "2.13", "triton": "3.6"},
        "sweep": sweep,
    }
    rows = [
        row("eager", "fwd", 1.0),
        {**row("triton", "fwd", 0.5), "status": "wrong"},
        {**row("triton", "bwd", 0.0), "status": "skipped", "median_us": None},
        {**row("liger", "bwd", 0.0), "status": "skipped", "median_us": None},
        {**row("quack", "bwd", 0.0), "status": "error", "median_us": None},
    ]
    path = tmp_path / "gpu-run.json"
    path.write_text(json.dumps({"run": header, "rows": rows, "summary": {}}))
    store = Store(tmp_path / "db.sqlite3")
    store.import_paths([path], lambda doc: doc)
    listed = store.list_runs()[0]
    assert listed["label"] == "gpu-run.json" and listed["git_commit"] == "abc1234" and listed["git_dirty"] is True
    assert listed["versions"] == {"torch": "2.13", "triton": "3.6"}
    assert listed["shapes"] == {"M": [4096, 16384], "N": [2880, 4096], "dtypes": ["bfloat16"]}
    assert listed["counts"] == {"ok": 1, "skipped": 2, "error": 1, "wrong": 1}
    # Only measured rows count as what a run measured: the wrong, skipped and error rows name neither.
    assert listed["implementations"] == ["eager"] and listed["passes"] == ["fwd"]


def test_a_store_made_before_labels_gains_the_column(tmp_path):
    import sqlite3

    from app.store import SCHEMA

    db = sqlite3.connect(tmp_path / "db.sqlite3")
    db.executescript(SCHEMA)
    db.execute(
        "INSERT INTO runs (run_id, created_at, source, header_json, stored_at) VALUES ('old', 'x', 'live', '{}', 0)"
    )
    db.commit()
    db.close()
    assert Store(tmp_path / "db.sqlite3").list_runs()[0]["label"] is None


def test_import_paths_reports_bad_files(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"run": HEADER, "rows": [], "summary": {}}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")

    def validate(doc):
        assert "run" in doc
        return doc

    report = store.import_paths([good, bad], validate)
    assert report["imported"] == ["r1"] and len(report["rejected"]) == 1 and "bad.json" in report["rejected"][0]
    assert store.import_paths([good], validate)["present"] == ["r1"]


def test_run_cut_short_by_a_stop_is_marked_interrupted(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    store.begin_run("r1", HEADER)
    store.add_row("r1", row("eager", "fwd", 1.0))
    assert Store(tmp_path / "db.sqlite3").mark_interrupted() == ["r1"]
    summary = store.get_run("r1")["summary"]
    assert summary["interrupted"] is True and summary["complete"] is False and summary["rows"] == 1


def test_an_imported_summary_is_recomputed_from_the_rows(tmp_path):
    """A file whose summary names a winner (and counts) its rows do not bear out is stored with the rows' own."""
    rng = random.Random()
    fast, slow = sorted(rng.uniform(100, 4000) for _ in range(2))[::-1]

    def shaped(impl, gbps):
        return {
            **row(impl, "fwd", 1.0),
            "dtype": "bfloat16",
            "M": 4096,
            "N": 2560,
            "GBps": gbps,
            "pct_of_ceiling": gbps / 42.0,
        }

    rows = [shaped("triton", fast), shaped("torch-native", slow), {**row("eager", "fwd", 2.0), "status": "error"}]
    claimed = {
        "complete": True,
        "interrupted": False,
        "rows": 9,
        "ok": 9,
        "error": 0,
        "best": {"fwd/bfloat16/4096x2560": {"impl": "torch-native", "GBps": 10 * fast}},
    }
    store = Store(tmp_path / "db.sqlite3")
    assert store.import_run({"run": HEADER, "rows": rows, "summary": claimed}) is True
    summary = store.get_run("r1")["summary"]
    assert summary["best"]["fwd/bfloat16/4096x2560"]["impl"] == "triton"
    assert summary["best"]["fwd/bfloat16/4096x2560"]["GBps"] == fast
    assert (summary["rows"], summary["ok"], summary["error"]) == (3, 2, 1)
    assert summary["speedup"]["by_shape"]["fwd/bfloat16/4096x2560"]["triton"] == fast / slow
    assert summary["complete"] is True and summary["interrupted"] is False  # what the rows cannot say is kept
