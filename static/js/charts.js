// The plotly charts: forward and backward panels (traces: chart_traces.js; a panel's layout: chart_layout.js),
// three views (effective GB/s, % of ceiling, latency), a log-y option, a kernel-breakdown bar chart for profiled
// rows (chart_profile.js), a CSV of the current view. Rows can arrive one at a time while a run streams. Colours
// follow the page's colour scheme (chart_theme.js).
// The dtype and M filters default to one dtype and one M (the first dtype and the M with the most measured points of a
// stored run, the largest on a tie; those of the first rows received while a run streams), so each panel has one trace
// per implementation.

import { ALL, VIEWS, timed, panelTraces, ceilingTraces, starTrace } from "./chart_traces.js";
import { modeBarConfig, untab, csvOfView, download, drawSerial } from "./chart_tools.js";
import { chartTheme, onSchemeChange } from "./chart_theme.js";
import { drawProfile, pickShape, profiledRows } from "./chart_profile.js";
import { currentScheme } from "./palette.js";
import { altCaption, chartNotes, sourceLabel, sourcesSentence } from "./chart_labels.js";
import { LEGEND_GAP_PX, LEGEND_ROW_PX, guessLegendPx, legendBand, panelLayout } from "./chart_layout.js";

export { sourceLabel };

// The M most of these rows have (one entry per plotted row), the largest on a tie.
function fullestM(ms) {
  const count = new Map();
  for (const m of ms) count.set(m, (count.get(m) ?? 0) + 1);
  return [...count].reduce((best, cur) => (cur[1] > best[1] || (cur[1] === best[1] && cur[0] > best[0]) ? cur : best))[0];
}

export class Charts {
  constructor({ fwd, bwd, sourcesLine, dtypeSelect, mSelect, nSelect, xSelect, logY, csvButton, pngButton, notes, profile,
    profileCaption }) {
    this.panels = { fwd, bwd };
    this.els = { logY, csvButton, pngButton, notes, profile, profileCaption };
    this.logY = Boolean(logY?.checked);
    this.profileShape = null; // {pass, dtype, M, N} picked by clicking a point
    this._entries = [];
    logY?.addEventListener("change", () => this.setLogY(logY.checked));
    // The x axis: N (hidden size) or M (rows: inference's scans); the other dimension is then a filter.
    this.xAxis = "N";
    this.xSelect = xSelect;
    xSelect?.addEventListener("change", () => this.setXAxis(xSelect.value));
    csvButton?.addEventListener("click", () => this.downloadCsv());
    pngButton?.addEventListener("click", () => this.downloadPng());
    onSchemeChange(() => this.render());
    this.sourcesLine = sourcesLine;
    // Until the page has opened its first run (doneLoading): a loading line and no empty axes drawn.
    this.loading = true;
    this._unfilled = new Set(); // panels left undrawn while loading (render)
    this.selects = { dtype: dtypeSelect, M: mSelect, N: nSelect };
    this.view = "GBps";
    this.sources = []; // {key, label, header, rows, live}
    this.picked = { dtype: null, M: null, N: null }; // the user's choice (a value or "all"); null: the default
    this.filter = { dtype: ALL, M: ALL, N: ALL }; // what the last render showed
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

  // dim: "dtype", "M" or "N"; value: one of the values shown, or "all".
  setFilter(dim, value) {
    if (!(dim in this.picked)) return;
    this.picked[dim] = value === ALL || value == null ? ALL : dim === "dtype" ? String(value) : Number(value);
    const next = this._resolveFilter();
    // A pick of what is drawn already (a URL naming the default) changes nothing: no second plotly draw.
    if (this._drawn && ["dtype", "M", "N"].every((d) => next[d] === this.filter[d])) return this._syncSelects(next);
    this.render();
  }

  // "N" or "M" along the x axis.
  setXAxis(x) {
    const next = x === "M" ? "M" : "N";
    if (this.xSelect && this.xSelect.value !== next) this.xSelect.value = next;
    if (next === this.xAxis) return;
    this.xAxis = next;
    this.render();
  }

  setLogY(on) {
    this.logY = Boolean(on);
    if (this.els.logY && this.els.logY.checked !== this.logY) this.els.logY.checked = this.logY;
    this.render();
  }

  // A metric view (GB/s, %, latency) is drawn here; the speedup and run-vs-run views beside (views.js) only change
  // the caption under the charts, which explains only what that view draws.
  setView(view) {
    this.altView = VIEWS[view] ? null : view;
    if (this.altView) return this._describeSources(null);
    this.view = view;
    this.render();
  }

  // A new live run replaces whatever was shown: the charts then fill in as its rows arrive.
  startLive(runId) {
    this.sources = [{ key: runId, label: "live run", header: null, rows: [], live: true }];
    this.picked = { dtype: null, M: null, N: null };
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
  // Returns how many points the run adds under the filters in force (0: say why, see emptyReason).
  // name: the History's name of the run (run_names.js), the one every picker and legend shows.
  open(doc, { overlay = false, name = null } = {}) {
    const key = doc.run?.run_id ?? `run-${this.sources.length}`;
    const timing = doc.rows?.find((r) => r.timing)?.timing;
    const graphs = timing === "cuda-graph" && name && !/cuda.?graph/i.test(name) ? " · CUDA graph" : "";
    const label = name ? `${name}${graphs}` : sourceLabel(doc.run, { timing });
    const src = { key, label, header: doc.run, rows: doc.rows ?? [], live: false, partial: doc.summary?.complete === false };
    if (!overlay) {
      this.sources = [src];
      this.picked = { dtype: null, M: null, N: null };
    } else this.sources = [...this.sources.filter((s) => s.key !== key), src];
    // Two runs of the same device and minute still need names of their own.
    const seen = new Map();
    for (const s of this.sources) seen.set(s.label, (seen.get(s.label) ?? 0) + 1);
    for (const s of this.sources) if (seen.get(s.label) > 1 && !s.live) s.label = `${s.label} #${String(s.key).slice(-6)}`;
    this.render();
    return this.pointsOf(key);
  }

  // The points a source has on the charts under the filters in force.
  pointsOf(key) {
    const s = this.sources.find((x) => x.key === key);
    return s ? s.rows.filter((r) => timed(r) && this._keep(r)).length : 0;
  }

  // Why a source adds no point: what it has against what the filters ask for.
  emptyReason(key) {
    const s = this.sources.find((x) => x.key === key);
    if (!s) return "it is not shown";
    const rows = s.rows.filter(timed);
    if (!rows.length) return `it has no measured rows (${s.rows.length} rows: skipped, error or not timed)`;
    const { dtype, M } = this.filter;
    const dtypes = [...new Set(rows.map((r) => r.dtype))];
    const Ms = [...new Set(rows.map((r) => r.M))].sort((a, b) => a - b);
    const why = [];
    if (dtype !== ALL && !dtypes.includes(dtype)) why.push(`dtype ${dtypes.join(", ")} (the charts show ${dtype})`);
    if (M !== ALL && !Ms.includes(M)) why.push(`M ${Ms.join(", ")} (the charts show M=${M})`);
    if (!why.length) why.push(`no row at dtype ${dtype} with M=${M}`);
    return `it measured ${why.join(" and ")}: set the filters to one of its values or "all"`;
  }

  _keep(r) {
    const { dtype, M, N } = this.filter;
    return (dtype === ALL || r.dtype === dtype) && (M === ALL || r.M === M) && (N == null || N === ALL || r.N === N);
  }

  clear() {
    this.sources = [];
    this.render();
  }

  // The page opened what it opens first (or found nothing to open): an empty state may now be drawn (a run opened
  // is drawn already: drawing it again would cost a second full plotly draw of the first look).
  doneLoading() {
    this.loading = false;
    if (!this.sources.length) this.render();
    else if (this._unfilled.size) this.render({ only: [...this._unfilled] });
  }

  // plotly.js came in (it loads async): draw what was asked for before it could be drawn.
  plotlyArrived() {
    if (this._owed) this.render();
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
  // row received while a run streams (so its traces grow), else the first dtype and the M with the most
  // measured points (the largest of those: a run cut short measured its largest M only in part).
  _resolveFilter() {
    const rows = this.sources.flatMap((s) => s.rows.filter(timed));
    const dtypes = [...new Set(rows.map((r) => r.dtype))];
    const Ms = [...new Set(rows.map((r) => r.M))].sort((a, b) => a - b);
    const firstLive = this.sources.find((s) => s.live && s.rows.some(timed))?.rows.find(timed);
    const pick = (dim, values, fallback) => {
      const p = this.picked[dim];
      if (p === ALL || (p != null && values.includes(p))) return p;
      return values.length ? fallback() : ALL;
    };
    const dtype = pick("dtype", dtypes, () => firstLive?.dtype ?? dtypes[0]);
    const inDtype = rows.filter((r) => dtype === ALL || r.dtype === dtype).map((r) => r.M);
    // The dimension along x is never filtered; the other one is (M when x is N, as before; N when x is M).
    const alongM = this.xAxis === "M";
    const M = alongM ? ALL : pick("M", Ms, () => firstLive?.M ?? fullestM(inDtype.length ? inDtype : Ms));
    const Ns = [...new Set(rows.map((r) => r.N))].sort((a, b) => a - b);
    const inDtypeN = rows.filter((r) => dtype === ALL || r.dtype === dtype).map((r) => r.N);
    const N = alongM ? pick("N", Ns, () => firstLive?.N ?? fullestM(inDtypeN.length ? inDtypeN : Ns)) : ALL;
    return { dtypes, Ms, Ns, dtype, M, N };
  }

  _syncSelects({ dtypes, Ms, Ns, dtype, M, N }) {
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
    fill(this.selects.N, Ns ?? [], N ?? ALL, (v) => v);
    // Only the filter of the dimension not along x is offered.
    const alongM = this.xAxis === "M";
    for (const [dim, hide] of [["M", alongM], ["N", !alongM]]) {
      const sel = this.selects[dim];
      if (!sel) continue;
      sel.hidden = hide;
      for (const label of sel.labels ?? []) label.hidden = hide;
    }
  }

  // only: the panels to draw (all by default).
  render({ only = ["fwd", "bwd"] } = {}) {
    const Plotly = window.Plotly;
    const choice = this._resolveFilter();
    this.filter = { dtype: choice.dtype, M: choice.M, N: choice.N };
    this._syncSelects(choice);
    const scheme = currentScheme();
    const theme = chartTheme();
    const keep = (r) => this._keep(r);
    const built = Object.fromEntries(["fwd", "bwd"].map((pass) =>
      [pass, panelTraces({ sources: this.sources, pass, keep, view: this.view, scheme, ink: theme.ink, x: this.xAxis })]));
    this._entries = [...built.fwd.entries, ...built.bwd.entries];
    this._describeSources(built);
    const waiting = this.loading && !this.sources.length;
    for (const el of Object.values(this.panels)) el.setAttribute("aria-busy", String(waiting));
    if (waiting && this.sourcesLine) this.sourcesLine.textContent = "Loading the stored runs…";
    this._owed = !Plotly && !waiting;
    this._drawn = Boolean(Plotly) && !waiting;
    if (!Plotly || waiting) return;
    for (const pass of only) {
      const el = this.panels[pass];
      const { traces, xs, best } = built[pass];
      // While the first look loads, a panel with nothing to draw yet waits for the run that fills it (the first look
      // opens the backward run, then the forward one): drawing its empty axes first cost a plotly draw (issue 35).
      this._unfilled.delete(pass);
      const width = el.clientWidth || 600;
      this._widths.set(el, width);
      if (this.loading && !traces.length) {
        this._unfilled.add(pass);
        el.setAttribute("aria-busy", "true");
        el.dataset.points = "0"; // what is drawn: nothing yet
        continue;
      }
      const ceilings = ceilingTraces(this.sources, this.view, xs, theme.muted);
      const data = [...traces, ...ceilings, ...starTrace(best)];
      // The legend gets a band of its own under the x-axis title, as tall as its wrapped rows at this
      // panel's width (measured after drawing), so it never covers the title and is never cut.
      const bandKey = `${pass}|${width}|${data.length}`;
      const legendPx = data.length ? this._legendPx.get(bandKey) ?? guessLegendPx(data, width - 76) : 0;
      const revision = `${this.view}|${this.logY}|${this.xAxis}|${this.filter.dtype}|${this.filter.M}|${this.filter.N}|` +
        this.sources.map((s) => s.key).join(",");
      const { layout, band } = panelLayout({ pass, view: this.view, logY: this.logY, width, traces, ceilings, xs, theme,
        legendPx, revision, x: this.xAxis });
      const measured = traces.filter((t) => t.meta.kind === "measured");
      const counts = { traces: String(measured.length), points: String(measured.reduce((n, t) => n + t.x.length, 0)),
        wrong: String(built[pass].wrongCount) };
      const config = modeBarConfig({ filename: `rmsnorm-${pass}-${this.view}`, onCsv: () => this.downloadCsv() });
      drawSerial(el, () => {
        const plotted = Plotly.react(el, data, layout, config);
        this._hook(el);
        const drawn = el.querySelector(".legend .bg");
        const need = drawn ? Math.ceil(drawn.getBBox().height) + LEGEND_GAP_PX : 0;
        // A second layout only when the band is short (the legend would be cut) or much too tall: a relayout costs
        // 0.1-0.2 s of a busy 2-core machine on the first look (issue 35); a few spare pixels cost nothing.
        const refit = data.length && (need > legendPx + 1 || legendPx - need > LEGEND_ROW_PX);
        this._legendPx.set(bandKey, refit ? need : legendPx);
        const relaid = refit ? Plotly.relayout(el, legendBand(band, need)) : null;
        untab(el);
        Object.assign(el.dataset, counts); // what the tests read: the counts of what is drawn now
        return Promise.all([plotted, relaid]);
      });
    }
    this._renderProfile(scheme, theme);
  }

  // Once per panel: keep the mode bar out of the tab order whenever plotly redraws it; a click on a point
  // picks the shape of the kernel breakdown.
  _hook(el) {
    if (el._chartsHooked || !el.on) return;
    el._chartsHooked = true;
    el.on("plotly_afterplot", () => untab(el));
    el.on("plotly_click", (ev) => {
      const c = ev?.points?.[0]?.customdata;
      if (!Array.isArray(c)) return;
      const pass = Object.entries(this.panels).find(([, p]) => p === el)?.[0];
      this.profileShape = { pass, dtype: c[3], M: c[1], N: c[2] };
      this._renderProfile(currentScheme(), chartTheme());
    });
  }

  _renderProfile(scheme, theme) {
    const { profile, profileCaption } = this.els;
    if (!profile || !profileCaption) return;
    const rows = profiledRows(this.sources, (r) => this._keep(r));
    const shape = pickShape(rows, this.profileShape);
    drawProfile({ el: profile, caption: profileCaption, rows, shape, scheme, theme, multiRun: this.sources.length > 1,
      onCsv: () => this.downloadCsv() });
  }

  // The CSV of what the charts show now: one line per plotted point, in the current view's units.
  csvText() {
    return csvOfView(this._entries, this.view);
  }

  downloadCsv() {
    const { dtype, M } = this.filter;
    download(this.csvText(), `rmsnorm-${this.view}-${dtype}-M${M}.csv`);
  }

  downloadPng() {
    for (const [pass, el] of Object.entries(this.panels)) {
      window.Plotly?.downloadImage(el, { format: "png", filename: `rmsnorm-${pass}-${this.view}`, scale: 2 });
    }
  }

  _describeSources(built) {
    if (this.els.notes) this.els.notes.textContent = this.altView ? altCaption(this.altView) : chartNotes(built, this._entries);
    if (this.sourcesLine) this.sourcesLine.textContent = sourcesSentence(this.sources);
  }
}
