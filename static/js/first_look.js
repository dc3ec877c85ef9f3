// What the page opens with (issues 17, 35): the runs a URL names, else the first look (firstLookRuns: the newest
// complete run of both passes of the newest GPU device, or its forward and backward runs of one session); and a
// live run drawn over the stored run that was open (its baseline), at the live sweep's shapes, every M shown.

import { getRun } from "./api.js";
import { dockRunFor } from "./dock_data.js";
import { readUrlState } from "./url_state.js";

const has = (r, p) => (r.passes ?? []).includes(p);
const bothPasses = (r) => has(r, "fwd") && has(r, "bwd");
const onlyPass = (r, p) => (r.passes ?? []).length === 1 && has(r, p);
const day = (r) => String(r.created_at ?? "").slice(0, 10);
const newer = (a, b) => (String(a.created_at ?? "") > String(b.created_at ?? "") ? a : b);

// The runs a first visit opens, from the listing of GET /api/runs (newest first), the first opened, the second
// (if any) overlaid:
// 1. the GPU runs with a measured row; of them the complete ones (not cut short), when there are any;
// 2. the newest GPU device: the device of the newest of those; only its runs go on;
// 3. candidates: each run that measured both passes; and each backward-only run paired with the newest
//    forward-only run of the same commit and day (one session's two files: backward first, the dock's pass);
//    when there is no candidate, each run alone (a device with runs of one pass only);
// 4. of the candidates of the newest day (a candidate's day: its newest run's UTC date), the one with the most
//    implementations, then the most measured rows, then the newest (a day's thin side run, e.g. one
//    implementation re-measured, does not hide its full comparison); a full tie keeps the first built.
// [] when no GPU run is stored. first_look_rule.py (the tests) mirrors this.
export function firstLookRuns(runs) {
  const gpu = (runs ?? []).filter((r) => r.kind === "cuda" && (r.counts?.ok ?? 0) > 0);
  if (!gpu.length) return [];
  const complete = gpu.filter((r) => r.complete !== false);
  const pool = complete.length ? complete : gpu;
  const device = pool.reduce(newer).device_name;
  const mine = pool.filter((r) => r.device_name === device);
  let units = mine.filter(bothPasses).map((r) => [r]);
  for (const b of mine.filter((r) => onlyPass(r, "bwd"))) {
    const fwd = mine.filter((f) => onlyPass(f, "fwd") && f.git_commit === b.git_commit && day(f) === day(b));
    if (fwd.length) units.push([b, fwd.reduce(newer)]);
  }
  if (!units.length) units = mine.map((r) => [r]);
  const unitDay = (u) => day(u.reduce(newer));
  const newestDay = units.map(unitDay).reduce((a, b) => (b > a ? b : a));
  const rank = (u) => [new Set(u.flatMap((r) => r.implementations ?? [])).size,
    u.reduce((n, r) => n + (r.counts?.ok ?? 0), 0), String(u.reduce(newer).created_at ?? "")];
  const better = (a, b) => {
    const [x, y] = [rank(a), rank(b)];
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] > y[i];
    return false;
  };
  return units.filter((u) => unitDay(u) === newestDay).reduce((best, u) => (better(u, best) ? u : best));
}

// The first of them (the run the table, the summary line and the dock start with); null when none.
export const firstLookRun = (runs) => firstLookRuns(runs)[0] ?? null;

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
