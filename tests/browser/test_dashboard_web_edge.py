"""Issue 34 in Chromium: the page works under its Content-Security-Policy (no violation, no console error, plotly's
own rules applied), and a page served from another loopback port can neither write (a no-cors fetch or a form
POST to every write endpoint: refused 403, nothing run or stored) nor frame the dashboard."""

from __future__ import annotations

import functools
import http.server
import json
import threading

import pytest

RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => window.__cspViolations.push(
  `${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`));
"""


def test_the_page_works_under_its_csp(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    try:
        response = page.goto(server.url + "/")
        csp = response.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "unsafe" not in csp and "frame-ancestors 'none'" in csp
        page.wait_for_function("() => window.dashboardReady === true")
        page.wait_for_function("() => +document.querySelector('#chart-fwd').dataset.points > 0")
        chart = page.locator("#chart-fwd")
        box = chart.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        # a hover label of a measured point (plotly turned its <b> into a style attribute, which the CSP refuses)
        # plotly throttles hovers (50 ms): one asked for right after the mouse's may be deferred, so ask until it shows
        page.wait_for_function(
            """() => {
          const gd = document.getElementById('chart-fwd');
          const i = gd.data.findIndex((t) => t.customdata && t.customdata.length);
          window.Plotly.Fx.hover(gd, [{curveNumber: i, pointNumber: 0}]);
          return document.querySelector('#chart-fwd .hoverlayer').textContent.includes('GB/s');
        }""",
            polling=100,
            timeout=10_000,
        )
        for view in page.locator("input[name=view]").all():  # every view beside the charts, and back
            view.check(force=True)
            page.wait_for_timeout(300)
        page.locator("input[name=view]").first.check(force=True)
        page.wait_for_timeout(500)
        # plotly's own rules (added to an empty <style> through the CSSOM) are in force: its mode bar is placed
        assert page.evaluate("getComputedStyle(document.querySelector('#chart-fwd .modebar')).position") == "absolute"
        assert page.evaluate("window.__cspViolations") == []
        assert errors == []
    finally:
        context.close()


# -- a page of another origin ----------------------------------------------------------------------------------------

SWEEP = {"implementations": ["eager"], "passes": ["fwd"], "dtypes": ["float32"], "M": [8], "N": [64], "repetitions": 3}


def attacker_page(target: str, run_file: dict, victim: str) -> str:
    """A page that tries every cross-site write a browser allows without CORS: no-cors fetches with a text/plain
    JSON body, a form posting text/plain (its one field spells the JSON), a DELETE (preflighted), and a frame."""
    sweep = json.dumps(SWEEP)
    form_name = sweep[:-1] + ', "x": "'  # text/plain form body: name=value → {..., "x": "="}
    return f"""<!doctype html><html><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<iframe id="framed" src="{target}/" width="800" height="400"></iframe>
<form id="f1" method="POST" enctype="text/plain" action="{target}/benchmark?stream=false" target="sink1">
  <input name='{form_name}' value='"}}'></form>
<form id="f2" method="POST" enctype="text/plain" action="{target}/api/runs/import" target="sink2">
  <input name='{json.dumps(run_file)[:-1]}, "x": "' value='"}}'></form>
<script>
window.done = (async () => {{
  const out = [];
  const opts = (body) => ({{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body}});
  out.push(await fetch("{target}/benchmark?stream=false", opts({json.dumps(sweep)})).then((r) => r.type, (e) => String(e)));
  out.push(await fetch("{target}/api/runs/import", opts({json.dumps(json.dumps(run_file))})).then((r) => r.type, (e) => String(e)));
  out.push(await fetch("{target}/api/runs/{victim}", {{method: "DELETE"}}).then((r) => r.status, (e) => "refused: " + e));
  document.getElementById("f1").submit();
  document.getElementById("f2").submit();
  return out;
}})();
</script></body></html>"""


@pytest.fixture
def attacker_site(tmp_path):
    """A second loopback origin (another port) serving files from a folder."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    yield tmp_path, f"http://127.0.0.1:{site.server_address[1]}"
    site.shutdown()


def test_a_page_of_another_loopback_port_cannot_write_or_frame(browser, server, attacker_site):
    folder, origin = attacker_site
    before = {run["run_id"] for run in server.get("/api/runs")}
    victim = sorted(before)[0]
    run_file = server.get(f"/api/runs/{victim}")
    run_file["run"]["run_id"] = "planted-by-another-origin"
    for row in run_file["rows"]:
        row["run_id"] = "planted-by-another-origin"
    (folder / "evil.html").write_text(attacker_page(server.url, run_file, victim))

    context = browser.new_context()
    answers: list[tuple[str, str, int]] = []
    context.on(
        "response",
        lambda r: (
            r.url.startswith(server.url) and answers.append((r.request.method, r.url[len(server.url) :], r.status))
        ),
    )
    console: list[str] = []
    page = context.new_page()
    page.on("console", lambda m: console.append(m.text))
    try:
        page.goto(f"{origin}/evil.html")
        fetched = page.evaluate("window.done")
        page.wait_for_timeout(1500)  # the two forms' answers land in their frames
        framed = page.frame_locator("#framed").locator("#run-panel, main")
        assert framed.count() == 0, "the dashboard rendered inside another origin's frame"
    finally:
        context.close()

    writes = [a for a in answers if a[0] == "POST"]
    assert sorted(path for _, path, _ in writes) == sorted(
        ["/api/runs/import", "/api/runs/import", "/benchmark?stream=false", "/benchmark?stream=false"]
    )
    assert all(status == 403 for _, _, status in writes), answers
    assert fetched[:2] == ["opaque", "opaque"] and str(fetched[2]).startswith("refused"), fetched
    assert any("frame-ancestors" in line for line in console), console
    after = server.get("/api/runs")
    assert {run["run_id"] for run in after} == before  # nothing stored, nothing deleted
    health = server.get("/api/health")
    assert all(device["queue_length"] == 0 and not device["busy"] for device in health["gpus"])
