// The plots of the speedup and run-vs-run views: one panel per pass, a line per group (implementation, and
// dtype / M / run when those vary) over N on a log₂ axis, and a reference line (1× speedup, 0 % change).

import { colorFor } from "./palette.js";
import { drawSerial, untab } from "./chart_tools.js";
import { xAxisLayout } from "./chart_layout.js";

const PASS_TITLES = { fwd: "Forward", bwd: "Backward (dx and dγ)" };
const DASHES = ["solid", "dash", "dot", "dashdot", "longdash"];
const PLOT_PX = 320;
const BOTTOM_PX = 62; // tick labels and the x-axis title
const uid = (...parts) => parts.join("_").replace(/[^A-Za-z0-9_-]/g, "-");

// groups: [{name, impl, dash, points: [{N, y, hover}]}]; ref: the y of the reference line; yTitle: the axis title.
// title: the panel's title (default "<pass>: <yTitle>"); ref null: no reference line.
export function drawPanel(el, pass, { groups, ref, refName, yTitle, empty, title = null }) {
  const Plotly = window.Plotly;
  if (!Plotly || !el) return;
  const traces = groups.filter((g) => g.points.length).map((g) => {
    const pts = [...g.points].sort((a, b) => a.N - b.N);
    return {
      type: "scatter",
      mode: "lines+markers",
      uid: uid(pass, g.name),
      name: g.name,
      x: pts.map((p) => p.N),
      y: pts.map((p) => p.y),
      text: pts.map((p) => p.hover),
      customdata: pts.map((p) => [g.impl, p.key ?? null, p.N]),
      hovertemplate: "%{text}<extra></extra>",
      line: { color: colorFor(g.impl), dash: DASHES[(g.dash ?? 0) % DASHES.length], width: 2 },
      marker: { color: colorFor(g.impl), size: 7 },
    };
  });
  const xs = traces.flatMap((t) => t.x);
  const data = [...traces];
  if (xs.length && ref != null) {
    data.push({
      type: "scatter", mode: "lines", uid: uid(pass, "ref"), name: refName, x: [Math.min(...xs) / 1.25, Math.max(...xs) * 1.25],
      y: [ref, ref], line: { color: "#555", dash: "dot", width: 1.5 }, hoverinfo: "skip",
    });
  }
  // The legend gets a band of its own under the axis title, as tall as it is drawn (measured, then relaid out).
  const legendKey = `${el.clientWidth}|${data.map((t) => t.name).join("|")}`;
  const legendPx = data.length ? (el._altLegend?.key === legendKey ? el._altLegend.px : 24 * Math.ceil(data.length / 3)) : 0;
  const layout = {
    title: { text: title ?? `${PASS_TITLES[pass]}: ${yTitle}`, font: { size: 14 }, x: 0.01, xanchor: "left" },
    margin: { l: 60, r: 16, t: 48, b: BOTTOM_PX + legendPx },
    height: PLOT_PX + BOTTOM_PX + legendPx,
    xaxis: xAxisLayout("N", xs, el.clientWidth || 600, { names: false }).axis, // level labels, spaced never to collide
    yaxis: { title: { text: yTitle }, zeroline: false, autorange: true },
    showlegend: data.length > 0,
    legend: { orientation: "h", xref: "container", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom", maxheight: 5000, font: { size: 11 } },
    hovermode: "closest",
    paper_bgcolor: "rgba(0,0,0,0)",
    annotations: traces.length ? [] : [{ text: empty, showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5, font: { color: "#666" } }],
  };
  const counts = { traces: String(traces.length), points: String(xs.length) };
  drawSerial(el, () => {
    const plotted = Plotly.react(el, data, layout, { responsive: true, displaylogo: false, modeBarButtons: [["toImage"]] });
    const drawn = el.querySelector(".legend .bg");
    const need = drawn ? Math.ceil(drawn.getBBox().height) + 6 : 0;
    el._altLegend = { key: legendKey, px: need };
    const relaid = data.length && Math.abs(need - legendPx) > 1
      ? Plotly.relayout(el, { "margin.b": BOTTOM_PX + need, height: PLOT_PX + BOTTOM_PX + need }) : null;
    untab(el);
    return Promise.all([plotted, relaid]);
  });
  Object.assign(el.dataset, counts); // the caller reads them at once (what this draw shows, or will once the previous one settles)
}
