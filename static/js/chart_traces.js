// What one chart panel draws: one line per implementation (split further by run, and by dtype / M when the
// filters say "all"), its error bars the interquartile range (q1..q3; min–max in the hover); rows the
// correctness gate marked `wrong` as hollow markers of their own (never a line, never best); a ★ over the
// fastest measured implementation of each shape; an outlined marker where the host time exceeds the GPU
// time ("CPU-bound here"); the copy-ceiling line per run.

import { colorFor, symbolFor } from "./palette.js";
import { modelNames } from "./model_names.js";

export const VIEWS = {
  GBps: { title: "effective bandwidth (GB/s)", y: (r) => r.GBps },
  pct: { title: "% of the measured copy ceiling", y: (r) => r.pct_of_ceiling },
  latency: { title: "median latency (µs)", y: (r) => r.median_us },
};
export const DASHES = ["solid", "dash", "dot", "dashdot", "longdash"];
export const ALL = "all";

// Timed rows: measured ("ok") or measured and then failed the correctness gate ("wrong").
export const timed = (r) => (r.status === "ok" || r.status === "wrong") && Number.isFinite(r.median_us);
// A row whose host (launch) time exceeds its GPU time: the GPU waits on the CPU at this shape.
export const cpuBound = (r) => r.mode === "cuda" && Number.isFinite(r.host_us) && Number.isFinite(r.median_us)
  && r.host_us > r.median_us;

// Plotly uses a trace's uid in CSS selectors: keep it to safe characters.
const uid = (...parts) => parts.join("_").replace(/[^A-Za-z0-9_-]/g, "-");
const num = (v, d = 2) => (v == null || !Number.isFinite(v) ? "–" : Number(v).toFixed(d));
const esc = (s) => String(s ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const shapeKey = (si, r) => `${si}|${r.dtype}|${r.M}|${r.N}`;

// Per run and shape of this pass, the fastest row that is "ok" (a wrong row is never best).
export function bestRows(sources, pass, keep) {
  const best = new Map();
  sources.forEach((s, si) => {
    for (const r of s.rows) {
      if (r.pass !== pass || r.status !== "ok" || !Number.isFinite(r.median_us) || !keep(r)) continue;
      const k = shapeKey(si, r);
      if (!best.has(k) || r.median_us < best.get(k).median_us) best.set(k, r);
    }
  });
  return best;
}

// The dimension a line runs along (the x axis: "N" or "M") and the one that tells lines apart.
export const otherDim = (x) => (x === "M" ? "N" : "M");

// Trace groups: one per (run, impl, dtype, the other dimension) among the timed rows the filters let through; names
// only mention what varies among those.
function groups(sources, pass, keep, x) {
  const other = otherDim(x);
  const shown = sources.flatMap((s) => s.rows.filter((r) => timed(r) && keep(r)));
  const dtypes = [...new Set(shown.map((r) => r.dtype))];
  const others = [...new Set(shown.map((r) => r[other]))];
  const out = new Map();
  sources.forEach((s, si) => {
    for (const r of s.rows) {
      if (r.pass !== pass || !timed(r) || !keep(r)) continue;
      const key = `${si}|${r.impl}|${r.dtype}|${r[other]}`;
      if (!out.has(key)) {
        const parts = [r.impl];
        if (dtypes.length > 1) parts.push(r.dtype);
        if (others.length > 1) parts.push(`${other}=${r[other]}`);
        if (sources.length > 1) parts.push(`[${s.label}]`);
        out.set(key, { si, impl: r.impl, dtype: r.dtype, M: r.M, N: r.N, name: parts.join(" · "), rows: [],
          dashIndex: si * Math.max(1, dtypes.length) + Math.max(0, dtypes.indexOf(r.dtype)) });
      }
      out.get(key).rows.push(r);
    }
  });
  return [...out.values()];
}

// The IQR as error bars in the view's units (GB/s and % are inverse to time: q1 gives the upper end).
function iqrBars(rows, y, view) {
  const plus = rows.map((r, i) => {
    if (!Number.isFinite(r.q1_us) || !Number.isFinite(r.q3_us)) return 0;
    return view === "latency" ? r.q3_us - r.median_us : r.q1_us > 0 ? y[i] * (r.median_us / r.q1_us) - y[i] : 0;
  });
  const minus = rows.map((r, i) => {
    if (!Number.isFinite(r.q1_us) || !Number.isFinite(r.q3_us)) return 0;
    return view === "latency" ? r.median_us - r.q1_us : r.q3_us > 0 ? y[i] - y[i] * (r.median_us / r.q3_us) : 0;
  });
  return { plus: plus.map((v) => Math.max(0, v)), minus: minus.map((v) => Math.max(0, v)) };
}

// Bytes as MiB, three significant digits.
export const mib = (bytes) => { const v = bytes / 2 ** 20; return v >= 100 ? v.toFixed(0) : v.toPrecision(3); };

function note(r, isBest) {
  const out = [];
  if (r.status === "wrong") out.push(`wrong: ${esc(r.reason || "off the fp64 reference")} (never ranked)`);
  if (Number.isFinite(r.host_us)) {
    out.push(cpuBound(r) ? `host ${num(r.host_us, 1)} µs > GPU ${num(r.median_us, 1)} µs: CPU-bound here`
      : `host ${num(r.host_us, 1)} µs`);
  }
  if (Array.isArray(r.round_medians_us) && r.round_medians_us.length > 1) {
    out.push(`median of ${r.round_medians_us.length} interleaved rounds: ${r.round_medians_us.map((v) => num(v, 1)).join(", ")} µs`);
  }
  if (Number.isFinite(r.device_mallocs) && r.device_mallocs > 0) {
    out.push(`${r.device_mallocs} cudaMalloc in the timed calls: the median may hold allocation time`);
  }
  if (Number.isFinite(r.peak_bytes)) out.push(`peak memory of the pass ${mib(r.peak_bytes)} MiB (outputs and temporaries)`);
  if (r.verified === false && r.status !== "wrong") out.push("failed verification");
  else if (r.verified == null && r.status === "ok") out.push("not verified");
  if (isBest) out.push("★ best at this shape");
  const models = modelNames(r.N);
  if (models.length) out.push(`models with N = ${r.N}: ${esc(models.join(", "))}`);
  return out.length ? `<br>${out.join("<br>")}` : "";
}

// {traces, xs, best: [{row, y, color}], entries (for the CSV), cpuBoundCount, wrongCount}
export function panelTraces({ sources, pass, keep, view, scheme, ink, x = "N" }) {
  const V = VIEWS[view];
  const best = bestRows(sources, pass, keep);
  const bestSet = new Set(best.values());
  const traces = [];
  const entries = [];
  let xs = [];
  let cpuBoundCount = 0;
  let wrongCount = 0;
  for (const g of groups(sources, pass, keep, x)) {
    const src = sources[g.si];
    const color = colorFor(g.impl, scheme);
    const symbol = symbolFor(g.impl);
    const sorted = [...g.rows].sort((a, b) => a[x] - b[x]);
    for (const kind of ["ok", "wrong"]) {
      const rows = sorted.filter((r) => r.status === kind);
      if (!rows.length) continue;
      const y = rows.map(V.y);
      const bars = iqrBars(rows, y, view);
      const bound = rows.map(cpuBound);
      xs = xs.concat(rows.map((r) => r[x]));
      rows.forEach((r, i) => entries.push({ pass, run: src.label, row: r, value: y[i], best: bestSet.has(r), cpuBound: bound[i] }));
      const customdata = rows.map((r) => [
        r.impl, r.M, r.N, r.dtype, r.median_us, r.min_us, r.max_us, r.GBps, r.pct_of_ceiling, src.label,
        num(r.q1_us), num(r.q3_us), note(r, bestSet.has(r)), r.status,
      ]);
      const hovertemplate =
        "%{customdata[0]} · %{customdata[9]}<br>M=%{customdata[1]}  N=%{customdata[2]}  %{customdata[3]}" +
        "<br>median %{customdata[4]:.2f} µs · IQR %{customdata[10]} – %{customdata[11]} µs" +
        "<br>min–max %{customdata[5]:.2f} – %{customdata[6]:.2f} µs" +
        "<br>%{customdata[7]:.1f} GB/s · %{customdata[8]:.1f}% of ceiling%{customdata[12]}<extra></extra>";
      const error_y = { type: "data", symmetric: false, array: bars.plus, arrayminus: bars.minus, thickness: 1, width: 3, color };
      if (kind === "ok") {
        cpuBoundCount += bound.filter(Boolean).length;
        traces.push({
          type: "scatter", mode: "lines+markers", uid: uid(pass, src.key, g.impl, g.dtype, x, g[otherDim(x)]), name: g.name,
          legendgroup: g.impl, meta: { kind: "measured", impl: g.impl }, x: rows.map((r) => r[x]), y, error_y,
          line: { color, dash: DASHES[g.dashIndex % DASHES.length], width: 2 },
          marker: { color, symbol, size: bound.map((b) => (b ? 10 : 8)),
            line: { color: ink, width: bound.map((b) => (b ? 2 : 0)) } },
          customdata, hovertemplate,
        });
      } else {
        wrongCount += rows.length;
        traces.push({
          type: "scatter", mode: "markers", uid: uid(pass, src.key, g.impl, g.dtype, x, g[otherDim(x)], "wrong"),
          name: `${g.name} · wrong`, legendgroup: g.impl, meta: { kind: "wrong", impl: g.impl },
          x: rows.map((r) => r[x]), y, error_y: { ...error_y, visible: false },
          marker: { color, symbol: `${symbol}-open`, size: 11, line: { color, width: 2 } },
          customdata, hovertemplate,
        });
      }
    }
  }
  const stars = [...best.values()].map((row) => ({ row, x: row[x], y: V.y(row), color: colorFor(row.impl, scheme) }));
  return { traces, xs, best: stars, entries, cpuBoundCount, wrongCount };
}

// ★ over each shape's best row: one text trace. Plotly lays out each annotation on its own (72 of them were half of a
// panel's first draw, issue 35); a trace's text is drawn in one pass. No customdata: what reads the measured points
// (CSV, hovers, tests) picks the traces that have it.
export function starTrace(best) {
  const on = best.filter((b) => Number.isFinite(b.y) && b.y > 0);
  if (!on.length) return [];
  return [{
    type: "scatter", mode: "text", uid: "stars", name: "★ fastest", showlegend: false, hoverinfo: "skip", cliponaxis: false,
    x: on.map((b) => b.x ?? b.row.N), y: on.map((b) => b.y), text: on.map(() => "★"), textposition: "top center",
    textfont: { size: 15, color: on.map((b) => b.color) },
    meta: { kind: "stars", best: on.map((b) => `${b.row.impl}|${b.row.dtype}|${b.row.M}|${b.row.N}`) },
  }];
}

export function ceilingTraces(sources, view, xs, color) {
  if (view === "latency" || xs.length === 0) return [];
  const lo = Math.min(...xs) / 1.25;
  const hi = Math.max(...xs) * 1.25;
  const out = [];
  sources.forEach((s, si) => {
    const c = s.header?.ceiling_GBps;
    if (!Number.isFinite(c)) return;
    const yv = view === "pct" ? 100 : c;
    const who = sources.length > 1 ? ` [${s.label}]` : "";
    out.push({
      type: "scatter", mode: "lines", uid: uid("ceiling", s.key), name: `copy ceiling ${num(c, 1)} GB/s${who}`,
      meta: { kind: "ceiling" }, x: [lo, hi], y: [yv, yv], line: { color, dash: DASHES[(si + 1) % DASHES.length], width: 1.5 },
      hovertemplate: `measured copy ceiling: ${num(c, 1)} GB/s${who}<extra></extra>`,
    });
  });
  return out;
}
