"""Opening a run from the History table the way a user does, and waiting until that open is drawn.

The page may already show the run (the first look opens one): a wait on "the row is shown" would then pass before
the click's fetch returns, and the late open would reset the filters a test set meanwhile. History counts finished
opens on its table body (data-opens, data-last-opened); the helpers wait for the count to move past the click."""


def opens(page) -> int:
    return page.evaluate("() => +(document.querySelector('#history-table tbody').dataset.opens ?? 0)")


def click_and_wait(page, run_id: str, button: str = "open") -> None:
    """Click the run's Open (or Overlay) button and wait until that open finished and drew the run."""
    before = opens(page)
    page.locator(f'#history-table tbody tr[data-run-id="{run_id}"] button.{button}').click()
    page.wait_for_function(
        "([n, id]) => { const t = document.querySelector('#history-table tbody');"
        " return +(t.dataset.opens ?? 0) > n && t.dataset.lastOpened === id; }",
        arg=[before, run_id],
    )
