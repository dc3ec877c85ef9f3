// What the page opens with (issue 17): the runs a URL names, else the newest stored GPU run; and a live run
// drawn over the stored run that was open (its baseline), at the live sweep's shapes, every M shown.

import { readUrlState } from "./url_state.js";

// history: the History table (runs listing, open(id, {overlay})); views: the Views (apply(state)).
export async function openFirstLook({ history, views }) {
  const state = readUrlState();
  let opened = 0;
  for (const id of state.runs) {
    const doc = await history.open(id, { overlay: opened > 0 });
    if (doc) opened++;
  }
  if (!opened) {
    const gpu = (history.runs ?? []).find((r) => r.kind === "cuda" && r.rows > 0);
    if (gpu) await history.open(gpu.run_id);
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
