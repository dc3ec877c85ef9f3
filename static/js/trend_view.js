// The trends view (issue 35): every stored run of one device and timing mode, oldest first (GET /api/trends,
// engine.compare.trends: the rule of `rmsnorm-dash compare`). Per pass and implementation, each run is compared
// with the latest earlier run that measured it at shapes in common: the geometric mean of NEW/BASE GB/s over those
// shapes; below the threshold (compare's --fail-below, 0.97) it is flagged a regression (✗, and listed). The line
// chains those ratios (1 at the first run), so it reads as GB/s relative to the first run over shared shapes.

import { getTrends } from "./api.js";
import { colorFor } from "./palette.js";
import { drawSerial, untab } from "./chart_tools.js";

const PASS_TITLES = { fwd: "Forward", bwd: "Backward" };
const runTick = (r) => `${String(r.created_at ?? "").slice(0, 16).replace("T", " ")} · ${String(r.git_commit ?? "?").slice(0, 7)}`;
const pct = (x) => `${x >= 1 ? "+" : ""}${((x - 1) * 100).toFixed(1)} %`;

export class TrendView {
  // els: {device, timing, altFwd, altBwd, note}; ctx: {onChange(), name(run_id) -> the History's name, runs()}
  constructor(els, { onChange, name, runs }) {
    this.els = els;
    this.runs = runs ?? (() => []); // the stored-run listing: a new run read again
    this.onChange = onChange;
    this.name = name ?? ((id) => id);
    this.picked = { device: null, timing: null };
    this.doc = null;
    for (const [dim, sel] of [["device", els.device], ["timing", els.timing]]) {
      sel?.addEventListener("change", () => {
        this.picked[dim] = sel.value;
        if (dim === "device") this.picked.timing = null;
        this.onChange?.();
      });
    }
  }

  async render() {
    const { device, timing } = this.picked;
    const listing = this.runs();
    const key = `${device}|${timing}|${listing.length}|${listing[0]?.run_id ?? ""}`;
    try {
      if (this._key !== key || !this.doc) {
        this.els.note.hidden = false;
        this.els.note.textContent = "Reading the trends…";
        this.doc = await getTrends(device, timing);
        this._key = key;
      }
    } catch (err) {
      this.doc = null;
      this.els.note.textContent = `No trends: ${err.message}`;
      return;
    }
    const doc = this.doc;
    const fill = (sel, values, chosen) => {
      if ([...sel.options].map((o) => o.value).join("|") !== values.join("|")) sel.replaceChildren(...values.map((v) => new Option(v, v)));
      sel.value = chosen;
    };
    fill(this.els.device, doc.devices, doc.device);
    fill(this.els.timing, doc.timings, doc.timing);
    const order = new Map(doc.runs.map((r, i) => [r.run_id, i]));
    const ticks = doc.runs.map(runTick);
    for (const [pass, el] of [["fwd", this.els.altFwd], ["bwd", this.els.altBwd]]) this._draw(el, pass, doc, order, ticks);
    const flagged = doc.regressions;
    const note = this.els.note;
    note.hidden = false;
    note.replaceChildren(`${doc.device}, ${doc.timing} timing: ${doc.runs.length} runs, oldest first. Each point: a run's ` +
      `geomean GB/s over the shapes it shares with the latest earlier run of that implementation, as a ratio chained ` +
      `from the first run; ✗ below ${doc.fail_below}× (the rule of rmsnorm-dash compare --fail-below). `);
    if (!flagged.length) note.append("No regression flagged.");
    for (const r of flagged) {
      const item = document.createElement("span");
      item.className = "regression";
      Object.assign(item.dataset, { impl: r.impl, pass: r.pass, run: r.run_id, ratio: String(r.ratio) });
      item.textContent = `✗ ${r.impl} ${r.pass} in ${this.name(r.run_id)}: ${r.ratio.toFixed(3)}× (${pct(r.ratio)}) over ` +
        `${r.shared} shapes shared with ${this.name(r.base_run_id)}. `;
      note.append(item);
    }
  }

  _draw(el, pass, doc, order, ticks) {
    const Plotly = window.Plotly;
    if (!Plotly || !el) return;
    const series = doc.series.filter((s) => s.pass === pass);
    const traces = [];
    let points = 0;
    for (const s of series) {
      const pts = s.points.filter((p) => p.index != null);
      if (!pts.length) continue;
      points += pts.length;
      const hover = (p) => `${s.impl} · ${this.name(p.run_id)}<br>commit ${String(p.git_commit ?? "?").slice(0, 10)}` +
        (p.ratio == null ? `<br>first run: ${p.shapes} shapes, geomean ${p.GBps.toFixed(1)} GB/s`
          : `<br>vs ${this.name(p.base_run_id)}: ${p.shared} shared shapes<br>geomean ${p.base_GBps.toFixed(1)} → ${p.new_GBps.toFixed(1)} GB/s` +
            ` (${p.ratio.toFixed(3)}×)${p.regression ? "<br>✗ regression" : ""}`);
      traces.push({
        type: "scatter", mode: "lines+markers", name: s.impl, x: pts.map((p) => ticks[order.get(p.run_id)]), y: pts.map((p) => p.index),
        text: pts.map(hover), hovertemplate: "%{text}<extra></extra>", customdata: pts.map((p) => [s.impl, p.run_id, p.regression]),
        line: { color: colorFor(s.impl), width: 2 },
        marker: { color: colorFor(s.impl), size: pts.map((p) => (p.regression ? 14 : 7)), symbol: pts.map((p) => (p.regression ? "x" : "circle")) },
      });
    }
    const layout = {
      title: { text: `${PASS_TITLES[pass]}: GB/s relative to the first run (chained over shared shapes)`, font: { size: 14 }, x: 0.01, xanchor: "left" },
      margin: { l: 60, r: 16, t: 48, b: 150 }, height: 480,
      xaxis: { type: "category", categoryorder: "array", categoryarray: ticks, tickangle: -35, automargin: true },
      yaxis: { title: { text: "relative GB/s (×)" }, zeroline: false },
      legend: { orientation: "h", y: -0.6, font: { size: 11 } }, hovermode: "closest", paper_bgcolor: "rgba(0,0,0,0)",
      annotations: traces.length ? [] : [{ text: `no ${pass} run of this device`, showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }],
    };
    drawSerial(el, () => {
      const plotted = Plotly.react(el, traces, layout, { responsive: true, displaylogo: false, modeBarButtons: [["toImage"]] });
      untab(el);
      return plotted;
    });
    Object.assign(el.dataset, { traces: String(traces.length), points: String(points),
      regressions: String(doc.regressions.filter((r) => r.pass === pass).length) });
  }

  state() {
    return { trendDevice: this.picked.device, trendTiming: this.picked.timing };
  }

  apply(state) {
    if (state.trendDevice) this.picked.device = state.trendDevice;
    if (state.trendTiming) this.picked.timing = state.trendTiming;
  }
}
