// The kernel breakdown of one shape (rows measured with "profile": true): a stacked bar per implementation,
// one segment per kernel (its median time), then the GPU's idle gap inside one call; the host time of a call
// as a marker beside it. Drawn for the shape picked by clicking a point (default: the first profiled one).

import { colorFor } from "./palette.js";
import { drawSerial, modeBarConfig, untab } from "./chart_tools.js";
import { themedLayout } from "./chart_theme.js";

const hasProfile = (r) => Array.isArray(r.profile?.kernels) && r.profile.kernels.length > 0;
const sameShape = (a, b) => a && b && a.pass === b.pass && a.dtype === b.dtype && a.M === b.M && a.N === b.N;
const esc = (s) => String(s ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

export function profiledRows(sources, keep) {
  return sources.flatMap((s) => s.rows.filter((r) => hasProfile(r) && keep(r)).map((r) => ({ ...r, _run: s.label })));
}

// The shape to show: the one picked while it has profiled rows under the filters, else the first such.
export function pickShape(rows, wanted) {
  if (wanted && rows.some((r) => sameShape(r, wanted))) return wanted;
  const r = rows.find((x) => x.pass === "bwd") ?? rows[0];
  return r ? { pass: r.pass, dtype: r.dtype, M: r.M, N: r.N } : null;
}

export function drawProfile({ el, caption, rows, shape, scheme, theme, multiRun, onCsv }) {
  const Plotly = window.Plotly;
  const at = rows.filter((r) => sameShape(r, shape));
  el.hidden = caption.hidden = !at.length;
  if (!at.length || !Plotly) return;
  // A CPU profile has operators, not kernels, and its gap is host time outside them: no GPU is involved.
  const cpu = at.every((r) => r.profile.source === "cpu");
  const unit = cpu ? "CPU operator" : "kernel";
  const gapWords = cpu ? "host time outside the operators (Python around them)" : "idle gap between kernels";
  const label = (r) => (multiRun ? `${r.impl} [${r._run}]` : r.impl);
  const names = at.map(label);
  const traces = [];
  at.forEach((r, i) => {
    const color = colorFor(r.impl, scheme);
    const kernels = r.profile.kernels;
    kernels.forEach((k, j) => {
      traces.push({
        type: "bar", x: [names[i]], y: [k.median_us], name: k.name, showlegend: false,
        meta: { kind: "kernel", impl: r.impl, kernel: k.name },
        marker: { color, opacity: 1 - (0.55 * j) / Math.max(1, kernels.length), line: { color: theme.plotBg, width: 1 } },
        text: [k.name.length > 28 ? `${k.name.slice(0, 26)}…` : k.name], textposition: "inside", insidetextanchor: "middle",
        textfont: { size: 10 },
        hovertemplate: `${esc(r.impl)}<br>${unit} ${esc(k.name)}<br>${(k.median_us ?? 0).toFixed(2)} µs` +
          `${k.calls > 1 ? ` (${k.calls} launches)` : ""}<extra></extra>`,
      });
    });
    if (Number.isFinite(r.profile.gap_us) && r.profile.gap_us > 0) {
      traces.push({
        type: "bar", x: [names[i]], y: [r.profile.gap_us], name: "gap", showlegend: false, meta: { kind: "gap", impl: r.impl },
        marker: { color: "rgba(0,0,0,0)", line: { color: theme.muted, width: 1 }, pattern: { shape: "/", fgcolor: theme.muted } },
        hovertemplate: `${esc(r.impl)}<br>${gapWords} ${r.profile.gap_us.toFixed(2)} µs<extra></extra>`,
      });
    }
  });
  const hosts = at.filter((r) => Number.isFinite(r.profile.host_us));
  if (hosts.length) {
    traces.push({
      type: "scatter", mode: "markers", x: hosts.map(label), y: hosts.map((r) => r.profile.host_us), name: "host time",
      meta: { kind: "host" }, marker: { symbol: "line-ew", size: 28, line: { color: theme.ink, width: 3 } },
      hovertemplate: "host time of one call: %{y:.2f} µs<extra></extra>", showlegend: true,
    });
  }
  // The call's GPU span (time some kernel ran, overlaps once, plus the idle gaps): where kernels overlap (a column
  // sum launched with programmatic dependent launch) the stack of their times stands above it.
  const spans = at.filter((r) => r.profile.source === "cuda" && Number.isFinite(r.profile.busy_us) && Number.isFinite(r.profile.gap_us));
  if (spans.length) {
    traces.push({
      type: "scatter", mode: "markers", x: spans.map(label), y: spans.map((r) => r.profile.busy_us + r.profile.gap_us),
      name: "GPU span", meta: { kind: "span" }, marker: { symbol: "diamond-wide", size: 12, color: theme.ink },
      hovertemplate: "GPU span of one call (first kernel start to last end, overlaps counted once): %{y:.2f} µs<extra></extra>",
      showlegend: true,
    });
  }
  const title = `${cpu ? "CPU-operator" : "Kernel"} breakdown, ${shape.pass} ${shape.dtype} M=${shape.M} N=${shape.N}` +
    (cpu ? " (a CPU profile: no GPU kernels)" : "");
  caption.textContent = `${title}. Each segment is one ${unit}'s median time${cpu ? " (inclusive of the operators it calls)" : ""};` +
    ` hatched: ${cpu ? "the host time no operator covers" : "the GPU idle between them"};` +
    ` the bar: host time of one call${spans.length ? "; ◆: the GPU span of one call (overlapping kernels stack above it)" : ""}.` +
    " Click a point in the charts above to pick another shape.";
  const layout = themedLayout(theme, {
    barmode: "stack", height: 300, margin: { l: 60, r: 16, t: 40, b: 70 },
    title: { text: title, font: { size: 13 }, x: 0.01, xanchor: "left", yref: "container", y: 1, yanchor: "top", pad: { t: 30 } },
    yaxis: { title: { text: "µs per call" }, rangemode: "tozero" }, xaxis: { type: "category" },
    showlegend: false, hovermode: "closest", uirevision: title,
  });
  layout.margin.t = 62;
  const config = modeBarConfig({ filename: "rmsnorm-kernel-breakdown", onCsv });
  drawSerial(el, () => {
    const plotted = Plotly.react(el, traces, layout, config);
    untab(el);
    return plotted;
  });
  el.dataset.impls = String(at.length);
}
