// What the page opens with (issue 17): the runs a URL names, else the first-look run (firstLookRun: the broadest
// GPU run of the newest day that measured both passes); and a live run drawn over the stored run that was open (its baseline), at the live
// sweep's shapes, every M shown.

import { readUrlState } from "./url_state.js";

const bothPasses = (r) => ["fwd", "bwd"].every((p) => (r.passes ?? []).includes(p));

// The run a first visit opens, from the listing of GET /api/runs (newest first): the GPU runs with a measured row;
// of them those that measured both passes, when there are any (a run of one pass, e.g. a forward-only sweep, never
// hides a full comparison); of those the ones of the newest day (the UTC date of created_at), so a side run of an
// older day never hides today's; of that day's the one with the most implementations, then the most measured rows,
// then the newest (a day's thin side run, e.g. one implementation re-measured, does not hide its full comparison).
// null when no GPU run is stored.
export function firstLookRun(runs) {
  const measured = (runs ?? []).filter((r) => r.kind === "cuda" && (r.counts?.ok ?? 0) > 0);
  if (!measured.length) return null;
  const full = measured.filter(bothPasses);
  const gpu = full.length ? full : measured;
  const day = (r) => String(r.created_at ?? "").slice(0, 10);
  const newest = gpu.map(day).reduce((a, b) => (b > a ? b : a));
  const rank = (r) => [(r.implementations ?? []).length, r.counts.ok, String(r.created_at ?? "")];
  const better = (a, b) => {
    const [x, y] = [rank(a), rank(b)];
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] > y[i];
    return false; // a tie keeps the one listed first (the newest stored)
  };
  return gpu.filter((r) => day(r) === newest).reduce((best, r) => (better(r, best) ? r : best));
}

// history: the History table (runs listing, open(id, {overlay})); views: the Views (apply(state)).
export async function openFirstLook({ history, views }) {
  const state = readUrlState();
  let opened = 0;
  for (const id of state.runs) {
    const doc = await history.open(id, { overlay: opened > 0 });
    if (doc) opened++;
  }
  if (!opened) {
    const first = firstLookRun(history.runs);
    if (first) await history.open(first.run_id);
  }
  views.apply(state);
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
