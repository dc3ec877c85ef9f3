// The plotly charts: forward and backward panels, one trace per implementation (split further by
// run, and by dtype / M when the filters say "all"), a horizontal line at the measured copy ceiling,
// three views (effective GB/s, % of ceiling, latency). Rows can arrive one at a time while a run streams.
// The dtype and M filters default to one dtype and one M (the first dtype and the largest M of a stored
// run; those of the first rows received while a run streams), so each panel has one trace per implementation.

import { colorFor } from "./palette.js";

const DASHES = ["solid", "dash", "dot", "dashdot", "longdash"];
const SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x"];
const VIEWS = {
  GBps: { title: "effective bandwidth (GB/s)", y: (r) => r.GBps },
  pct: { title: "% of the measured copy ceiling", y: (r) => r.pct_of_ceiling },
  latency: { title: "median latency (µs)", y: (r) => r.median_us },
};
const PASS_TITLES = { fwd: "Forward", bwd: "Backward (dx and dγ)" };

// Plotly uses a trace's uid in CSS selectors: keep it to safe characters.
const uid = (...parts) => parts.join("_").replace(/[^A-Za-z0-9_-]/g, "-");
const fmt = (v, digits = 1) => (v == null || !Number.isFinite(v) ? "–" : Number(v).toFixed(digits));

function shortDate(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toISOString().slice(0, 16).replace("T", " ");
}

export function sourceLabel(header, { live = false } = {}) {
  const device = header?.device?.name ?? "unknown device";
  return live ? `live: ${device}` : `${device}, ${shortDate(header?.created_at)}`;
}

function powersOfTwo(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log2(lo)); e <= Math.ceil(Math.log2(hi)); e++) out.push(2 ** e);
  return out;
}

const tickText = (v) => (v >= 1024 && v % 1024 === 0 ? `${v / 1024}K` : String(v));
const plottable = (r) => r.status === "ok" && Number.isFinite(r.median_us);
const ALL = "all";
// The legend sits below the axis title, in a band of its own sized for its entries.
const LEGEND_ROW_PX = 19;
const LEGEND_GAP_PX = 6;
const PLOT_PX = 320;
const BOTTOM_PX = 62; // tick labels and the x-axis title

export class Charts {
  constructor({ fwd, bwd, sourcesLine, dtypeSelect, mSelect }) {
    this.panels = { fwd, bwd };
    this.sourcesLine = sourcesLine;
    this.selects = { dtype: dtypeSelect, M: mSelect };
    this.view = "GBps";
    this.sources = []; // {key, label, header, rows, live}
    this.picked = { dtype: null, M: null }; // the user's choice (a value or "all"); null: the default
    this.filter = { dtype: ALL, M: ALL }; // what the last render showed
    this._pending = false;
    for (const [dim, sel] of Object.entries(this.selects)) {
      sel?.addEventListener("change", () => this.setFilter(dim, sel.value));
    }
    // The legend's band depends on the panel's width: redraw when it changes.
    this._widths = new Map();
    this._legendPx = new Map(); // "pass|width|entries" -> the legend band's height as last drawn
    if (window.ResizeObserver) {
      const watch = new ResizeObserver((entries) => {
        const changed = entries.some((e) => Math.abs((this._widths.get(e.target) ?? 0) - e.contentRect.width) > 8);
        if (changed) this.scheduleRender();
      });
      for (const el of Object.values(this.panels)) watch.observe(el);
    }
  }

  // dim: "dtype" or "M"; value: one of the values shown, or "all".
  setFilter(dim, value) {
    if (!(dim in this.picked)) return;
    this.picked[dim] = value === ALL || value == null ? ALL : dim === "M" ? Number(value) : String(value);
    this.render();
  }

  setView(view) {
    if (!VIEWS[view]) return;
    this.view = view;
    this.render();
  }

  // A new live run replaces whatever was shown: the charts then fill in as its rows arrive.
  startLive(runId) {
    this.sources = [{ key: runId, label: "live run", header: null, rows: [], live: true }];
    this.picked = { dtype: null, M: null };
    this.scheduleRender();
  }

  liveHeader(runId, header) {
    const src = this.sources.find((s) => s.key === runId);
    if (!src) return;
    src.header = header;
    src.label = sourceLabel(header, { live: true });
    this.scheduleRender();
  }

  liveRow(runId, row) {
    let src = this.sources.find((s) => s.key === runId);
    if (!src) {
      src = { key: runId, label: "live run", header: null, rows: [], live: true };
      this.sources.push(src);
    }
    src.rows.push(row);
    this.scheduleRender();
  }

  // Show a stored run (a run-file document); with overlay=true it is added next to what is shown.
  open(doc, { overlay = false } = {}) {
    const key = doc.run?.run_id ?? `run-${this.sources.length}`;
    const src = { key, label: sourceLabel(doc.run), header: doc.run, rows: doc.rows ?? [], live: false };
    if (!overlay) {
      this.sources = [src];
      this.picked = { dtype: null, M: null };
    } else this.sources = [...this.sources.filter((s) => s.key !== key), src];
    // Two runs of the same device and minute still need names of their own.
    const seen = new Map();
    for (const s of this.sources) seen.set(s.label, (seen.get(s.label) ?? 0) + 1);
    for (const s of this.sources) if (seen.get(s.label) > 1 && !s.live) s.label = `${s.label} #${String(s.key).slice(-6)}`;
    this.render();
  }

  clear() {
    this.sources = [];
    this.render();
  }

  scheduleRender() {
    if (this._pending) return;
    this._pending = true;
    requestAnimationFrame(() => {
      this._pending = false;
      this.render();
    });
  }

  // The values the filters offer (those of the plottable rows shown) and the ones in force: the user's
  // pick while it is present, else the default. The default is one dtype and one M: those of the first
  // row received while a run streams (so its traces grow), else the first dtype and the largest M.
  _resolveFilter() {
    const rows = this.sources.flatMap((s) => s.rows.filter(plottable));
    const dtypes = [...new Set(rows.map((r) => r.dtype))];
    const Ms = [...new Set(rows.map((r) => r.M))].sort((a, b) => a - b);
    const firstLive = this.sources.find((s) => s.live && s.rows.some(plottable))?.rows.find(plottable);
    const pick = (dim, values, fallback) => {
      const p = this.picked[dim];
      if (p === ALL || (p != null && values.includes(p))) return p;
      return values.length ? fallback() : ALL;
    };
    const dtype = pick("dtype", dtypes, () => firstLive?.dtype ?? dtypes[0]);
    const inDtype = rows.filter((r) => dtype === ALL || r.dtype === dtype).map((r) => r.M);
    const M = pick("M", Ms, () => firstLive?.M ?? Math.max(...(inDtype.length ? inDtype : Ms)));
    return { dtypes, Ms, dtype, M };
  }

  _syncSelects({ dtypes, Ms, dtype, M }) {
    const fill = (sel, values, chosen, text) => {
      if (!sel) return;
      const want = [ALL, ...values.map(String)];
      const have = [...sel.options].map((o) => o.value);
      if (want.join("|") !== have.join("|")) {
        sel.replaceChildren(...want.map((v) => new Option(v === ALL ? "all" : text(v), v)));
      }
      sel.value = String(chosen);
      sel.disabled = values.length === 0;
    };
    fill(this.selects.dtype, dtypes, dtype, (v) => v);
    fill(this.selects.M, Ms, M, (v) => v);
  }

  // Trace groups: one per (run, impl, dtype, M) among the rows the filters let through; names only
  // mention what varies among those.
  _groups(pass) {
    const { dtype, M } = this.filter;
    const keep = (r) => plottable(r) && (dtype === ALL || r.dtype === dtype) && (M === ALL || r.M === M);
    const shown = this.sources.flatMap((s) => s.rows.filter(keep));
    const okRows = this.sources.flatMap((s, si) => s.rows.filter((r) => r.pass === pass && keep(r)).map((r) => [si, r]));
    const dtypes = [...new Set(shown.map((r) => r.dtype))];
    const Ms = [...new Set(shown.map((r) => r.M))];
    const allDtypes = [...new Set(this.sources.flatMap((s) => s.rows.filter(plottable).map((r) => r.dtype)))];
    const groups = new Map();
    for (const [si, r] of okRows) {
      const key = `${si}|${r.impl}|${r.dtype}|${r.M}`;
      if (!groups.has(key)) {
        const parts = [r.impl];
        if (dtypes.length > 1) parts.push(r.dtype);
        if (Ms.length > 1) parts.push(`M=${r.M}`);
        if (this.sources.length > 1) parts.push(`[${this.sources[si].label}]`);
        groups.set(key, {
          si, impl: r.impl, dtype: r.dtype, M: r.M, name: parts.join(" · "), rows: [],
          dtypeIndex: allDtypes.indexOf(r.dtype),
        });
      }
      groups.get(key).rows.push(r);
    }
    return [...groups.values()];
  }

  _traces(pass) {
    const view = VIEWS[this.view];
    const traces = [];
    let xs = [];
    for (const g of this._groups(pass)) {
      const rows = [...g.rows].sort((a, b) => a.N - b.N);
      const src = this.sources[g.si];
      const y = rows.map(view.y);
      // The min-max spread of the timing, carried into each view.
      const hi = rows.map((r, i) => {
        if (this.view === "latency") return r.max_us - r.median_us;
        return r.min_us > 0 ? y[i] * (r.median_us / r.min_us) - y[i] : 0;
      });
      const lo = rows.map((r, i) => {
        if (this.view === "latency") return r.median_us - r.min_us;
        return r.max_us > 0 ? y[i] - y[i] * (r.median_us / r.max_us) : 0;
      });
      xs = xs.concat(rows.map((r) => r.N));
      traces.push({
        type: "scatter",
        mode: "lines+markers",
        uid: uid(pass, src.key, g.impl, g.dtype, g.M),
        name: g.name,
        legendgroup: g.impl,
        x: rows.map((r) => r.N),
        y,
        error_y: { type: "data", symmetric: false, array: hi, arrayminus: lo, thickness: 1, width: 3, color: colorFor(g.impl) },
        line: { color: colorFor(g.impl), dash: DASHES[g.si % DASHES.length], width: 2 },
        marker: { color: colorFor(g.impl), symbol: SYMBOLS[g.dtypeIndex % SYMBOLS.length], size: 7 },
        customdata: rows.map((r) => [
          r.impl, r.M, r.N, r.dtype, r.median_us, r.min_us, r.max_us, r.GBps, r.pct_of_ceiling, src.label,
        ]),
        hovertemplate:
          "<b>%{customdata[0]}</b> · %{customdata[9]}<br>M=%{customdata[1]}  N=%{customdata[2]}  %{customdata[3]}" +
          "<br>median %{customdata[4]:.2f} µs (min %{customdata[5]:.2f} – max %{customdata[6]:.2f})" +
          "<br>%{customdata[7]:.1f} GB/s · %{customdata[8]:.1f}% of ceiling<extra></extra>",
      });
    }
    return { traces, xs };
  }

  _ceilingTraces(xs) {
    if (this.view === "latency" || xs.length === 0) return [];
    const lo = Math.min(...xs) / 1.25;
    const hi = Math.max(...xs) * 1.25;
    const out = [];
    this.sources.forEach((s, si) => {
      const c = s.header?.ceiling_GBps;
      if (!Number.isFinite(c)) return;
      const yv = this.view === "pct" ? 100 : c;
      const who = this.sources.length > 1 ? ` [${s.label}]` : "";
      out.push({
        type: "scatter",
        mode: "lines",
        uid: uid("ceiling", s.key),
        name: `copy ceiling ${fmt(c, 1)} GB/s${who}`,
        x: [lo, hi],
        y: [yv, yv],
        line: { color: "#555", dash: DASHES[(si + 1) % DASHES.length], width: 1.5 },
        hovertemplate: `measured copy ceiling: ${fmt(c, 1)} GB/s${who}<extra></extra>`,
      });
    });
    return out;
  }

  // A first guess of the legend band (about 7 px a character, 40 px for an entry's line and gaps).
  _guessLegendPx(data, width) {
    let rows = 1;
    let used = 0;
    for (const t of data) {
      const w = 40 + 7 * t.name.length;
      if (used > 0 && used + w > width) {
        rows++;
        used = 0;
      }
      used += w;
    }
    return rows * LEGEND_ROW_PX + LEGEND_GAP_PX;
  }

  render() {
    const Plotly = window.Plotly;
    const choice = this._resolveFilter();
    this.filter = { dtype: choice.dtype, M: choice.M };
    this._syncSelects(choice);
    this._describeSources();
    if (!Plotly) return;
    for (const pass of ["fwd", "bwd"]) {
      const el = this.panels[pass];
      const { traces, xs } = this._traces(pass);
      const data = [...traces, ...this._ceilingTraces(xs)];
      // The legend gets a band of its own under the x-axis title, as tall as its wrapped rows at this
      // panel's width (measured after drawing), so it never covers the title and is never cut.
      const width = el.clientWidth || 600;
      this._widths.set(el, width);
      const legendPx = data.length ? this._legendPx.get(`${pass}|${width}|${data.length}`) ?? this._guessLegendPx(data, width) : 0;
      const ticks = xs.length ? powersOfTwo(Math.min(...xs), Math.max(...xs)) : [256, 1024, 4096, 16384];
      // A ceiling far above every point (small CPU shapes) would flatten them: keep the points
      // readable and say where the ceiling is.
      const ys = traces.flatMap((t) => t.y.map((y, i) => y + (t.error_y.array[i] || 0))).filter(Number.isFinite);
      const top = ys.length ? Math.max(...ys) : 0;
      const ceilings = this._ceilingTraces(xs).map((t) => t.y[0]);
      const offScale = this.view !== "latency" && top > 0 && ceilings.length && Math.min(...ceilings) > 4 * top;
      const notes = [];
      if (!traces.length) {
        notes.push({ text: `no ${pass === "fwd" ? "forward" : "backward"} results`, showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5, font: { color: "#888" } });
      } else if (offScale) {
        const c = this.view === "pct" ? "100%" : `${fmt(Math.min(...ceilings))} GB/s`;
        notes.push({ text: `↑ copy ceiling ${c}: far above these points`, showarrow: false, xref: "paper", yref: "paper", x: 1, y: 1, xanchor: "right", yanchor: "bottom", font: { color: "#555", size: 11 } });
      }
      const layout = {
        title: { text: `${PASS_TITLES[pass]}: ${VIEWS[this.view].title}`, font: { size: 14 }, x: 0.01, xanchor: "left" },
        margin: { l: 60, r: 16, t: 48, b: BOTTOM_PX + legendPx },
        height: PLOT_PX + BOTTOM_PX + legendPx,
        xaxis: {
          title: { text: "N (hidden size, log₂ axis)" },
          type: "log",
          tickvals: ticks,
          ticktext: ticks.map(tickText),
          zeroline: false,
        },
        yaxis: { title: { text: VIEWS[this.view].title }, rangemode: "tozero", zeroline: false,
          ...(offScale ? { range: [0, top * 1.15], autorange: false } : { autorange: true }) },
        showlegend: data.length > 0,
        legend: { orientation: "h", xref: "container", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom", maxheight: 5000, font: { size: 11 } },
        hovermode: "closest",
        paper_bgcolor: "rgba(0,0,0,0)",
        plot_bgcolor: "#fff",
        annotations: notes,
        uirevision: `${this.view}|${this.filter.dtype}|${this.filter.M}|${this.sources.map((s) => s.key).join(",")}`,
      };
      Plotly.react(el, data, layout, { responsive: true, displaylogo: false, showLink: false, modeBarButtonsToRemove: ["sendDataToCloud"] });
      const drawn = el.querySelector(".legend .bg");
      const need = drawn ? Math.ceil(drawn.getBBox().height) + LEGEND_GAP_PX : 0;
      this._legendPx.set(`${pass}|${width}|${data.length}`, need);
      if (data.length && Math.abs(need - legendPx) > 1) {
        Plotly.relayout(el, { "margin.b": BOTTOM_PX + need, height: PLOT_PX + BOTTOM_PX + need });
      }
      el.dataset.traces = String(traces.length);
      el.dataset.points = String(traces.reduce((n, t) => n + t.x.length, 0));
    }
  }

  _describeSources() {
    if (!this.sourcesLine) return;
    if (this.sources.length === 0) {
      this.sourcesLine.textContent = "No results yet: start a sweep, or open a stored run under History.";
      return;
    }
    const parts = this.sources.map((s) => {
      const ok = s.rows.filter((r) => r.status === "ok").length;
      const other = s.rows.length - ok;
      const ceiling = s.header?.ceiling_GBps;
      const mode = s.rows.find((r) => r.mode)?.mode;
      let text = `${s.label}: ${ok} measured`;
      if (other) text += `, ${other} skipped or failed`;
      if (Number.isFinite(ceiling)) text += `, copy ceiling ${fmt(ceiling)} GB/s`;
      if (mode && mode !== "cuda") text += ` (${mode} timings)`;
      return text;
    });
    this.sourcesLine.textContent = `Showing ${parts.join(" | ")}`;
  }
}
