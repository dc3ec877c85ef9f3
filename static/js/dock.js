// The loading dock: an animated picture of the dγ reduction, one lane per implementation.
// Rows are carts, thread blocks (programs) are trucks, the dγ vector is the dock; each family has its
// painter (dock_painters/: atomic = one door, workspace = a bay per truck then a 2nd pass, persistent = few
// trucks with many rows, a default for the rest). The grid is the real one (GET /api/launch); the times are
// the selected run's measured ones, at the shapes it measured (dock_data.js); the cost model
// (dock_model.js) draws other shapes, and lanes the run did not measure, only when the user ticks "cost model for
// unmeasured shapes" (never in place of a measured time).
// The lanes are drawn and animated by dock_scene.js. Test hooks: window.dockState[impl] = {queueLength, frame,
// timing, ...}; window.dockScene (dock_scene.js; the dock adds mValues, nValues and, through dock_controls.js,
// dtype, runId, offered).

import { getLaunch } from "./api.js";
import { familyOf, painterFor, scheduleFor } from "./dock_painters/index.js";
import { bestShape, chooseDtype, isGpuRun, lanesLacking, measuredShapes, measuredUs, nearestIndex, readUrlShape, writeUrlShape } from "./dock_data.js";
import { renderPicker, showLegend, showSource, timingSentence } from "./dock_controls.js";
import { DockScene } from "./dock_scene.js";

const POW2 = (lo, hi) => Array.from({ length: hi - lo + 1 }, (_, i) => 2 ** (lo + i));
const DEFAULT_M = POW2(8, 17);
const DEFAULT_N = POW2(8, 15);
const union = (a, b = []) => [...new Set([...a, ...b])].sort((x, y) => x - y);

export class Dock {
  constructor(els) {
    this.els = els; // {mode, m, mOut, n, nOut, sm, play, impls, lanes, timing, useModel, source, dtypeFilter, legend}
    this.impls = [];
    this.hidden = new Set();
    this.picked = false; // the user ticked or unticked a lane: the dock no longer chooses the lanes itself
    this.measured = null; // the run document the dock uses
    this.offered = null; // a finished run the user may switch the dock to
    this.mValues = [...DEFAULT_M];
    this.nValues = [...DEFAULT_N];
    this._rebuildTimer = null;
    this._generation = 0;
    this._filter = this._filterValue();
    this.dtypeChoice = chooseDtype(null, this.mode, this._filter);
    // The shape asked for: the URL's dockM/dockN, then the user's slider moves. Each run opened snaps to it (the
    // first look's run would otherwise use up a shared link's shape before the user opens theirs).
    this.wantShape = readUrlShape();
    // Every frame: the chart's dtype filter may have changed (the dock follows it).
    this.scene = new DockScene({ box: els.lanes, mode: () => this.mode,
      onFrame: () => this._filterValue() !== this._filter && this._refreshData() });
    this._wire();
    showLegend(els.legend, this.mode);
    this._setShape(this.wantShape.M ?? 16384, this.wantShape.N ?? 4096);
    this._updatePlayButton();
    this._showSource();
  }

  get mode() {
    return this.els.mode.value;
  }
  get M() {
    return this.mValues[Number(this.els.m.value)];
  }
  get N() {
    return this.nValues[Number(this.els.n.value)];
  }
  get smCount() {
    return Math.max(1, Math.min(1024, Number(this.els.sm.value) || 132));
  }
  // Sliders keep to the measured shapes unless the user asks for the cost model elsewhere.
  get measuredOnly() {
    return Boolean(this.measured) && !this.els.useModel?.checked;
  }

  _wire() {
    const { mode, m, n, sm, play, useModel } = this.els;
    mode.addEventListener("change", () => {
      showLegend(this.els.legend, this.mode);
      if (!this.picked) this.hidden = this._defaultHidden(this.impls);
      this._renderPicker();
      this._refreshData();
    });
    m.addEventListener("input", () => {
      this._setShape(this.mValues[Number(m.value)], this.N);
      this._shapeChosen();
    });
    n.addEventListener("input", () => {
      this._showSliderValues();
      this._shapeChosen();
    });
    useModel?.addEventListener("change", () => this._refreshData());
    sm.addEventListener("change", () => this.rebuild());
    play.addEventListener("click", () => {
      this.scene.setPlaying(!this.scene.playing);
      this._updatePlayButton();
    });
  }

  _shapeChosen() {
    this.wantShape = { M: this.M, N: this.N };
    writeUrlShape(this.M, this.N);
    this.rebuild(150);
  }

  _updatePlayButton() {
    this.els.play.textContent = this.scene.playing ? "Pause" : "Play";
    this.els.play.setAttribute("aria-pressed", String(this.scene.playing));
  }

  _filterValue() {
    return this.els.dtypeFilter?.value || "all";
  }

  // The values the sliders offer: the measured shapes of the run for this pass and dtype (N: those measured
  // at the chosen M), or, with the cost model asked for (or no run), powers of two plus the measured ones.
  _shapeSpace() {
    const doc = this.measured;
    const opts = { mode: this.mode, dtype: this.dtypeChoice.dtype, impls: this._shown().map((i) => i.name) };
    const sh = doc ? measuredShapes(doc, opts) : null;
    if (this.measuredOnly && sh.Ms.length) return { Ms: sh.Ms, nsAt: sh.nsAt };
    const Ns = union(DEFAULT_N, sh?.allNs);
    return { Ms: union(DEFAULT_M, sh?.Ms), nsAt: () => Ns };
  }

  // Move the sliders to the shape nearest (M, N) among those offered.
  _setShape(M, N) {
    const space = this._shapeSpace();
    this.mValues = space.Ms;
    const mi = nearestIndex(this.mValues, M);
    this.nValues = space.nsAt(this.mValues[mi]);
    const ni = nearestIndex(this.nValues, N);
    const { m, n } = this.els;
    m.min = n.min = "0";
    m.max = String(this.mValues.length - 1);
    n.max = String(this.nValues.length - 1);
    m.value = String(mi);
    n.value = String(ni);
    this._showSliderValues();
    window.dockScene.mValues = [...this.mValues];
    window.dockScene.nValues = [...this.nValues];
  }

  _showSliderValues() {
    this.els.mOut.value = this.els.mOut.textContent = String(this.M);
    this.els.nOut.value = this.els.nOut.textContent = String(this.N);
    this.els.m.setAttribute("aria-valuetext", `M = ${this.M}`);
    this.els.n.setAttribute("aria-valuetext", `N = ${this.N}`);
  }

  // The dtype (from the chart's filter), the slider values and the lanes, after anything they depend on changed.
  _refreshData() {
    this._filter = this._filterValue();
    this.dtypeChoice = chooseDtype(this.measured, this.mode, this._filter);
    const [M, N] = [this.M, this.N];
    this._setShape(M, N);
    if (this.M !== M || this.N !== N) writeUrlShape(this.M, this.N);
    this._showSource();
    this.rebuild();
  }

  setImplementations(impls) {
    this.impls = impls;
    this.hidden = this._defaultHidden(impls);
    this._renderPicker();
    this._refreshData();
  }

  // The lanes shown for a pass (implementation names).
  laneNames(mode = this.mode) {
    return this.impls.filter((i) => i.passes.includes(mode) && !this.hidden.has(i.name)).map((i) => i.name);
  }

  _shown() {
    return this.impls.filter((i) => i.passes.includes(this.mode) && !this.hidden.has(i.name));
  }

  // Shown at first: every implementation with a drawn strategy (plugins included) that runs here or that the dock's
  // run measured in the pass shown (a CPU host showing a GPU run draws that run's lanes; a GPU-only plug-in measured
  // backward only has no forward lane); the opaque baselines and the rest are one click away.
  _defaultHidden(impls, doc = this.measured) {
    const measured = new Set((doc?.rows ?? []).filter((r) => r.status === "ok" && r.pass === this.mode)
      .map((r) => r.impl));
    return new Set(impls.filter((i) => familyOf(i) === "baseline" || (!i.available && !measured.has(i.name)))
      .map((i) => i.name));
  }

  // Every lane the dock can draw in a mode, shown or not (the baselines have no strategy to draw).
  drawableLanes(mode = this.mode) {
    return this.impls.filter((i) => i.passes.includes(mode) && familyOf(i) !== "baseline").map((i) => i.name);
  }

  _renderPicker() {
    renderPicker(this.els.impls, this.impls.filter((i) => i.passes.includes(this.mode)), this.hidden, () => {
      this.picked = true;
      this._refreshData();
    });
  }

  // The run the dock uses (the user opened it, or it is the first GPU run to finish): its measured times set
  // the lanes' speeds; the sliders move to the shape asked for (the URL's dockM/dockN or the user's last slider
  // move, snapped to the nearest measured), else to the shape it measured for the most of the lanes shown; the
  // SM count to its GPU's.
  // name: the History's name of the run (run_names.js).
  setMeasured(doc, name = null) {
    this.measured = doc?.rows?.length ? doc : null;
    this.measuredName = this.measured ? name : null;
    if (!this.picked && this.impls.length) {
      this.hidden = this._defaultHidden(this.impls);
      this._renderPicker();
    }
    if (this.offered && this.offered === doc) this.offered = null;
    this._filter = this._filterValue();
    this.dtypeChoice = chooseDtype(this.measured, this.mode, this._filter);
    if (this.measured) {
      const { M: uM, N: uN } = this.wantShape;
      const best = bestShape(doc, { mode: this.mode, dtype: this.dtypeChoice.dtype, impls: this._shown().map((i) => i.name) });
      this._setShape(uM ?? best?.M ?? this.M, uN ?? best?.N ?? this.N);
      writeUrlShape(this.M, this.N);
      const device = doc.run?.device;
      if (device?.kind === "cuda" && Number.isFinite(device.sm_count) && device.sm_count > 0) this.els.sm.value = String(device.sm_count);
    } else this._setShape(this.M, this.N);
    this._showSource();
    this.rebuild();
  }

  // A run that just finished: the dock switches to it only when it has no run yet and this one ran on a
  // GPU; otherwise it is offered (a button), so a CPU sweep never replaces the GPU run silently.
  offerRun(doc) {
    if (!doc?.rows?.some((r) => r.status === "ok")) return;
    if (!this.measured && isGpuRun(doc)) return this.setMeasured(doc);
    this.offered = doc;
    this._showSource();
  }

  _showSource() {
    showSource(this.els.source, { measured: this.measured, offered: this.offered, dtypeChoice: this.dtypeChoice,
      useOffered: () => this.setMeasured(this.offered), name: this.measuredName,
      lacking: lanesLacking(this.measured, this.mode, this._shown().map((i) => i.name)) });
  }

  rebuild(delayMs = 0) {
    clearTimeout(this._rebuildTimer);
    this._rebuildTimer = setTimeout(() => this._rebuildNow(), delayMs);
  }

  async _rebuildNow() {
    const generation = ++this._generation;
    const { M, N, smCount, mode } = this;
    const { dtype } = this.dtypeChoice;
    let launches = {};
    try {
      launches = await getLaunch(M, N, smCount);
    } catch (err) {
      this.els.timing.textContent = `Could not read the launch grids: ${err.message}`;
    }
    if (generation !== this._generation) return; // a newer rebuild is on its way
    const runId = this.measured?.run?.run_id ?? null; // the run whose times the lanes take
    const schedules = this._shown().map((impl) => {
      const launch = launches?.[impl.name] ?? null;
      const measured = this.measured ? measuredUs(this.measured, { impl: impl.name, mode, M, N, dtype }) : null;
      const family = familyOf(impl);
      const painter = painterFor(family, launch, mode);
      const forwardLaunch = impl.passes.includes("bwd") ? null : launch;
      const elementBytes = dtype === "float32" ? 4 : 2;
      const schedule = scheduleFor({ family, launch, M, N, smCount, mode, elementBytes, forwardLaunch });
      return { impl, launch, measured, schedule, painter, dtype, runId };
    });
    const allMeasured = schedules.length > 0 && schedules.every((s) => s.measured);
    const model = !allMeasured && !this.measuredOnly;
    const ratio = this.scene.show(schedules, { model });
    this.els.timing.textContent = timingSentence(schedules, {
      allMeasured, model, ratio, mode, M, N, smCount, dtype, run: this.measured?.run,
    });
  }
}
