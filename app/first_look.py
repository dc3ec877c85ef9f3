"""What the dashboard opens with when the URL names no run (issues 17, 35): the first look, chosen here from the
store's listing so that the page can ask for those runs in its HTML, before its scripts have run
(`templates/index.html` preloads them; `static/js/first_look.js` opens them).

The rule, over the listing of ``Store.list_runs`` (newest first):
1. the GPU runs with a measured row; of them the complete ones (not cut short), when there are any;
2. candidates: each run that measured both passes; and each backward-only run paired with the newest forward-only run
   of the same device, commit, day and shapes (one sweep's two files: backward first, the dock's pass; a side run of
   the same session, e.g. the CUDA plug-ins' backward at other shapes, pairs with nothing);
3. the newest GPU device: the device of the newest candidate (a one-pass side run on another card, e.g. an H200
   forward check after an H100 scan, does not switch it); only its candidates go on; when there is no candidate at
   all, the device of the newest run, each of its runs alone (a store of one-pass runs only);
4. of the candidates of the newest day (a candidate's day: its newest run's UTC date), the one with the most
   implementations, then the most measured rows, then the newest (a day's thin side run, e.g. one implementation
   re-measured, does not hide its full comparison); a full tie keeps the first built.
[] when no GPU run is stored."""

from __future__ import annotations


def _created(run: dict) -> str:
    return str(run.get("created_at") or "")


def _day(run: dict) -> str:
    return _created(run)[:10]


def _newest(runs: list[dict]) -> dict:
    return max(runs, key=_created)  # max keeps the first of equals


def _passes(run: dict) -> set[str]:
    return set(run.get("passes") or [])


def first_look_runs(runs: list[dict]) -> list[dict]:
    """The listings of the runs a first visit opens: the first opened, the second (if any) overlaid."""
    gpu = [r for r in runs if r.get("kind") == "cuda" and (r.get("counts") or {}).get("ok", 0) > 0]
    if not gpu:
        return []
    pool = [r for r in gpu if r.get("complete", True) is not False] or gpu

    units = [[r] for r in pool if {"fwd", "bwd"} <= _passes(r)]
    for b in (r for r in pool if _passes(r) == {"bwd"}):
        fwd = [
            f
            for f in pool
            if _passes(f) == {"fwd"}
            and f.get("device_name") == b.get("device_name")
            and f.get("git_commit") == b.get("git_commit")
            and _day(f) == _day(b)
            and f.get("shapes") == b.get("shapes")
        ]
        if fwd:
            units.append([b, _newest(fwd)])
    if units:
        device = _newest([_newest(u) for u in units]).get("device_name")
        units = [u for u in units if u[0].get("device_name") == device]
    else:
        device = _newest(pool).get("device_name")
        units = [[r] for r in pool if r.get("device_name") == device]

    def unit_day(unit: list[dict]) -> str:
        return _day(_newest(unit))

    def rank(unit: list[dict]) -> tuple:
        return (
            len({i for r in unit for i in r.get("implementations") or []}),
            sum((r.get("counts") or {}).get("ok", 0) for r in unit),
            _created(_newest(unit)),
        )

    day = max(unit_day(u) for u in units)
    return max((u for u in units if unit_day(u) == day), key=rank)  # max keeps the first of equals
