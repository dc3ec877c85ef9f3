"""The run store: SQLite (stdlib sqlite3, WAL) with a `runs` table and a `rows` table.

A live run is written as it happens: `begin_run` at its first header, `add_row` per measured case,
`finish_run` with the summary (complete or not). A result file (``{"run", "rows", "summary"}``, the format of
``results/*.json``) is imported in one transaction. Reading a run gives back that same file format.
Every call opens its own short-lived connection, so the store can be used from any thread.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from engine.summary import DEFAULT_BASELINE, summarize

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id       TEXT PRIMARY KEY,
    created_at   TEXT,
    device_name  TEXT,
    kind         TEXT,
    complete     INTEGER NOT NULL DEFAULT 0,
    source       TEXT NOT NULL,
    header_json  TEXT NOT NULL,
    headers_json TEXT,
    summary_json TEXT,
    stored_at    REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS rows (
    run_id   TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    seq      INTEGER NOT NULL,
    impl     TEXT,
    pass     TEXT,
    status   TEXT,
    row_json TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS deleted (
    run_id     TEXT PRIMARY KEY,
    deleted_at REAL NOT NULL
);
"""
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")
"""A CSV cell starting with one of these is a formula to a spreadsheet: it is written with a leading "'"."""


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)


def _shapes(header: dict) -> dict | None:
    """The shapes a run's sweep asked for (M, N, dtypes), which tell one sweep's files from another's."""
    sweep = header.get("sweep")
    if not isinstance(sweep, dict):
        return None
    return {k: sweep.get(k) for k in ("M", "N", "dtypes")}


def _cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet would run as a formula is escaped with a leading "'" (OWASP)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _flatten(row: dict, prefix: str = "") -> dict:
    flat: dict = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            flat[name] = _dumps(value)
        else:
            flat[name] = value
    return flat


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._write_lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            # A label (the imported file's name) came later: add the column to stores made before it.
            if "label" not in {c["name"] for c in db.execute("PRAGMA table_info(runs)")}:
                db.execute("ALTER TABLE runs ADD COLUMN label TEXT")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30)
        try:
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA busy_timeout=30000")
            db.row_factory = sqlite3.Row
            with db:  # one transaction: commit on success, roll back on error
                yield db
        finally:
            db.close()

    # -- live runs -----------------------------------------------------------------------------------------

    def begin_run(self, run_id: str, header: dict, source: str = "live") -> None:
        """Record a run that starts now (incomplete until `finish_run`)."""
        device = header.get("device") or {}
        with self._write_lock, self._connect() as db:
            db.execute(
                "INSERT INTO runs (run_id, created_at, device_name, kind, complete, source, header_json, headers_json,"
                " stored_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?)",
                (
                    run_id,
                    header.get("created_at"),
                    device.get("name"),
                    device.get("kind"),
                    source,
                    _dumps(header),
                    _dumps([header]),
                    time.time(),
                ),
            )

    def add_header(self, run_id: str, header: dict) -> None:
        """Another device joined the run (a split sweep): keep its header (its own ceiling) too."""
        with self._write_lock, self._connect() as db:
            found = db.execute("SELECT headers_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if found is None:
                raise KeyError(run_id)
            headers = json.loads(found["headers_json"] or "[]")
            headers.append(header)
            db.execute("UPDATE runs SET headers_json = ? WHERE run_id = ?", (_dumps(headers), run_id))

    def add_row(self, run_id: str, row: dict) -> int:
        """Append one result row; returns its position in the run."""
        with self._write_lock, self._connect() as db:
            seq = db.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM rows WHERE run_id = ?", (run_id,)).fetchone()[0]
            db.execute(
                "INSERT INTO rows (run_id, seq, impl, pass, status, row_json) VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, seq, row.get("impl"), row.get("pass"), row.get("status"), _dumps(row)),
            )
            return seq

    def finish_run(self, run_id: str, summary: dict, complete: bool) -> None:
        with self._write_lock, self._connect() as db:
            db.execute(
                "UPDATE runs SET summary_json = ?, complete = ? WHERE run_id = ?",
                (_dumps(summary), int(bool(complete)), run_id),
            )

    def mark_interrupted(self) -> list[str]:
        """At start: runs left without a summary (the server stopped while measuring them) get one saying so."""
        with self._write_lock, self._connect() as db:
            found = db.execute(
                "SELECT r.run_id, (SELECT COUNT(*) FROM rows w WHERE w.run_id = r.run_id) AS n FROM runs r"
                " WHERE r.summary_json IS NULL"
            ).fetchall()
            for run in found:
                summary = {
                    "run_id": run["run_id"],
                    "rows": run["n"],
                    "complete": False,
                    "interrupted": True,
                    "reason": "the service stopped while this run was being measured",
                }
                db.execute(
                    "UPDATE runs SET summary_json = ?, complete = 0 WHERE run_id = ?", (_dumps(summary), run["run_id"])
                )
        return [run["run_id"] for run in found]

    # -- whole files ----------------------------------------------------------------------------------------

    def import_run(
        self, run_file: dict, source: str = "import", undelete: bool = False, label: str | None = None
    ) -> bool:
        """Store a whole run file (already validated). Returns False, changing nothing, when its run_id is stored,
        or was deleted by the user (unless ``undelete``: an explicit import brings a deleted run back). ``label``:
        what the History lists it as (the imported file's name)."""
        header = run_file["run"]
        run_id = header["run_id"]
        headers = run_file.get("headers") or [header]
        given = run_file.get("summary")
        given = given if isinstance(given, dict) else {}
        complete = given.get("complete", True)
        # What the rows decide (counts, the best per shape, speedups) is recomputed from them, so a file whose
        # summary disagrees with its rows (edited, or cut by hand) never shows a ★ its rows do not bear out;
        # the rest of the file's summary (complete, interrupted, ...) is kept.
        speedup = given.get("speedup")
        baseline = speedup.get("baseline") if isinstance(speedup, dict) else None
        baseline = baseline if isinstance(baseline, str) and baseline else DEFAULT_BASELINE
        # strict: a speedup that overflows (GBps 1e308) raises engine.summary.NonFiniteResult naming the row,
        # before anything is written (the route answers 422; JSON and this store hold finite numbers only)
        summary = {**given, **summarize(run_file.get("rows") or [], complete, baseline, strict=True)}
        device = header.get("device") or {}
        with self._write_lock, self._connect() as db:
            if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                return False
            if undelete:
                db.execute("DELETE FROM deleted WHERE run_id = ?", (run_id,))
            elif db.execute("SELECT 1 FROM deleted WHERE run_id = ?", (run_id,)).fetchone():
                return False
            db.execute(
                "INSERT INTO runs (run_id, created_at, device_name, kind, complete, source, header_json, headers_json,"
                " summary_json, stored_at, label) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    header.get("created_at"),
                    device.get("name"),
                    device.get("kind"),
                    int(bool(complete)),
                    source,
                    _dumps(header),
                    _dumps(headers),
                    _dumps(summary),
                    time.time(),
                    label,
                ),
            )
            db.executemany(
                "INSERT INTO rows (run_id, seq, impl, pass, status, row_json) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (run_id, seq, row.get("impl"), row.get("pass"), row.get("status"), _dumps(row))
                    for seq, row in enumerate(run_file.get("rows") or [])
                ],
            )
        return True

    # -- reading ---------------------------------------------------------------------------------------------

    def list_runs(self) -> list[dict]:
        """Newest first: ``{"run_id", "created_at", "device_name", "kind", "rows", "complete", "source",
        "timing", "label", "git_commit", "git_dirty", "versions", "shapes", "counts", "implementations", "passes"}``
        (timing: the first row's, "events" or "cuda-graph"; None for a run with no row yet; label: the imported file's name,
        else None; versions: the header's torch and triton versions; shapes: its sweep's ``{"M", "N", "dtypes"}``
        as asked for (None without a sweep in the header); counts: rows per status, ok / skipped / error /
        wrong; implementations and passes: those with at least one measured ("ok") row, sorted)."""
        with self._connect() as db:
            found = db.execute(
                "SELECT r.run_id, r.created_at, r.device_name, r.kind, r.complete, r.source, r.label, r.header_json,"
                " (SELECT COUNT(*) FROM rows w WHERE w.run_id = r.run_id) AS n,"
                " (SELECT w.row_json FROM rows w WHERE w.run_id = r.run_id LIMIT 1) AS first_row"
                " FROM runs r ORDER BY r.created_at DESC, r.stored_at DESC"
            ).fetchall()
            counts: dict[str, dict[str, int]] = {}
            for c in db.execute("SELECT run_id, status, COUNT(*) AS n FROM rows GROUP BY run_id, status"):
                counts.setdefault(c["run_id"], {})[str(c["status"])] = c["n"]
            measured: dict[str, tuple[set, set]] = {}
            for m in db.execute("SELECT DISTINCT run_id, impl, pass FROM rows WHERE status = 'ok'"):
                impls, passes = measured.setdefault(m["run_id"], (set(), set()))
                impls.add(m["impl"])
                passes.add(m["pass"])
        out = []
        for r in found:
            header = json.loads(r["header_json"]) if r["header_json"] else {}
            versions = header.get("versions") if isinstance(header.get("versions"), dict) else {}
            per_status = counts.get(r["run_id"], {})
            impls, passes = measured.get(r["run_id"], ((), ()))
            out.append(
                {
                    "run_id": r["run_id"],
                    "created_at": r["created_at"],
                    "device_name": r["device_name"],
                    "kind": r["kind"],
                    "rows": r["n"],
                    "complete": bool(r["complete"]),
                    "source": r["source"],
                    "timing": json.loads(r["first_row"]).get("timing") if r["first_row"] else None,
                    "label": r["label"],
                    "git_commit": header.get("git_commit"),
                    "git_dirty": header.get("git_dirty") if isinstance(header.get("git_dirty"), bool) else None,
                    "versions": {k: versions.get(k) for k in ("torch", "triton")},
                    "shapes": _shapes(header),
                    "counts": {k: per_status.get(k, 0) for k in ("ok", "skipped", "error", "wrong")},
                    "implementations": sorted(i for i in impls if i),
                    "passes": sorted(p for p in passes if p),
                }
            )
        return out

    def get_run(self, run_id: str) -> dict | None:
        """The run as a result file: ``{"run": header, "rows": [...], "summary": {...}}`` (plus ``"headers"``, one
        per device, when more than one device measured it); None when unknown."""
        with self._connect() as db:
            run = db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if run is None:
                return None
            rows = [
                json.loads(r["row_json"])
                for r in db.execute("SELECT row_json FROM rows WHERE run_id = ? ORDER BY seq", (run_id,))
            ]
        document = {
            "run": json.loads(run["header_json"]),
            "rows": rows,
            "summary": json.loads(run["summary_json"]) if run["summary_json"] else None,
        }
        headers = json.loads(run["headers_json"] or "[]")
        if len(headers) > 1:
            document["headers"] = headers
        if document["summary"] is None:  # still running, or the server stopped during it
            document["summary"] = {"complete": False, "rows": len(rows), "running": True}
        return document

    def export_csv(self, run_id: str) -> str | None:
        """One CSV record per row, nested fields flattened (``device.name``, ``launch.programs``); text cells
        quoted, a cell a spreadsheet would run as a formula escaped with a leading "'" (`_cell`)."""
        document = self.get_run(run_id)
        if document is None:
            return None
        flat_rows = [_flatten(row) for row in document["rows"]]
        columns: list[str] = []
        for flat in flat_rows:
            columns.extend(key for key in flat if key not in columns)
        # a nested field that is null in some rows ("launch": null) is covered by its flattened columns
        columns = [c for c in columns if not any(other.startswith(c + ".") for other in columns)]
        out = io.StringIO()
        # RFC 4180: records end in CRLF, and every text cell is quoted (QUOTE_NONNUMERIC), so a cell holding a
        # bare CR, an LF or a quote stays one cell of one record (with lineterminator "\n", a bare CR went out
        # unquoted and split the row); numbers stay bare, read as numbers
        writer = csv.DictWriter(
            out,
            fieldnames=columns or ["run_id"],
            lineterminator="\r\n",
            extrasaction="ignore",
            quoting=csv.QUOTE_NONNUMERIC,
        )
        writer.writeheader()
        writer.writerows({key: _cell(value) for key, value in flat.items()} for flat in flat_rows)
        return out.getvalue()

    def delete_run(self, run_id: str) -> bool:
        """Delete a run; it is remembered as deleted, so importing results/ at the next start skips it."""
        with self._write_lock, self._connect() as db:
            db.execute("DELETE FROM rows WHERE run_id = ?", (run_id,))
            found = db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount > 0
            if found:
                db.execute("INSERT OR REPLACE INTO deleted (run_id, deleted_at) VALUES (?, ?)", (run_id, time.time()))
            return found

    def was_deleted(self, run_id: str) -> bool:
        with self._connect() as db:
            return db.execute("SELECT 1 FROM deleted WHERE run_id = ?", (run_id,)).fetchone() is not None

    def import_paths(self, paths: Iterable[Path], validate) -> dict[str, list[str]]:
        """Import result files (idempotent by run_id). ``validate(doc) -> dict`` raises on a bad file, which is
        skipped and reported. Returns ``{"imported": [...], "present": [...], "rejected": ["file: reason", ...]}``."""
        report: dict[str, list[str]] = {"imported": [], "present": [], "rejected": []}
        for path in sorted(paths):
            try:
                document = validate(json.loads(Path(path).read_text()))
            except Exception as exc:
                report["rejected"].append(
                    f"{path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                )
                continue
            run_id = document["run"]["run_id"]
            if self.was_deleted(run_id):
                report.setdefault("deleted", []).append(run_id)
                continue
            stored = self.import_run(document, source="import", label=Path(path).name)
            (report["imported"] if stored else report["present"]).append(run_id)
        return report
