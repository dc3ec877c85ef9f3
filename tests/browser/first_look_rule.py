"""The first look's rule, written again from its documentation (static/js/first_look.js, firstLookRuns) for the
tests to check the page against: of the GPU runs with a measured row in GET /api/runs, the complete ones when there
are any; of them those of the newest GPU device (the device of the newest); candidates: each run of both passes,
and each backward-only run paired with the newest forward-only run of the same commit and day (backward first),
else each run alone; of the candidates of the newest day (a candidate's day: its newest run's), the one with the
most implementations, then the most measured rows, then the newest (a full tie keeps the first built)."""


def _day(r):
    return (r.get("created_at") or "")[:10]


def _newest(runs):
    best = runs[0]
    for r in runs[1:]:  # the first of equals, as the page's reduce keeps it
        if (r.get("created_at") or "") > (best.get("created_at") or ""):
            best = r
    return best


def first_look_runs(runs):
    gpu = [r for r in runs if r["kind"] == "cuda" and r["counts"].get("ok", 0) > 0]
    if not gpu:
        return []
    pool = [r for r in gpu if r.get("complete", True) is not False] or gpu
    device = _newest(pool).get("device_name")
    mine = [r for r in pool if r.get("device_name") == device]

    def passes(r):
        return set(r.get("passes") or [])

    units = [[r] for r in mine if {"fwd", "bwd"} <= passes(r)]
    for b in (r for r in mine if passes(r) == {"bwd"}):
        fwd = [
            f
            for f in mine
            if passes(f) == {"fwd"} and f.get("git_commit") == b.get("git_commit") and _day(f) == _day(b)
        ]
        if fwd:
            units.append([b, _newest(fwd)])
    if not units:
        units = [[r] for r in mine]

    def unit_day(u):
        return _day(_newest(u))

    day = max(unit_day(u) for u in units)

    def rank(u):
        return (
            len({i for r in u for i in r.get("implementations") or []}),
            sum(r["counts"].get("ok", 0) for r in u),
            _newest(u).get("created_at") or "",
        )

    return max((u for u in units if unit_day(u) == day), key=rank)  # max keeps the first of equals


def first_look_run(runs):
    """The first of them: the run the table, the summary line and the dock start with."""
    found = first_look_runs(runs)
    return found[0] if found else None
