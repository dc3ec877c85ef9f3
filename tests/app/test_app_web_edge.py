"""Issue 34: the web edge as a page of another origin, a DNS-rebinding page and a careless client see it.
Cross-site writes (403 / 415, nothing run or stored), the Host rule on reads, the security headers on every answer,
finite numbers only in the store (a speedup that overflows is 422 naming the row), CSV records that never split,
and 422 bodies that quote a short prefix of the input. Each test here failed before its fix.

The app is never started (no lifespan), so no worker runs: the scheduler's ``submit`` is a spy that records what
would have been queued."""

from __future__ import annotations

import csv
import io
import json
import random
import string

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from service_harness import REPO

LOOPBACK = "http://127.0.0.1"
RUN_FILE = json.loads(sorted((REPO / "results").glob("*small.json"))[0].read_text())
SWEEP = {"implementations": ["eager"], "passes": ["fwd"], "M": [8], "N": [64], "repetitions": 3}


def make_app(tmp_path, **settings):
    config = Settings.from_env(
        data_dir=tmp_path / "data", devices="cpu", results_dir="", start_workers=False, **settings
    )
    return create_app(config)


def a_run(run_id: str, rows: int = 3) -> dict:
    document = json.loads(json.dumps(RUN_FILE))
    document["run"]["run_id"] = run_id
    document["rows"] = [dict(row, run_id=run_id) for row in document["rows"][:rows]]
    return document


@pytest.fixture
def client(tmp_path):
    client = TestClient(make_app(tmp_path), base_url=LOOPBACK)
    client.submitted = []

    def spy(request, sweep, cases, listener=None, run_id=None):
        from app.queues import QueueFull

        client.submitted.append(cases)
        raise QueueFull("spy: nothing is measured here")

    client.app.state.service.scheduler.submit = spy
    return client


def stored_ids(client) -> list[str]:
    return [run["run_id"] for run in client.app.state.service.store.list_runs()]


# -- cross-site writes ---------------------------------------------------------------------------------------------


def write_requests(run_id: str):
    """(method, path, body) of every write endpoint, each with a body that would be run or stored if read."""
    return [
        ("POST", "/benchmark?stream=false", json.dumps(SWEEP)),
        ("POST", "/api/runs/import", json.dumps(a_run(run_id))),
        ("DELETE", f"/api/runs/{run_id}", None),
    ]


FOREIGN = [
    {"Origin": "http://evil.example"},
    {"Origin": "http://127.0.0.1:9"},
    {"Origin": "null"},
    {"Origin": "http://localhost.evil.example"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
]


@pytest.mark.parametrize("origin", FOREIGN, ids=lambda h: "-".join(h.values()))
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/json"])
def test_a_write_from_another_origin_is_403_and_nothing_runs(client, origin, content_type):
    client.app.state.service.store.import_run(a_run("kept-1"), source="import")
    for method, path, body in write_requests("kept-1"):
        headers = {**origin, "Content-Type": content_type}
        response = client.request(method, path, content=body, headers=headers)
        assert response.status_code == 403, (method, path, response.text)
        assert "origin" in response.json()["detail"].lower() or "Sec-Fetch-Site" in response.json()["detail"]
    assert client.submitted == [] and stored_ids(client) == ["kept-1"]


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=utf-16",
        "application/jsonp",
        "text/json",
    ],
)
def test_a_write_body_that_is_not_declared_json_is_415(client, content_type):
    """What a form or a no-cors fetch can send without a preflight is never read, even from this very origin."""
    headers = {"Origin": LOOPBACK} | ({"Content-Type": content_type} if content_type else {})
    for method, path, body in write_requests("new-1")[:2]:
        response = client.request(method, path, content=body, headers=headers)
        assert response.status_code == 415, (path, response.text)
        assert "application/json" in response.json()["detail"]
    assert client.submitted == [] and stored_ids(client) == []


def test_a_utf16_body_declared_json_is_422_not_read(client):
    body = json.dumps(a_run("utf16-1")).encode("utf-16")
    response = client.post("/api/runs/import", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422 and "UTF-8" in response.json()["detail"][0]["msg"]
    assert stored_ids(client) == []


def test_same_origin_and_originless_json_writes_still_work(client):
    """The page's own requests (Origin = its Host), curl's (no Origin) and a charset parameter are accepted."""
    for headers in ({"Origin": LOOPBACK}, {}, {"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}):
        response = client.post("/benchmark", json=SWEEP, headers=headers)
        assert response.status_code == 429, response.text  # past every check: the spy was asked to queue it
    response = client.post(
        "/api/runs/import",
        content=json.dumps(a_run("mine-1")),
        headers={"Content-Type": "application/json; charset=UTF-8", "Origin": LOOPBACK},
    )
    assert response.status_code == 200 and response.json()["imported"] is True
    assert client.delete("/api/runs/mine-1", headers={"Origin": LOOPBACK}).status_code == 200
    assert len(client.submitted) == 4


def test_allowed_origins_for_a_reverse_proxy(tmp_path):
    """Behind a proxy that rewrites Host, the browser's origin is named in RMSNORM_ALLOWED_ORIGINS."""
    client = TestClient(make_app(tmp_path, allowed_origins="https://bench.example.com"), base_url=LOOPBACK)
    ok = client.post("/api/runs/import", json=a_run("proxy-1"), headers={"Origin": "https://bench.example.com"})
    assert ok.status_code == 200, ok.text
    refused = client.post("/api/runs/import", json=a_run("proxy-2"), headers={"Origin": "https://other.example.com"})
    assert refused.status_code == 403 and "RMSNORM_ALLOWED_ORIGINS" in refused.json()["detail"]


# -- Host on every request -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/", "/api/runs", "/api/runs/some-run", "/api/health", "/openapi.json", "/static/js/api.js"]
)
def test_reads_answer_only_this_services_host(client, path):
    """DNS rebinding: a page of attacker.example whose name now resolves to 127.0.0.1 cannot read either."""
    for host in ("attacker.example", "attacker.example:8000", "testserver"):
        response = client.get(path, headers={"Host": host})
        assert response.status_code == 403, (path, host)
        assert "RMSNORM_ALLOWED_HOSTS" in response.json()["detail"]
    for host in ("127.0.0.1:8000", "localhost", "[::1]:8000"):
        assert client.get(path, headers={"Host": host}).status_code in (200, 404), (path, host)


# -- security headers ----------------------------------------------------------------------------------------------


def test_every_response_carries_the_security_headers(tmp_path):
    app = make_app(tmp_path, max_body_bytes=2048)
    client = TestClient(app, base_url=LOOPBACK, raise_server_exceptions=False)

    def boom():
        raise RuntimeError("a bug")

    app.state.service.store.list_runs = boom
    answers = {
        "page": client.get("/"),
        "health": client.get("/api/health"),
        "css": client.get("/static/css/app.css"),
        "plotly": client.get("/static/vendor/plotly.min.js"),
        "openapi": client.get("/openapi.json"),
        "docs": client.get("/docs"),
        "404": client.get("/api/runs/nope"),
        "405": client.put("/api/runs/x"),
        "413": client.post("/benchmark", content=b"x" * 4096, headers={"Content-Type": "application/json"}),
        "415": client.post("/benchmark", content=b"{}"),
        "422": client.post("/benchmark", json={"M": ["8"]}),
        "403 host": client.get("/api/health", headers={"Host": "evil.example"}),
        "403 origin": client.post("/benchmark", json={}, headers={"Origin": "http://evil.example"}),
        "500": client.get("/api/runs"),
        "csv": client.get("/api/runs/nope.csv"),
        "head": client.head("/api/health"),
    }
    statuses = {name: r.status_code for name, r in answers.items()}
    assert statuses["500"] == 500 and statuses["413"] == 413 and statuses["page"] == 200, statuses
    for name, response in answers.items():
        headers = response.headers
        csp = headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, name
        assert headers.get("x-content-type-options") == "nosniff", name
        assert headers.get("x-frame-options") == "DENY", name
        assert headers.get("referrer-policy") == "no-referrer", name
        if name != "docs":
            assert "script-src 'self';" in csp and "unsafe" not in csp, (name, csp)


# -- finite numbers only -------------------------------------------------------------------------------------------


def test_a_speedup_that_overflows_is_422_naming_the_row_and_field(client):
    """GBps 1e308 over the baseline's 2.0 is an infinite speedup: the store's JSON cannot hold it (it was a 500)."""
    document = a_run("overflow-1", rows=len(RUN_FILE["rows"]))
    baseline = next(i for i, r in enumerate(document["rows"]) if r["impl"] == "torch-native" and r["status"] == "ok")
    base = document["rows"][baseline]
    victim = next(
        i
        for i, r in enumerate(document["rows"])
        if r["status"] == "ok"
        and r["impl"] != "torch-native"
        and (r["pass"], r["dtype"], r["M"], r["N"]) == (base["pass"], base["dtype"], base["M"], base["N"])
    )
    document["rows"][victim]["GBps"] = 1e308
    document["rows"][baseline]["GBps"] = 0.5
    response = client.post("/api/runs/import", json=document)
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"] == ["body", "rows", victim, "GBps"] and f"rows.{victim}.GBps" in error["msg"]
    assert stored_ids(client) == []


# -- CSV -----------------------------------------------------------------------------------------------------------

HOSTILE = [
    "x\r=cmd|' /C calc'!A0",
    "line one\nline two",
    "crlf\r\nin the middle",
    'say "hi", then go',
    "=1+2",
    "+SUM(1,1)",
    "-2+3",
    "@cmd",
    "\t=tab",
    "\r=cr first",
    "\n=lf first",
    "comma, and \"quote\"\r",
    "é\u2028x",
]


def rfc4180_records(text: str) -> list[list[str]]:
    """A second CSV reader, written to RFC 4180 alone (as a spreadsheet reads a file): records end in CRLF outside
    quotes; a quoted field may hold anything, "" being one quote."""
    records, fields, field, i, quoted = [], [], [], 0, False
    while i < len(text):
        c = text[i]
        if quoted:
            if c == '"' and text[i + 1 : i + 2] == '"':
                field.append('"')
                i += 1
            elif c == '"':
                quoted = False
            else:
                field.append(c)
        elif c == '"' and not field:
            quoted = True
        elif c == ",":
            fields.append("".join(field))
            field = []
        elif text.startswith("\r\n", i):
            fields.append("".join(field))
            records.append(fields)
            fields, field = [], []
            i += 1
        elif c in "\r\n":
            raise AssertionError(f"a bare line break outside quotes at {i}: {text[max(0, i - 40) : i + 40]!r}")
        else:
            field.append(c)
        i += 1
    assert not quoted and not field and not fields, "the file ends inside a record"
    return records


def test_csv_round_trip_of_hostile_cells_gives_one_record_per_row(client):
    document = a_run("csv-34", rows=len(HOSTILE))
    rng = random.Random()
    for row, cell in zip(document["rows"], HOSTILE):
        row["reason"] = cell + "".join(rng.choices(string.ascii_letters, k=3))
        row["device"]["name"] = rng.choice(HOSTILE)
    assert client.post("/api/runs/import", json=document).status_code == 200
    text = client.get("/api/runs/csv-34.csv").text
    by_python = list(csv.reader(io.StringIO(text, newline="")))
    by_rfc = rfc4180_records(text)
    assert len(by_python) == len(by_rfc) == 1 + len(HOSTILE)
    assert by_python == by_rfc
    header = by_python[0]
    for record, row in zip(by_python[1:], document["rows"]):
        cells = dict(zip(header, record))
        for field, value in (("reason", row["reason"]), ("device.name", row["device"]["name"])):
            escaped = "'" + value if value.startswith(("=", "+", "-", "@", "\t", "\r", "\n")) else value
            assert cells[field] == escaped, field  # whole, and a formula never starts a cell
        assert float(cells["M"]) == row["M"]  # numbers stay bare numbers


# -- 422 bodies ----------------------------------------------------------------------------------------------------


def test_a_422_quotes_only_a_short_prefix_of_the_input(client):
    big = "A" * (5 << 20)  # 5 MiB in, a few hundred bytes out (the whole of it came back)
    run = a_run("q-1")
    run["rows"][0]["reason"] = big
    for path, body in (
        ("/api/runs/import", run),
        ("/api/runs/import", {**a_run("q-2"), "rows": big}),
        ("/benchmark", {**SWEEP, "device": big[:900_000]}),
        ("/benchmark", {**SWEEP, "M": list(range(100_000))}),
    ):
        response = client.post(path, json=body)
        assert response.status_code == 422, response.text[:300]
        assert len(response.content) < 4096, (path, len(response.content))
        inputs = [e["input"] for e in response.json()["detail"]]
        assert all(not isinstance(i, str) or len(i) < 200 for i in inputs), inputs
    short = client.post("/benchmark", json={**SWEEP, "device": "cuda:99x"}).json()["detail"][0]
    assert short["input"] == "cuda:99x"  # a short value is quoted whole
