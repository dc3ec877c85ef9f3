// The layout of one metric panel (charts.js draws it): the title under the mode bar (wrapped on a phone), the
// legend in a band of its own below the x-axis title (sized for its wrapped rows), the x axis (N with model names,
// or M) with labels that never collide, the y axis (linear from zero, or log with 1-2-5 ticks; kept readable when
// the copy ceiling is far above every point), and the notes (the ★ are a trace: chart_traces.starTrace).

import { VIEWS } from "./chart_traces.js";
import { themedLayout } from "./chart_theme.js";
import { logTicks, powersOfTwo, tickText } from "./chart_labels.js";
import { modelNames, nTicks, tickLabels } from "./model_names.js";

const PASS_TITLES = { fwd: "Forward", bwd: "Backward (dx and dγ)" };
const fmt = (v, digits = 1) => (v == null || !Number.isFinite(v) ? "–" : Number(v).toFixed(digits));

// The legend sits below the axis title, in a band of its own sized for its entries.
export const LEGEND_GAP_PX = 6;
const PLOT_PX = 320;
const SIDES_PX = 76; // margin.l + margin.r
export const X_TITLES = { N: "N (hidden size, log₂ axis)", M: "M (rows, log₂ axis)" };
const BOTTOM_PX = 62; // tick labels and the x-axis title
// The mode bar takes the top band of a panel; the title sits under it (never covered), wrapped on a phone.
const MODEBAR_PX = 30;
const TITLE_LINE_PX = 19;

// The legend band as plotly lays it out: entries of one legendgroup stacked in a column as wide as the widest
// (the symbol's 40 px and the name, measured in the legend's font), columns placed left to right and wrapped at the
// panel's width, rows ENTRY_PX tall and TRACEGROUP_GAP_PX apart once any trace has a group, a 10 px frame. Close
// enough that the first draw needs no second layout (each cost 0.1-0.2 s on the first look, issue 35); drawn
// wrong, it is measured and redrawn (charts.js).
const ENTRY_PX = 19;
const TRACEGROUP_GAP_PX = 10; // plotly's legend.tracegroupgap default
// A row's pitch: a band this much too tall is kept (the guess errs on the tall side), one too short is redrawn.
export const LEGEND_ROW_PX = ENTRY_PX + TRACEGROUP_GAP_PX;
const ENTRY_SYMBOL_PX = 40;
const COLUMN_GAP_PX = 10;
const LEGEND_FRAME_PX = 10;
const LEGEND_FONT = "11px \"Open Sans\", verdana, arial, sans-serif";
let measureCanvas = null;
function textWidth(text) {
  measureCanvas ??= document.createElement("canvas").getContext("2d");
  measureCanvas.font = LEGEND_FONT;
  return measureCanvas.measureText(text).width;
}

export function guessLegendPx(data, width, measure = textWidth) {
  const columns = new Map();
  for (const t of data) {
    if (t.showlegend === false) continue;
    const key = t.legendgroup ? `g:${t.legendgroup}` : `t:${columns.size}`;
    if (!columns.has(key)) columns.set(key, []);
    columns.get(key).push(ENTRY_SYMBOL_PX + measure(t.name ?? ""));
  }
  if (!columns.size) return 0;
  const gap = data.some((t) => t.legendgroup && t.showlegend !== false) ? TRACEGROUP_GAP_PX : 0;
  let height = 0;
  let rowPx = 0;
  let used = 0;
  for (const entries of columns.values()) {
    const w = Math.max(...entries) + COLUMN_GAP_PX;
    if (used > 0 && used + w > width) {
      height += rowPx + gap;
      used = 0;
      rowPx = 0;
    }
    used += w;
    rowPx = Math.max(rowPx, entries.length * ENTRY_PX);
  }
  return height + rowPx + LEGEND_FRAME_PX + LEGEND_GAP_PX;
}

// The title under the mode bar; split at its colon when it would not fit on one line (about 7.5 px a
// character at 14 px).
function panelTitle(pass, view, logY, width) {
  const one = `${PASS_TITLES[pass]}: ${VIEWS[view].title}${logY ? " (log y)" : ""}`;
  const lines = one.length * 7.5 > width - 24 ? one.replace(": ", ":<br>") : one;
  return { text: lines, count: lines.includes("<br>") ? 2 : 1 };
}

// The margin and height for a legend band of legendPx (the first draw's guess, or what plotly drew).
export function legendBand({ named, topPx }, legendPx) {
  return { "margin.b": BOTTOM_PX + named + legendPx, height: PLOT_PX + BOTTOM_PX + named + legendPx + topPx - 48 };
}

// The x axis over the values drawn (xs, of dimension x: "N" or "M"): the range the lines span (the ceiling lines
// reach 1.25× beyond), ticks at the powers of two and (N) the model widths, their texts spaced to never collide.
export function xAxisLayout(x, xs, width, { names = true } = {}) {
  const lo = xs.length ? Math.min(...xs) / 1.25 : 200;
  const hi = xs.length ? Math.max(...xs) * 1.25 : 20000;
  const powers = powersOfTwo(lo * 1.25, hi / 1.25);
  const ticks = x === "N" ? nTicks(xs, powers) : [...new Set([...powers, ...xs])].sort((a, b) => a - b);
  const slanted = names && x === "N" && ticks.some((t) => modelNames(t).length);
  const pxPerOctave = Math.max(1, width - SIDES_PX) / Math.log2(hi / lo);
  return {
    slanted,
    axis: { title: { text: X_TITLES[x] }, type: "log", range: [Math.log10(lo), Math.log10(hi)], autorange: false,
      tickvals: ticks, ticktext: tickLabels(ticks, tickText, pxPerOctave, { drawn: new Set(xs), slanted }),
      tickangle: slanted ? -40 : 0, tickfont: { size: slanted ? 10 : 12 }, zeroline: false },
  };
}

// The plotly layout of one panel. traces: the measured traces, ceilings: the copy-ceiling lines, xs: the values
// drawn along x ("N" or "M"); legendPx: the legend band's height; revision: what keeps the
// user's zoom (uirevision). Returns {layout, band} (band: what legendBand needs to resize the legend's band).
export function panelLayout({ pass, view, logY, width, traces, ceilings, xs, theme, legendPx, revision, x = "N" }) {
  const data = [...traces, ...ceilings];
  const xaxis = xAxisLayout(x, xs, width);
  const named = xaxis.slanted ? 78 : 0; // slanted ticks with a model name
  // A ceiling far above every point (small CPU shapes) would flatten them: keep the points
  // readable and say where the ceiling is.
  const ys = traces.flatMap((t) => t.y.map((y, i) => y + (t.error_y.array[i] || 0))).filter(Number.isFinite);
  const top = ys.length ? Math.max(...ys) : 0;
  const levels = ceilings.map((t) => t.y[0]);
  const offScale = !logY && view !== "latency" && top > 0 && levels.length && Math.min(...levels) > 4 * top;
  const notes = [];
  if (!traces.length) {
    notes.push({ text: `no ${pass === "fwd" ? "forward" : "backward"} results`, showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5, font: { color: theme.muted } });
  } else if (offScale) {
    const c = view === "pct" ? "100%" : `${fmt(Math.min(...levels))} GB/s`;
    notes.push({ text: `↑ copy ceiling ${c}: far above these points`, showarrow: false, xref: "paper", yref: "paper", x: 1, y: 1, xanchor: "right", yanchor: "bottom", font: { color: theme.muted, size: 11 } });
  }
  const title = panelTitle(pass, view, logY, width);
  // plotly anchors a title's first line: a second line takes the band's extra height above it.
  const padTop = MODEBAR_PX + (title.count - 1) * TITLE_LINE_PX;
  const topPx = padTop + title.count * TITLE_LINE_PX + 10;
  const band = { named, topPx };
  const sized = legendBand(band, legendPx);
  const yaxis = { title: { text: VIEWS[view].title }, zeroline: false };
  if (logY) Object.assign(yaxis, { type: "log", autorange: true, ...logTicks(data.flatMap((t) => t.y)) });
  else Object.assign(yaxis, { type: "linear", rangemode: "tozero", ...(offScale ? { range: [0, top * 1.15], autorange: false } : { autorange: true }) });
  const layout = themedLayout(theme, {
    title: { text: title.text, font: { size: 14 }, x: 0.01, xanchor: "left", yref: "container", y: 1, yanchor: "top", pad: { t: padTop } },
    margin: { l: 60, r: 16, t: topPx, b: sized["margin.b"] },
    height: sized.height,
    xaxis: xaxis.axis,
    yaxis,
    showlegend: data.length > 0,
    legend: { orientation: "h", xref: "container", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom", maxheight: 5000, font: { size: 11 } },
    hovermode: "closest",
    annotations: notes,
    uirevision: revision,
  });
  return { layout, band };
}
