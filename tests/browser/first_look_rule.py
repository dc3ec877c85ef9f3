"""The first look's rule, written again from its documentation (static/js/first_look.js, firstLookRun) for the
tests to check the page against: of the GPU runs with a measured row in GET /api/runs, those that measured both
passes when there are any; of them those of the newest day (the UTC date of created_at); of them the one with the
most implementations, then the most measured rows, then the newest (the listing is newest first: a full tie keeps
the first listed)."""


def first_look_run(runs):
    measured = [r for r in runs if r["kind"] == "cuda" and r["counts"]["ok"] > 0]
    if not measured:
        return None
    gpu = [r for r in measured if {"fwd", "bwd"} <= set(r["passes"])] or measured
    day = max(r["created_at"][:10] for r in gpu)
    return max((r for r in gpu if r["created_at"][:10] == day),  # max keeps the first of equals: the newest listed
               key=lambda r: (len(r["implementations"]), r["counts"]["ok"], r["created_at"]))
