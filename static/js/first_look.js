// What the page opens with (issues 17, 35): the runs a URL names, else the first look (firstLookRuns); and a live run
// drawn over the stored run that was open (its baseline), at the live sweep's shapes, every M shown.

import { getRun } from "./api.js";
import { dockRunFor } from "./dock_data.js";
import { readUrlState } from "./url_state.js";

// The first look's run ids, chosen by the service from its listing (app/first_look.py: the newest complete run of
// both passes of the newest GPU device, or its forward and backward runs of one session) and named in the page, which
// preloads them; the listings of those runs in `runs` (GET /api/runs), the first opened, the second overlaid.
export function firstLookRuns(runs) {
  const ids = (document.querySelector('meta[name="first-look"]')?.content ?? "").split(" ").filter(Boolean);
  return ids.map((id) => (runs ?? []).find((r) => r.run_id === id)).filter(Boolean);
}

// After the next frame is painted.
const painted = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));

// history: the History table (runs listing, open(id, {overlay}), nameOf(id)); views: the Views (apply(state));
// dock: the Dock (drawableLanes(), measured, setMeasured(doc, name)).
export async function openFirstLook({ history, views, dock }) {
  const state = readUrlState();
  let opened = 0;
  for (const id of state.runs) {
    const doc = await history.open(id, { overlay: opened > 0 });
    if (doc) opened++;
  }
  if (!opened) {
    const first = firstLookRuns(history.runs);
    // Both runs asked for at once: the second arrives while the first is drawn.
    const fetched = first.map((run) => getRun(run.run_id));
    for (const f of fetched) f.catch(() => {}); // each failure is reported by its own open
    for (const [i, run] of first.entries()) {
      if (i > 0) await painted(); // the first run's charts are on screen before the second's draw holds the page
      await history.open(run.run_id, { overlay: i > 0, fetched: fetched[i] });
    }
    if (first.length && dock) await dockOnItsLanes(history, dock, first[0]);
  }
  views.apply(state);
}

// The dock on a run that measured its lanes: the first look's run when it measured every lane it can draw, else the
// stored run that measured the most of them (dockRunFor); the dock's source line names the lanes its run lacks.
async function dockOnItsLanes(history, dock, first) {
  const lanes = dock.drawableLanes("bwd");
  const cover = (r) => lanes.filter((l) => (r.implementations ?? []).includes(l)).length;
  const pick = dockRunFor(history.runs, lanes, first.device_name);
  if (!pick || pick.run_id === first.run_id || cover(pick) <= cover(first)) return;
  try {
    dock.setMeasured(await getRun(pick.run_id), history.nameOf(pick.run_id));
  } catch { /* the dock keeps the first look's run, and says which lanes it lacks */ }
}

const inSweep = (sweep, r) => (!sweep?.implementations || sweep.implementations.includes(r.impl))
  && (!sweep?.passes || sweep.passes.includes(r.pass)) && (!sweep?.dtypes || sweep.dtypes.includes(r.dtype))
  && (!sweep?.M || sweep.M.includes(r.M)) && (!sweep?.N || sweep.N.includes(r.N));

// charts: the Charts (sources, startLive, scheduleRender). The stored run shown first stays as the live run's
// baseline, cut to the shapes and implementations the sweep measures; the M filter starts at "all".
export function startLiveOverBaseline(charts, runId, sweep) {
  const stored = charts.sources.find((s) => !s.live && !s.baseline) ?? charts.sources.find((s) => s.baseline);
  charts.startLive(runId);
  if (stored) {
    const all = stored.allRows ?? stored.rows;
    const rows = all.filter((r) => inSweep(sweep, r));
    charts.baselineNote = rows.some((r) => r.status === "ok")
      ? null : `The open run (${stored.label}) measured none of this sweep's shapes: the live run is drawn alone.`;
    if (!charts.baselineNote) {
      charts.sources.push({ ...stored, label: stored.label.startsWith("baseline") ? stored.label : `baseline ${stored.label}`,
        rows, allRows: all, baseline: true });
    }
  }
  charts.picked = { dtype: null, M: "all" };
  charts.scheduleRender();
}

// The header names the sweep as the service resolved it: cut the baseline again to it.
export function refineBaseline(charts, sweep) {
  const base = charts.sources.find((s) => s.baseline);
  if (!base || !sweep) return;
  base.rows = base.allRows.filter((r) => inSweep(sweep, r));
  charts.scheduleRender();
}
