// What the dock draws from, as plain functions of a run document (no DOM): the dtype it uses (the chart's
// filter when the run has it), the shapes the run measured (the sliders' only positions unless the user asks
// for the cost model), a measured time, the run's name, and the dock's shape in the page URL (dockM, dockN).

const DTYPE_PREFERENCE = ["bfloat16", "float16", "float32"];
const ALL = "all";

const okRows = (doc) => (doc?.rows ?? []).filter((r) => r.status === "ok" && Number.isFinite(r.median_us));

const byPreference = (a, b) => {
  const ia = DTYPE_PREFERENCE.indexOf(a);
  const ib = DTYPE_PREFERENCE.indexOf(b);
  return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || String(a).localeCompare(String(b));
};

// The dtype the dock uses and why: the chart's filter (`filter`: a dtype or "all") when the run measured
// it in this pass; else the first of bf16, fp16, fp32 it has. Without a run: the filter's, else bf16.
export function chooseDtype(doc, mode, filter) {
  const picked = filter && filter !== ALL ? filter : null;
  const have = [...new Set(okRows(doc).filter((r) => r.pass === mode).map((r) => r.dtype))].sort(byPreference);
  if (!doc || !have.length) {
    return picked ? { dtype: picked, why: "the chart's dtype filter" } : { dtype: "bfloat16", why: "no run: the cost model's element size" };
  }
  if (picked && have.includes(picked)) return { dtype: picked, why: "the chart's dtype filter" };
  if (picked) return { dtype: have[0], why: `the run has no ${mode} rows in ${picked} (the chart's filter)` };
  return { dtype: have[0], why: have.length > 1 ? "the chart shows every dtype; the dock shows one" : "the run's only dtype" };
}

const sortedUnique = (values) => [...new Set(values)].sort((a, b) => a - b);

// The shapes a run measured for this pass and dtype: {Ms, nsAt(M)}. Rows of the implementations shown
// count; when none of them was measured, any implementation's rows do (the lanes then say so).
export function measuredShapes(doc, { mode, dtype, impls }) {
  const rows = okRows(doc).filter((r) => r.pass === mode && r.dtype === dtype);
  const shown = new Set(impls);
  const mine = rows.filter((r) => shown.has(r.impl));
  const use = mine.length ? mine : rows;
  return {
    Ms: sortedUnique(use.map((r) => r.M)),
    nsAt: (M) => sortedUnique(use.filter((r) => r.M === M).map((r) => r.N)),
    allNs: sortedUnique(use.map((r) => r.N)),
  };
}

// The shape measured for the most of the shown implementations (the largest among equals).
export function bestShape(doc, { mode, dtype, impls }) {
  const shown = new Set(impls);
  const count = new Map();
  for (const r of okRows(doc).filter((r) => r.pass === mode && r.dtype === dtype && shown.has(r.impl))) {
    const key = `${r.M}x${r.N}`;
    const c = count.get(key) ?? { M: r.M, N: r.N, impls: new Set() };
    c.impls.add(r.impl);
    count.set(key, c);
  }
  return [...count.values()].sort((a, b) => b.impls.size - a.impls.size || b.M * b.N - a.M * a.N)[0] ?? null;
}

export function measuredUs(doc, { impl, mode, M, N, dtype }) {
  const row = okRows(doc).find((r) => r.impl === impl && r.pass === mode && r.M === M && r.N === N && r.dtype === dtype);
  return row ? { us: row.median_us, dtype: row.dtype } : null;
}

// Index of the value nearest to v on a log scale.
export function nearestIndex(values, v) {
  if (!values.length || !Number.isFinite(v) || v <= 0) return 0;
  let best = 0;
  for (let i = 1; i < values.length; i++) {
    if (Math.abs(Math.log2(values[i] / v)) < Math.abs(Math.log2(values[best] / v))) best = i;
  }
  return best;
}

function shortDate(iso) {
  const d = new Date(iso ?? "");
  return Number.isNaN(d.getTime()) ? "" : `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

// "NVIDIA H200 (cuda) · 2026-12-02 16:13 UTC · <label or file> · run <id>"
export function runName(run) {
  if (!run) return "";
  const device = run.device?.name ?? "unknown device";
  const kind = run.device?.kind ? ` (${run.device.kind})` : "";
  const label = run.label ?? run.source_file ?? run.file_name ?? null;
  return [`${device}${kind}`, shortDate(run.created_at), label, run.run_id ? `run ${run.run_id}` : null].filter(Boolean).join(" · ");
}

// The lanes (implementation names) a run has no measured row of in this pass: they draw from the cost model, or
// stand still, whatever the shape.
export function lanesLacking(doc, mode, lanes) {
  if (!doc) return [];
  const have = new Set(okRows(doc).filter((r) => r.pass === mode).map((r) => r.impl));
  return lanes.filter((name) => !have.has(name));
}

// The stored run for the dock, from GET /api/runs (newest first): of the complete GPU runs, the one that measured
// the most of the lanes (`lanes`: implementation names; a run's measured implementations, any pass, from the
// listing), then one of `preferDevice`, then the newest; null when none measured any lane.
export function dockRunFor(runs, lanes, preferDevice = null) {
  const gpu = (runs ?? []).filter((r) => r.kind === "cuda" && r.complete !== false && (r.counts?.ok ?? 0) > 0);
  const cover = (r) => lanes.filter((l) => (r.implementations ?? []).includes(l)).length;
  let best = null;
  for (const r of gpu) {
    const rank = [cover(r), r.device_name === preferDevice ? 1 : 0];
    if (rank[0] > 0 && (!best || rank[0] > best.rank[0] || (rank[0] === best.rank[0] && rank[1] > best.rank[1]))) best = { r, rank };
  }
  return best?.r ?? null;
}

export const isGpuRun = (doc) => doc?.run?.device?.kind === "cuda";

// The dock's shape in the page URL: {M, N} (either may be null).
export function readUrlShape() {
  const q = new URLSearchParams(window.location.search);
  const num = (v) => (/^\d{1,7}$/.test(v ?? "") && Number(v) > 0 ? Number(v) : null);
  return { M: num(q.get("dockM")), N: num(q.get("dockN")) };
}

// Write dockM and dockN, keeping every other parameter and the hash.
export function writeUrlShape(M, N) {
  const url = new URL(window.location.href);
  url.searchParams.set("dockM", String(M));
  url.searchParams.set("dockN", String(N));
  if (url.href !== window.location.href) history.replaceState(history.state, "", url);
}
