"""The CUDA plug-in (examples/cuda_rmsnorm) in the service and on the page, on a machine without a GPU: the API lists
both implementations as unavailable with the reason and gives their grids (the naive chain's one block per row; the
persistent one's SMs × blocks per SM, labelled as the estimate or a recorded occupancy); the page offers them with the
reason; and the dock draws the naive-chain family from its grid: every truck tips its cart on the floor, then two
crews (a column sum into 64 partial rows, then dγ)."""

import pytest
from dock_helpers import show_only, wait_settled
from test_dashboard_dock_painters import AT_16K_4K, PAINT

pytestmark = [pytest.mark.browser, pytest.mark.server]

M, N, SM = 16384, 4096, 132


def test_the_api_lists_the_cuda_plugins_unavailable_with_the_reason_and_their_grids(server):
    listed = {i["name"]: i for i in server.get("/api/implementations")}
    for name in ("cuda-naive", "cuda-persistent"):
        assert listed[name]["available"] is False and "needs an NVIDIA GPU" in listed[name]["reason"]
        assert listed[name]["source"] == "path:examples.cuda_rmsnorm"
    assert listed["cuda-naive"]["family"] == "naive-chain" and listed["cuda-persistent"]["family"] == "persistent"
    grid = server.get(f"/api/launch?M={M}&N={N}&sm_count={SM}")
    naive, persistent = grid["cuda-naive"], grid["cuda-persistent"]
    assert naive["programs"] == M and naive["rows_per_program"] == 1 and naive["partial_rows"] == 64
    assert naive["extra_bytes"] == 2 * M * N * 2 + 2 * 64 * N * 4
    assert persistent["programs"] == SM * persistent["blocks_per_sm"] and persistent["sm_count"] == SM
    assert persistent["occupancy"].split(":")[0] in ("estimate", "recorded")


def test_the_dock_paints_the_naive_chain_floor_and_two_crews(make_page, server):
    page = make_page()
    launch = server.get(f"/api/launch?M={M}&N={N}&sm_count={SM}")
    impls = [
        {"name": "cuda-naive", "family": "naive-chain", "launch": launch["cuda-naive"]},
        {"name": "triton-workspace", "family": "workspace", "launch": launch["triton-workspace"]},
    ]
    got = page.evaluate(PAINT, {"impls": impls, "M": M, "N": N, "sm": SM})
    naive, workspace = got["cuda-naive"], got["triton-workspace"]
    assert naive["kind"] == "naive-chain" and naive["programs"] == M and naive["trucks"] == 64
    assert naive["bays"] == naive["bayRects"] == 14  # 64 partial rows, drawn up to the cap
    assert {"floor", "64 rows", "dγ"} <= set(naive["texts"])
    assert naive["packets"] == 14 and naive["door"] == naive["box"] == 0  # a crew at work: a packet per bay
    assert "floor" not in workspace["texts"]
    # the timetable: the floor pass moves the M×N terms; two crews follow, one after the other
    crews = page.evaluate(
        """async ({launch, M, N, sm}) => {
      const idx = await import('/static/js/dock_painters/index.js');
      const model = await import('/static/js/dock_model.js');
      const s = idx.scheduleFor({family: 'naive-chain', launch, M, N, smCount: sm, mode: 'bwd'});
      const w = idx.scheduleFor({family: 'workspace', launch, M, N, smCount: sm, mode: 'bwd'});
      const [c1, c2] = s.crews;
      return {ordered: c1.start < c1.end && c1.end === c2.start && c2.end === s.total,
              lastUnload: Math.max(...s.trucks.map((t) => t.unloadEnd)), c1start: c1.start,
              phase1: model.phaseAt(s, (c1.start + c1.end) / 2), phase2: model.phaseAt(s, (c2.start + c2.end) / 2),
              slower: s.total > w.total};
    }""",
        {"launch": launch["cuda-naive"], "M": M, "N": N, "sm": SM},
    )
    assert crews["ordered"] and crews["lastUnload"] == crews["c1start"] and crews["slower"]
    assert crews["phase1"].startswith("crew 1") and crews["phase2"].startswith("crew 2")


def test_the_dock_lanes_of_the_cuda_plugins(make_page, server):
    page = make_page(path=f"/?{AT_16K_4K}")
    names = ["cuda-naive", "cuda-persistent"]
    show_only(page, names)
    state = wait_settled(page, names, M, N)
    assert state["cuda-naive"]["kind"] == "naive-chain" and state["cuda-persistent"]["kind"] == "persistent"
    grid = server.get(f"/api/launch?M={M}&N={N}&sm_count={SM}")["cuda-persistent"]
    text = page.locator('#dock-lanes figure[data-impl="cuda-persistent"] .lane-grid').inner_text()
    assert f"{SM} SMs × {grid['blocks_per_sm']} per SM (" in text, text
    sentence = page.locator('#dock-lanes figure[data-impl="cuda-naive"] .sr-only').inner_text()
    assert "on the floor" in sentence and "64 partial rows" in sentence
