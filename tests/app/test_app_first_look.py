"""The first look's rule (app/first_look.py) on made-up listings: each case one clause of its documentation."""

import pytest

from app.first_look import first_look_runs


MODELS = {"M": [4096, 16384, 65536], "N": [2048, 4096], "dtypes": ["bfloat16"]}
WIDTHS = {"M": [16384], "N": [256, 512, 8298], "dtypes": ["bfloat16"]}


def listing(
    run_id,
    created_at,
    impls,
    passes=("bwd", "fwd"),
    ok=10,
    kind="cuda",
    device="GPU A",
    complete=True,
    commit="c1",
    shapes=MODELS,
):
    return {
        "run_id": run_id,
        "created_at": created_at,
        "kind": kind,
        "rows": ok,
        "counts": {"ok": ok},
        "implementations": [f"impl-{i}" for i in range(impls)],
        "passes": list(passes),
        "device_name": device,
        "complete": complete,
        "git_commit": commit,
        "shapes": shapes,
    }


@pytest.mark.parametrize(
    "runs, chosen",
    [
        # A thin side run on the newest day does not hide that day's broad comparison (issue 17: the QuACK-only run).
        (
            [
                listing("side", "2026-12-03T08:40:00Z", 3),
                listing("broad", "2026-12-03T08:16:00Z", 6),
                listing("older", "2026-12-02T16:00:00Z", 9),
            ],
            ["broad"],
        ),
        # An older day's run never wins over the newest day's, however broad; CPU runs and runs without a measured row
        # never count.
        (
            [
                listing("cpu", "2026-12-04T09:00:00Z", 9, kind="cpu"),
                listing("empty", "2026-12-04T08:00:00Z", 9, ok=0),
                listing("today", "2026-12-03T07:00:00Z", 2),
                listing("yesterday", "2026-12-02T07:00:00Z", 9),
            ],
            ["today"],
        ),
        # Both passes before the number of implementations; then the most measured rows; then the newest.
        (
            [
                listing("fwd-only", "2026-12-03T10:00:00Z", 8, passes=("fwd",)),
                listing("both", "2026-12-03T09:00:00Z", 4),
            ],
            ["both"],
        ),
        (
            [
                listing("few-rows", "2026-12-03T10:00:00Z", 5, ok=96),
                listing("many-rows", "2026-12-03T09:00:00Z", 5, ok=336),
            ],
            ["many-rows"],
        ),
        ([listing("new", "2026-12-03T10:00:00Z", 5), listing("old", "2026-12-03T09:00:00Z", 5)], ["new"]),
        ([listing("cpu", "2026-12-03T10:00:00Z", 5, kind="cpu")], []),
        # A newer day's run of one pass does not hide an older day's run of both (a forward-only sweep of 2026-12-04).
        (
            [
                listing("fwd-today", "2026-12-04T03:22:00Z", 4, passes=("fwd",)),
                listing("both-yesterday", "2026-12-03T08:16:00Z", 6),
                listing("both-older", "2026-12-02T16:00:00Z", 9),
            ],
            ["both-yesterday"],
        ),
        # Issue 35: one session's forward and backward files (one commit, one day) open together, backward first...
        (
            [
                listing("fwd-today", "2026-12-04T03:22:00Z", 4, passes=("fwd",)),
                listing("bwd-today", "2026-12-04T02:00:00Z", 2, passes=("bwd",)),
                listing("fwd-older", "2026-12-02T16:00:00Z", 9, passes=("fwd",)),
            ],
            ["bwd-today", "fwd-today"],
        ),
        # ... but not files of two commits: then the newest day's broadest single run.
        (
            [
                listing("fwd-today", "2026-12-04T03:22:00Z", 4, passes=("fwd",), commit="c2"),
                listing("bwd-today", "2026-12-04T02:00:00Z", 2, passes=("bwd",)),
            ],
            ["fwd-today"],
        ),
        # ... nor files of two sweeps of one session: a side run of other shapes (the CUDA plug-ins' backward at the
        # models widths beside a width scan, issue 36) pairs with nothing, and the scan's two files open.
        (
            [
                listing("scan-fwd", "2026-12-07T15:20:00Z", 4, passes=("fwd",), shapes=WIDTHS),
                listing("cuda-bwd", "2026-12-07T15:25:00Z", 6, passes=("bwd",)),
                listing("scan-bwd", "2026-12-07T15:12:00Z", 4, passes=("bwd",), shapes=WIDTHS),
            ],
            ["scan-bwd", "scan-fwd"],
        ),
        # A run cut short never opens first while a complete one is stored (the fp16 "partial" file of issue 35) ...
        (
            [
                listing("partial-new", "2026-12-04T14:35:00Z", 6, complete=False),
                listing("whole", "2026-12-03T08:20:00Z", 5),
            ],
            ["whole"],
        ),
        # ... unless every GPU run is partial.
        (
            [
                listing("partial-a", "2026-12-04T14:35:00Z", 6, complete=False),
                listing("partial-b", "2026-12-03T08:20:00Z", 9, complete=False),
            ],
            ["partial-a"],
        ),
        # The newest GPU device: an H100 session of two files, newer than an H200 run of both passes, opens first.
        (
            [
                listing("h100-bwd", "2026-12-06T04:37:00Z", 5, passes=("bwd",), device="H100"),
                listing("h100-fwd", "2026-12-06T04:29:00Z", 5, passes=("fwd",), device="H100"),
                listing("h200-fwd", "2026-12-06T03:06:00Z", 4, passes=("fwd",), device="H200"),
                listing("h200-both", "2026-12-03T08:20:00Z", 9, device="H200"),
            ],
            ["h100-bwd", "h100-fwd"],
        ),
        # ... but a newer one-pass side run on another card does not switch the device (2026-12-07: an H200 forward
        # check after the H100's width scan opened a three-day-old H200 run).
        (
            [
                listing("h200-fwd-check", "2026-12-07T18:50:00Z", 3, passes=("fwd",), device="H200"),
                listing("h100-bwd", "2026-12-07T15:12:00Z", 4, passes=("bwd",), device="H100", shapes=WIDTHS),
                listing("h100-fwd", "2026-12-07T15:20:00Z", 4, passes=("fwd",), device="H100", shapes=WIDTHS),
                listing("h200-both", "2026-12-04T08:20:00Z", 9, device="H200"),
            ],
            ["h100-bwd", "h100-fwd"],
        ),
        # A backward pairs only with a forward of its own card (two cards' files of one commit, day and shapes).
        (
            [
                listing("h200-fwd", "2026-12-07T18:50:00Z", 3, passes=("fwd",), device="H200"),
                listing("h100-bwd", "2026-12-07T15:12:00Z", 4, passes=("bwd",), device="H100"),
            ],
            ["h200-fwd"],
        ),
    ],
)
def test_the_rule_picks_the_documented_run(runs, chosen):
    assert [r["run_id"] for r in first_look_runs(runs)] == chosen
