// The views beside the metric charts (issue 17): the per-shape table of any run shown, the baseline picker, the
// speedup chart and the run-vs-run diff. They read what the charts show (charts.sources, charts.filter) and
// follow the chart filters (dtype, M); `state()` / `apply()` are what the URL keeps.

import { drawPanel } from "./alt_chart.js";
import { DiffView } from "./diff_view.js";
import { ShapeTable, baselineByShape, shapeKey } from "./shape_table.js";
import { renderSummary } from "./summary_line.js";
import { StepView } from "./step_view.js";
import { TrendView } from "./trend_view.js";

export const DEFAULT_BASELINE = "torch-native";
const ALT_VIEWS = new Set(["speedup", "diff", "step", "trend"]);
const ALL = "all";

export class Views {
  // els: {metricPanels, altPanels, altFwd, altBwd, baseline, tableRun, table, tableStatus, note,
  //       diffControls, diffBase, diffNew, diffWarning}; ctx: {charts, runs() -> the stored-run listing,
  //       openRuns(ids) -> open stored runs in the charts (the first plain, the others overlaid)}
  constructor(els, { charts, runs, openRuns, name, nameOf }) {
    this.els = els;
    this.charts = charts;
    this.view = "GBps";
    this.baseline = null; // the user's pick; null: torch-native when measured, else the run's own baseline
    this.tableRun = null; // a source key; null: the live run, else the first shown
    this.ready = false; // URL writes wait until the page restored its state
    this.onChange = null;
    this.table = new ShapeTable({ table: els.table, status: els.tableStatus });
    this.table.onSort = () => this.changed();
    this.diff = new DiffView(els, { runs, shown: () => this.charts.sources, filter: () => this.charts.filter, onChange: () => this._save(), openRuns,
      name, setFilter: (dim, value) => this.charts.setFilter(dim, value) });
    // issue 35: the fwd+bwd view and the trends across runs
    this.step = new StepView({ fwd: els.stepFwd, bwd: els.stepBwd, add: els.stepAdd, reset: els.stepReset, list: els.stepPairs,
      altFwd: els.altFwd, altBwd: els.altBwd, note: els.note }, { sources: () => this._sources(), filter: () => this.charts.filter,
      onChange: () => this.changed() });
    this.trend = new TrendView({ device: els.trendDevice, timing: els.trendTiming, altFwd: els.altFwd, altBwd: els.altBwd,
      note: els.note }, { onChange: () => this.changed(), name: nameOf, runs });
    for (const radio of document.querySelectorAll('input[name="view"]')) {
      radio.addEventListener("change", () => radio.checked && this.setView(radio.value));
    }
    els.baseline.addEventListener("change", () => {
      this.baseline = els.baseline.value;
      this.changed();
    });
    els.tableRun.addEventListener("change", () => {
      this.tableRun = els.tableRun.value;
      this.changed();
    });
    const chartControls = ["chart-dtype", "chart-m", "chart-n", "chart-x", "chart-logy"].map((id) => document.getElementById(id));
    for (const sel of chartControls) {
      sel?.addEventListener("change", () => this.changed());
    }
  }

  setView(view) {
    this.view = view;
    const alt = ALT_VIEWS.has(view);
    // Collapsed rather than display:none: plotly cannot lay out a chart in a box of no size.
    this.els.metricPanels.classList.toggle("collapsed", alt);
    this.els.altPanels.classList.toggle("collapsed", !alt);
    this.els.diffControls.hidden = view !== "diff";
    if (this.els.stepControls) this.els.stepControls.hidden = view !== "step";
    if (this.els.trendControls) this.els.trendControls.hidden = view !== "trend";
    if (view !== "diff") this.els.diffWarning.hidden = true;
    this.changed();
  }

  changed() {
    if (this._pending) return;
    this._pending = true;
    requestAnimationFrame(() => {
      this._pending = false;
      this.render();
    });
  }

  _sources() {
    return this.charts.sources.filter((s) => s.rows.length || s.live);
  }

  _implsMeasured() {
    const names = new Set();
    for (const s of this.charts.sources) for (const r of s.rows) if (r.status === "ok") names.add(r.impl);
    return [...names].sort();
  }

  // The baseline in force: the pick while measured in a shown run, else torch-native, else the run's own (before
  // any row is measured, the pick stands: a URL's baseline waits for the live run's rows).
  resolvedBaseline() {
    const impls = this._implsMeasured();
    if (this.baseline && impls.includes(this.baseline)) return this.baseline;
    if (!impls.length) return this.baseline ?? DEFAULT_BASELINE;
    if (impls.includes(DEFAULT_BASELINE)) return DEFAULT_BASELINE;
    const own = this.charts.sources.map((s) => s.header?.sweep?.baseline).find((b) => b && impls.includes(b));
    return own ?? impls[0];
  }

  _syncBaseline(chosen) {
    const sel = this.els.baseline;
    const names = [...new Set([...this._implsMeasured(), chosen])].sort();
    if ([...sel.options].map((o) => o.value).join("|") !== names.join("|")) sel.replaceChildren(...names.map((n) => new Option(n, n)));
    sel.value = chosen;
  }

  _tableSource() {
    const sources = this._sources();
    const sel = this.els.tableRun;
    const want = sources.map((s) => String(s.key));
    if ([...sel.options].map((o) => o.value).join("|") !== want.join("|")) {
      sel.replaceChildren(...sources.map((s) => new Option(s.live ? `${s.label} (live)` : s.label, String(s.key))));
    }
    sel.disabled = sources.length < 2;
    const src = sources.find((s) => String(s.key) === this.tableRun) ?? sources.find((s) => s.live) ?? sources[0] ?? null;
    if (src) sel.value = String(src.key);
    return src;
  }

  render() {
    const baseline = this.resolvedBaseline();
    this._syncBaseline(baseline);
    const filter = { ...this.charts.filter };
    const src = this._tableSource();
    this.table.show(src ? { label: src.label, rows: src.rows, live: src.live } : null, { baseline, filter });
    renderSummary(this.els.summary, this._sources(), { baseline, tableKey: src?.key });
    this.els.note.hidden = true;
    const liveNote = this.charts.sources.some((s) => s.live) && this.charts.baselineNote;
    if (liveNote && !ALT_VIEWS.has(this.view)) {
      this.els.note.hidden = false;
      this.els.note.textContent = liveNote;
    }
    if (this.view === "speedup") this._drawSpeedup(baseline, filter);
    else if (this.view === "diff") this.diff.render();
    else if (this.view === "step") this.step.render(baseline);
    else if (this.view === "trend") this.trend.render().then(() => this._save());
    this._save();
  }

  _drawSpeedup(baseline, { dtype, M }) {
    const sources = this._sources();
    const keep = (r) => r.status === "ok" && r.GBps > 0 && (dtype === ALL || r.dtype === dtype) && (M === ALL || r.M === M);
    for (const [pass, el] of [["fwd", this.els.altFwd], ["bwd", this.els.altBwd]]) {
      const groups = new Map();
      sources.forEach((s, si) => {
        const base = baselineByShape(s.rows, baseline);
        const rows = s.rows.filter((r) => r.pass === pass && keep(r));
        const dtypes = new Set(rows.map((r) => r.dtype));
        const Ms = new Set(rows.map((r) => r.M));
        for (const r of rows) {
          const b = base.get(shapeKey(r));
          if (!b) continue;
          const parts = [r.impl];
          if (dtypes.size > 1) parts.push(r.dtype);
          if (Ms.size > 1) parts.push(`M=${r.M}`);
          if (sources.length > 1) parts.push(`[${String(s.label).split(", ").pop()}]`); // dashes tell runs apart too
          const name = parts.join(" · ");
          if (!groups.has(name)) groups.set(name, { name, impl: r.impl, dash: si, points: [] });
          const sp = r.GBps / b;
          groups.get(name).points.push({
            N: r.N, y: sp, key: shapeKey(r),
            hover: `${r.impl} · ${s.label}<br>M=${r.M}  N=${r.N}  ${r.dtype}<br>${sp.toFixed(2)}× ${baseline}` +
              `<br>${r.GBps.toFixed(1)} GB/s vs ${b.toFixed(1)} GB/s`,
          });
        }
      });
      drawPanel(el, pass, {
        groups: [...groups.values()], ref: 1, refName: `${baseline} (1×)`, yTitle: `speedup over ${baseline} (×, GB/s ratio)`,
        empty: `no ${pass} shape where ${baseline} was measured`,
      });
    }
    const drawn = +(this.els.altFwd.dataset.points ?? 0) + +(this.els.altBwd.dataset.points ?? 0);
    if (!drawn) {
      this.els.note.hidden = false;
      this.els.note.textContent = `No speedup to draw: ${baseline} has no measured shape under these filters. Pick another baseline.`;
    }
  }

  state() {
    const f = this.charts.filter ?? {};
    return {
      runs: this.charts.sources.map((s) => String(s.key)),
      view: this.view, dtype: f.dtype ?? null, M: f.M ?? null,
      N: this.charts.xAxis === "M" ? f.N ?? null : null, x: this.charts.xAxis === "M" ? "M" : null, logy: this.charts.logY ? "1" : null,
      baseline: this.baseline && this.baseline === this.resolvedBaseline() ? this.baseline : null, table: this.tableRun, sort: this.table.sort ? `${this.table.sort.column}.${this.table.sort.dir}` : null,
      ...this.diff.state(), ...this.step.state(), ...this.trend.state(),
    };
  }

  // Restore what a URL said (after its runs are open).
  apply(state) {
    if (state.baseline) this.baseline = state.baseline;
    if (state.table) this.tableRun = state.table;
    if (state.sort) {
      const [column, dir] = state.sort.split(".");
      this.table.sort = { column, dir: dir === "desc" ? "desc" : "asc" };
    }
    this.diff.apply(state);
    this.step.apply(state);
    this.trend.apply(state);
    if (state.x) this.charts.setXAxis(state.x);
    if (state.logy === "1") this.charts.setLogY(true);
    if (state.dtype) this.charts.setFilter("dtype", state.dtype);
    if (state.M) this.charts.setFilter("M", state.M);
    if (state.N) this.charts.setFilter("N", state.N);
    const radio = state.view && document.querySelector(`input[name="view"][value="${CSS.escape(state.view)}"]`);
    if (radio) {
      radio.checked = true;
      radio.dispatchEvent(new Event("change", { bubbles: true }));
    }
    this.render();
  }

  _save() {
    if (this.ready) this.onChange?.(this.state());
  }
}
