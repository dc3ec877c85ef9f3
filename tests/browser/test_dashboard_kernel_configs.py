"""The line above the charts names the kernel configuration table a run's Triton kernels ran with (issue 33), as its
header records it: a committed width scan says which table and which card it was tuned on."""

import json

import pytest
from browser_paths import COMMITTED_RESULTS

pytestmark = [pytest.mark.browser, pytest.mark.server]


def test_a_run_with_a_tuned_table_names_it_above_the_charts(make_page):
    files = [p for p in COMMITTED_RESULTS if "widths" in p.name]
    assert files, "no committed width scan"
    header = json.loads(files[0].read_text())["run"]
    configs = header["kernel_configs"]
    assert configs["source"] == "table" and configs["table"]
    page = make_page(path=f"/?runs={header['run_id']}")
    page.wait_for_function("() => document.querySelector('#chart-sources').innerText.includes('kernel configs')")
    text = page.locator("#chart-sources").inner_text()
    assert f"kernel configs: {configs['table']} tuned on {configs['device']} {configs['created_at'][:10]}" in text
