"""Issue 35, light and dark: the per-shape table's text (★ rows included) keeps a contrast of 4.5:1 against the
background it is drawn on, computed from the computed styles; the loading dock's canvas takes the scheme's colours,
so a lane's title, its trucks and the canvas labels stay visible on it."""

import pytest
from chart_helpers import contrast

pytestmark = [pytest.mark.browser, pytest.mark.server]

# Every text-bearing cell of the table: its colour and the first opaque background behind it.
TABLE_TEXT = """() => {
  const behind = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const bg = getComputedStyle(e).backgroundColor;
      if (bg && !/rgba\\(.*,\\s*0\\)$/.test(bg) && bg !== 'transparent') return bg;
    }
    return getComputedStyle(document.documentElement).backgroundColor;
  };
  const cells = [...document.querySelectorAll('#shape-table th button, #shape-table td, #shape-table .star')]
    .filter((el) => el.textContent.trim());
  return cells.map((el) => ({text: el.textContent.trim().slice(0, 30), best: !!el.closest('tr.best'),
                             color: getComputedStyle(el).color, bg: behind(el)}));
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_table_text_contrast_in_both_themes(make_page, scheme):
    page = make_page()
    page.emulate_media(color_scheme=scheme)
    page.wait_for_function("() => document.querySelectorAll('#shape-table tr.best').length > 0")
    cells = page.evaluate(TABLE_TEXT)
    assert any(c["best"] for c in cells) and len(cells) > 20
    low = [
        (c["text"], c["color"], c["bg"], round(contrast(c["color"], c["bg"]), 2))
        for c in cells
        if contrast(c["color"], c["bg"]) < 4.5
    ]
    assert not low, f"{scheme}: table text under 4.5:1: {low[:6]}"


LANES = """() => [...document.querySelectorAll('#dock-lanes figure.lane')].map((fig) => {
  const canvas = fig.querySelector('canvas');
  const dpr = window.devicePixelRatio || 1;
  const px = canvas.getContext('2d').getImageData(2 * dpr, 2 * dpr, 1, 1).data;
  const head = fig.querySelector('.lane-head');
  const foot = fig.querySelector('.lane-foot');
  const css = getComputedStyle(document.documentElement);
  return {
    impl: fig.dataset.impl, canvasBg: `rgb(${px[0]}, ${px[1]}, ${px[2]})`,
    name: getComputedStyle(fig.querySelector('.lane-name')).color, headBg: getComputedStyle(head).backgroundColor,
    headInk: getComputedStyle(fig.querySelector('.lane-grid')).color,
    footInk: getComputedStyle(fig.querySelector('.lane-status')).color, footBg: getComputedStyle(foot).backgroundColor,
    canvasInk: css.getPropertyValue('--dock-ink').trim(), doorInk: css.getPropertyValue('--dock-door-ink').trim(),
    cardBg: getComputedStyle(document.getElementById('dock')).backgroundColor,
  };
})"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_dock_canvas_follows_the_colour_scheme(make_page, scheme):
    page = make_page()
    page.emulate_media(color_scheme=scheme)
    page.wait_for_function(
        "() => Object.keys(window.dockState || {}).length > 0"
        " && document.querySelectorAll('#dock-lanes figure.lane canvas').length > 0"
    )
    page.wait_for_timeout(100)  # a frame painted after the scheme change
    lanes = page.evaluate(LANES)
    assert lanes
    for lane in lanes:
        # The canvas is of the page's scheme: as dark as the card in dark mode, as light in light mode.
        assert contrast(lane["canvasBg"], lane["cardBg"]) < 1.3, lane
        # The lane's title and its trucks (the implementation's colour) stand out from what they are drawn on.
        assert contrast(lane["name"], lane["headBg"]) >= 3, lane
        assert contrast(lane["name"], lane["canvasBg"]) >= 3, lane
        # The labels: on the canvas (dγ, 1 door, box names) and around it (grid, phase, clock).
        for ink, bg in (
            (lane["canvasInk"], lane["canvasBg"]),
            (lane["doorInk"], lane["canvasBg"]),
            (lane["headInk"], lane["headBg"]),
            (lane["footInk"], lane["footBg"]),
        ):
            assert contrast(ink, bg) >= 4.5, (lane["impl"], ink, bg)
