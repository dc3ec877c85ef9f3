"""The dock's timetable (static/js/dock_model.js, through the painters' table static/js/dock_painters/index.js, which
gives each family its unload plan) and the colour palette, run in the browser as the page runs them."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.server]


def run_module(page, module, body, arg=None):
    return page.evaluate(
        f"""async (arg) => {{ const m = await import('/static/js/{module}'); {body} }}""",
        arg,
    )


def test_atomic_queue_and_time_grow_with_the_block_count(make_page):
    page = make_page()
    result = run_module(
        page,
        "dock_painters/index.js",
        """
        const out = [];
        for (const programs of [64, 512, 4096, 32768]) {
          const s = m.scheduleFor({family: 'atomic', launch: {programs, rows_per_program: 1, partial_rows: 1},
                                     M: programs, N: 4096, smCount: 132});
          // one truck at the door at a time: unload intervals never overlap
          const t = [...s.trucks].sort((a, b) => a.unloadStart - b.unloadStart);
          const serial = t.every((x, i) => i === 0 || x.unloadStart >= t[i - 1].unloadEnd - 1e-9);
          out.push({programs, maxQueue: s.maxQueueLength, total: s.total, serial, kind: s.kind});
        }
        return out;""",
    )
    assert all(r["serial"] and r["kind"] == "atomic" for r in result)
    queues = [r["maxQueue"] for r in result]
    totals = [r["total"] for r in result]
    assert queues == sorted(queues) and queues[-1] > queues[0] > 0, result
    assert totals == sorted(totals) and totals[-1] > totals[0], result


def test_workspace_and_persistent_never_queue_and_consolidate_last(make_page):
    page = make_page()
    result = run_module(
        page,
        "dock_painters/index.js",
        """
        const model = await import('/static/js/dock_model.js');
        return ['workspace', 'persistent'].map((family) => {
          const s = m.scheduleFor({family, launch: {programs: 264, rows_per_program: 63, partial_rows: 264},
                                     M: 16384, N: 4096, smCount: 132});
          const lastUnload = Math.max(...s.trucks.map((t) => t.unloadEnd));
          const stretched = model.stretchTo(s, 10 * s.total);
          return {kind: s.kind, maxQueue: s.maxQueueLength, bays: s.bays, consolidationAfter: s.consolidation.start >= lastUnload,
                  ends: s.consolidation.end === s.total, stretchedTotal: stretched.total / s.total,
                  stretchedFirst: stretched.trucks[0].arrive / s.trucks[0].arrive};
        });""",
    )
    for r in result:
        assert r["maxQueue"] == 0 and r["bays"] >= 1, r
        assert r["consolidationAfter"] and r["ends"], r
        assert abs(r["stretchedTotal"] - 10) < 1e-9 and abs(r["stretchedFirst"] - 10) < 1e-9, r


def test_other_families_and_missing_grids_get_the_generic_drawing(make_page):
    page = make_page()
    kinds = run_module(
        page,
        "dock_painters/index.js",
        """
        return [
          m.sceneKind('baseline', null, 'bwd'), m.sceneKind('other', {programs: 4}, 'bwd'),
          m.sceneKind('atomic', null, 'bwd'), m.sceneKind('atomic', {programs: 4}, 'fwd'),
        ];""",
    )
    assert kinds == ["generic", "generic", "generic", "forward"]


def test_colours_are_stable_and_distinct_for_the_registry(make_page, server):
    page = make_page()
    names = [i["name"] for i in server.get("/api/implementations")] + ["some-new-plugin"]
    result = run_module(
        page,
        "palette.js",
        """
        m.assignColors(arg);
        const first = arg.map((n) => m.colorFor(n));
        m.assignColors(arg);
        const again = arg.map((n) => m.colorFor(n));
        return {first, again};""",
        names,
    )
    assert result["first"] == result["again"]
    assert len(set(result["first"])) == len(names), "two implementations share a colour"
    assert all(c.startswith("#") and len(c) == 7 for c in result["first"])
