"""The page itself: it loads with no console error and no outside request, tells a CPU-only user what the
timings mean, lists every registered implementation (the example plugin too, unavailable ones with their
reason), shows a 422 readably, and stays usable on a phone-sized screen with labelled controls."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.server]


def test_page_loads_with_registry_plugin_and_cpu_banner(make_page, server, shot):
    page = make_page()
    health = server.get("/api/health")
    impls = server.get("/api/implementations")
    assert any(i["name"] == "torch-chunked" for i in impls), "the example plugin did not register in the service"

    banner = page.locator("#banner")
    if health["cpu_only"]:
        assert banner.is_visible()
        assert "CPU only: timings are CPU timings; committed GPU results are under History" in banner.inner_text()

    # Every registered implementation is in the picker with no front-end edit; unavailable ones are
    # disabled and say why.
    for impl in impls:
        box = page.locator(f'#impl-list input[name="impl"][value="{impl["name"]}"]')
        assert box.count() == 1, impl["name"]
        assert box.is_disabled() == (not impl["available"]), impl["name"]
        if not impl["available"]:
            label = page.locator("#impl-list label.impl", has=page.locator(f'input[value="{impl["name"]}"]'))
            assert impl["reason"] in label.inner_text()
    assert page.locator('#impl-list input[value="torch-chunked"]').is_enabled()

    # The device list comes from /api/health.
    options = page.locator("#device option").all_inner_texts()
    for device in health["gpus"]:
        assert any(o.startswith(device["label"]) for o in options), options
    shot(page, "page-loaded.png")


def test_refused_sweep_shows_the_422_reason(make_page, guard):
    guard.expect_http_error(422)
    page = make_page()
    page.locator('#impl-list input[value="eager"]').check()
    page.fill("#m-list", "2000000")  # above the engine's M limit: the service answers 422
    page.fill("#n-list", "128")
    page.click("#start")
    error = page.locator("#run-error")
    error.wait_for(state="visible")
    text = error.inner_text()
    assert "refused" in text and "M" in text and "2000000" in text, text
    assert page.locator("#start").is_enabled() and page.locator("#cancel").is_disabled()


def test_form_errors_are_caught_before_sending(make_page):
    page = make_page()
    page.fill("#n-list", "128, abc")
    page.click("#start")
    error = page.locator("#run-error")
    error.wait_for(state="visible")
    assert 'N: "abc" is not a positive whole number' in error.inner_text()


def test_narrow_screen_and_labelled_controls(make_page, shot):
    page = make_page(width=390, height=844)
    # Nothing is wider than the screen (the tables scroll inside their own box).
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 1, f"the page is {overflow}px wider than a 390px screen"
    # Every control has an accessible name and can take keyboard focus; plotly's mode-bar buttons are named and
    # kept out of the tab order on purpose (issue 17: the page's own CSV / PNG buttons are the keyboard's way in).
    unnamed = page.evaluate(
        """() => [...document.querySelectorAll('input, select, button, textarea')]
            .filter((el) => !el.hidden && el.type !== 'hidden' && !el.closest('[hidden]'))
            .filter((el) => {
              const name = (el.getAttribute('aria-label') || (el.labels && [...el.labels].map((l) => l.textContent).join(' '))
                            || el.textContent || el.title || '').trim();
              return !name || (el.tabIndex < 0 && !el.closest('.modebar'));
            })
            .map((el) => el.outerHTML.slice(0, 120))"""
    )
    assert unnamed == [], unnamed
    # On this CPU-only service the form is folded on a phone (issue 35): one tap opens it, then Tab reaches Start.
    if page.locator("#run-toggle").is_visible():
        page.click("#run-toggle")
    # Tab reaches the Start button.
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.id") == "start":
            break
    else:
        pytest.fail("Start is not reachable with the keyboard")
    shot(page, "narrow-390.png")


def test_phone_of_a_cpu_only_service_shows_results_first(make_page, server):
    """Issue 35: on a 390x844 phone of a CPU-only service the results start on the first screen (they were 1,332 px
    down, under the sweep form); the form is one tap away; a wide screen keeps the form open beside the charts."""
    assert server.get("/api/health")["cpu_only"]
    page = make_page(width=390, height=844)
    top = lambda sel: page.evaluate(f"document.querySelector('{sel}').getBoundingClientRect().top + scrollY")  # noqa: E731
    assert top("#charts") < 844 / 2, top("#charts")
    assert top("#chart-fwd") < 844, top("#chart-fwd")
    toggle = page.locator("#run-toggle")
    assert toggle.is_visible() and toggle.get_attribute("aria-expanded") == "false"
    assert not page.locator("#sweep-form").is_visible() and not page.locator("#start").is_visible()
    toggle.click()
    assert page.locator("#sweep-form").is_visible() and page.locator("#start").is_visible()
    assert toggle.get_attribute("aria-expanded") == "true"
    toggle.click()
    assert not page.locator("#sweep-form").is_visible()

    wide = make_page(width=1440, height=900)
    assert not wide.locator("#run-toggle").is_visible()
    assert wide.locator("#sweep-form").is_visible() and wide.locator("#start").is_visible()
