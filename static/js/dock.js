// The loading dock: an animated picture of the dγ reduction, one canvas lane per implementation.
// Rows are carts, thread blocks (programs) are trucks, the dγ vector is the dock.
//   atomic:     every truck queues at ONE dock door and unloads one at a time;
//   workspace:  every truck unloads at its own bay, then a second pass consolidates the bays;
//   persistent: a few trucks (SMs × k) each carry many rows with a running load, one delivery
//               each to a small consolidation;
//   any other family: a generic drawing labelled with its name.
// The grid is the real one (GET /api/launch); the timetable is dock_model.js's.
// Test hook: window.dockState[impl] = {queueLength, maxQueueLength, frame, ...}.

import { getLaunch } from "./api.js";
import { colorFor } from "./palette.js";
import { stretchTo, phaseAt } from "./dock_model.js";
import { familyOf, painterFor, scheduleFor } from "./dock_painters/index.js";
import { geometry, paintGround, paintTrucks } from "./dock_painters/lane.js";
import { fmtUs, text } from "./dock_painters/labels.js";

const POW2 = (lo, hi) => Array.from({ length: hi - lo + 1 }, (_, i) => 2 ** (lo + i));
const DEFAULT_M = POW2(8, 17);
const DEFAULT_N = POW2(8, 15);
const LANE_HEIGHT = 260;
const HOLD_MS = 1500;

export class Dock {
  constructor(els) {
    this.els = els; // {mode, m, mOut, n, nOut, sm, play, impls, lanes, timing}
    this.impls = [];
    this.hidden = new Set();
    this.lanes = [];
    this.measured = null; // a run document
    this.mValues = [...DEFAULT_M];
    this.nValues = [...DEFAULT_N];
    this.playing = !window.matchMedia?.("(prefers-reduced-motion: reduce)").matches;
    this.clock = 0;
    this.frame = 0;
    this.last = null;
    this.slowMs = 5000;
    this.msPerUs = 1;
    this._rebuildTimer = null;
    this._generation = 0;
    window.dockState = {};
    window.dockScene = { playing: this.playing, frame: 0, seekUs: (us) => this.seekUs(us) };
    this._wire();
    this._setSliders(16384, 4096);
    this._updatePlayButton();
    requestAnimationFrame((ts) => this._tick(ts));
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

  _wire() {
    const { mode, m, n, sm, play, lanes } = this.els;
    mode.addEventListener("change", () => {
      this._renderPicker();
      this.rebuild();
    });
    for (const el of [m, n]) {
      el.addEventListener("input", () => {
        this._showSliderValues();
        this.rebuild(150);
      });
    }
    sm.addEventListener("change", () => this.rebuild());
    play.addEventListener("click", () => {
      this.playing = !this.playing;
      this._updatePlayButton();
    });
    new ResizeObserver(() => this._resize()).observe(lanes);
  }

  _updatePlayButton() {
    this.els.play.textContent = this.playing ? "Pause" : "Play";
    this.els.play.setAttribute("aria-pressed", String(this.playing));
    window.dockScene.playing = this.playing;
  }

  _setSliders(M, N) {
    const pick = (values, v) => values.reduce((best, x, i) => (Math.abs(Math.log2(x / v)) < Math.abs(Math.log2(values[best] / v)) ? i : best), 0);
    this.els.m.max = String(this.mValues.length - 1);
    this.els.n.max = String(this.nValues.length - 1);
    this.els.m.min = this.els.n.min = "0";
    this.els.m.value = String(pick(this.mValues, M));
    this.els.n.value = String(pick(this.nValues, N));
    this._showSliderValues();
  }

  _showSliderValues() {
    this.els.mOut.value = this.els.mOut.textContent = String(this.M);
    this.els.nOut.value = this.els.nOut.textContent = String(this.N);
    this.els.m.setAttribute("aria-valuetext", `M = ${this.M}`);
    this.els.n.setAttribute("aria-valuetext", `N = ${this.N}`);
  }

  setImplementations(impls) {
    this.impls = impls;
    this.hidden = this._defaultHidden(impls);
    this._renderPicker();
    this.rebuild();
  }

  _shown() {
    return this.impls.filter((i) => i.passes.includes(this.mode) && !this.hidden.has(i.name));
  }

  // Shown at first: every available implementation with a drawn strategy (plugins included);
  // the opaque baselines and unavailable ones are one click away.
  _defaultHidden(impls) {
    return new Set(impls.filter((i) => !i.available || i.family === "baseline").map((i) => i.name));
  }

  _renderPicker() {
    const box = this.els.impls;
    box.replaceChildren();
    const candidates = this.impls.filter((i) => i.passes.includes(this.mode));
    if (!candidates.length) box.textContent = "No implementation registers this pass.";
    for (const impl of candidates) {
      const label = document.createElement("label");
      const input = document.createElement("input");
      input.type = "checkbox";
      input.value = impl.name;
      input.checked = !this.hidden.has(impl.name);
      input.addEventListener("change", () => {
        if (input.checked) this.hidden.delete(impl.name);
        else this.hidden.add(impl.name);
        this.rebuild();
      });
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = colorFor(impl.name);
      label.append(input, swatch, ` ${impl.name}`);
      label.title = `${impl.family}: ${impl.description || ""}`;
      box.append(label);
    }
  }

  // A stored or just-finished run: its measured times set the lanes' relative speeds. The sliders
  // move to the shape it measured for the most of the lanes shown (they stay put when it measured
  // none of them), and the SM count to its GPU's.
  setMeasured(doc) {
    this.measured = doc;
    if (doc?.rows?.length) {
      const ok = doc.rows.filter((r) => r.status === "ok");
      this.mValues = [...new Set([...DEFAULT_M, ...ok.map((r) => r.M)])].sort((a, b) => a - b);
      this.nValues = [...new Set([...DEFAULT_N, ...ok.map((r) => r.N)])].sort((a, b) => a - b);
      const shown = new Set(this._shown().map((i) => i.name));
      const count = new Map();
      for (const r of ok.filter((r) => r.pass === this.mode && shown.has(r.impl))) {
        const key = `${r.M}x${r.N}`;
        const c = count.get(key) ?? { M: r.M, N: r.N, impls: new Set() };
        c.impls.add(r.impl);
        count.set(key, c);
      }
      const best = [...count.values()].sort((a, b) => b.impls.size - a.impls.size || b.M * b.N - a.M * a.N)[0];
      const [M, N] = [this.M, this.N];
      this._setSliders(best?.M ?? M, best?.N ?? N);
      const device = doc.run?.device;
      if (best && device?.kind === "cuda" && Number.isFinite(device.sm_count) && device.sm_count > 0) {
        this.els.sm.value = String(device.sm_count);
      }
    }
    this.rebuild();
  }

  _measuredUs(name) {
    const rows = (this.measured?.rows ?? []).filter(
      (r) => r.status === "ok" && r.impl === name && r.pass === this.mode && r.M === this.M && r.N === this.N && Number.isFinite(r.median_us),
    );
    if (!rows.length) return null;
    const pref = ["bfloat16", "float16", "float32"];
    rows.sort((a, b) => pref.indexOf(a.dtype) - pref.indexOf(b.dtype));
    return { us: rows[0].median_us, dtype: rows[0].dtype };
  }

  rebuild(delayMs = 0) {
    clearTimeout(this._rebuildTimer);
    this._rebuildTimer = setTimeout(() => this._rebuildNow(), delayMs);
  }

  async _rebuildNow() {
    const generation = ++this._generation;
    const { M, N, smCount, mode } = this;
    let launches = {};
    try {
      launches = await getLaunch(M, N, smCount);
    } catch (err) {
      this.els.timing.textContent = `Could not read the launch grids: ${err.message}`;
    }
    if (generation !== this._generation) return; // a newer rebuild is on its way
    const shown = this._shown();
    const schedules = shown.map((impl) => {
      const launch = launches?.[impl.name] ?? null;
      const m = this._measuredUs(impl.name);
      const elementBytes = m?.dtype === "float32" ? 4 : 2;
      const forwardLaunch = impl.passes.includes("bwd") ? null : launch;
      const family = familyOf(impl);
      const painter = painterFor(family, launch, mode);
      const schedule = scheduleFor({ family, launch, M, N, smCount, mode, elementBytes, forwardLaunch });
      return { impl, launch, measured: m, schedule, painter };
    });
    const allMeasured = schedules.length > 0 && schedules.every((s) => s.measured);
    for (const s of schedules) {
      s.timing = allMeasured ? "measured" : "model";
      if (allMeasured) s.schedule = stretchTo(s.schedule, s.measured.us);
    }
    const totals = schedules.map((s) => s.schedule.total);
    const fastest = Math.min(...totals);
    const slowest = Math.max(...totals);
    const ratio = schedules.length ? slowest / fastest : 1;
    // The slowest lane takes 6–30 s of wall time (the fastest at least 3 s when it can); every lane uses the same scale, so the
    // ratios on screen are the ratios of the times (measured ones when a run is selected).
    this.slowMs = Math.min(30000, Math.max(6000, 3000 * ratio));
    this.msPerUs = schedules.length ? this.slowMs / slowest : 1;
    this.fastest = fastest;
    this._makeLanes(schedules);
    this.clock = 0;
    this.els.timing.textContent = this._timingSentence(schedules, allMeasured, ratio);
  }

  _timingSentence(schedules, allMeasured, ratio) {
    if (!schedules.length) return "Pick at least one implementation to show.";
    const shape = `M=${this.M}, N=${this.N}, ${this.smCount} SMs`;
    if (allMeasured) {
      const run = this.measured?.run;
      return `Speeds are the measured ${this.mode} times at ${shape} from the run on ${run?.device?.name ?? "?"} ` +
        `(slowest/fastest = ${ratio.toFixed(2)}×).`;
    }
    const missing = schedules.filter((s) => !s.measured).map((s) => s.impl.name);
    const why = this.measured
      ? `the selected run has no ${this.mode} time at ${shape} for ${missing.join(", ")}`
      : "no run is selected (open one under History, or finish a sweep)";
    return `Illustrative timing from a byte/atomic cost model at ${shape}: ${why}.`;
  }

  _makeLanes(schedules) {
    const box = this.els.lanes;
    box.replaceChildren();
    window.dockState = {};
    this.lanes = schedules.map(({ impl, launch, measured, schedule, timing, painter }) => {
      const figure = document.createElement("figure");
      figure.className = "lane";
      figure.dataset.impl = impl.name;
      const canvas = document.createElement("canvas");
      canvas.setAttribute("role", "img");
      const caption = document.createElement("figcaption");
      caption.className = "sr-only";
      figure.append(canvas, caption);
      box.append(figure);
      const lane = { impl, launch, measured, schedule, timing, painter, canvas, caption, ctx: canvas.getContext("2d"), pos: new Map(), frame: 0 };
      const label = this._laneSentence(lane);
      canvas.setAttribute("aria-label", label);
      caption.textContent = label;
      return lane;
    });
    this._resize();
    for (const lane of this.lanes) this._draw(lane, 0, true);
  }

  _laneSentence({ impl, schedule: s, painter }) {
    const base = `${impl.name} (${impl.family}): ${s.programs} programs, ${s.rowsPerProgram} rows each`;
    return base + (painter.sentence ? painter.sentence(s) : ".");
  }

  _resize() {
    const dpr = window.devicePixelRatio || 1;
    for (const lane of this.lanes) {
      const w = Math.max(280, lane.canvas.parentElement.clientWidth);
      lane.w = w;
      lane.h = LANE_HEIGHT;
      lane.canvas.style.width = `${w}px`;
      lane.canvas.style.height = `${LANE_HEIGHT}px`;
      lane.canvas.width = Math.round(w * dpr);
      lane.canvas.height = Math.round(LANE_HEIGHT * dpr);
      lane.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      lane.pos.clear();
      if (!this.playing) this._draw(lane, Math.min(this.clock / this.msPerUs, lane.schedule.total), true);
    }
  }

  // Jump to time `us` of the timetable (the tests' and screenshots' way to show a chosen moment).
  seekUs(us) {
    this.clock = Math.max(0, us) * this.msPerUs;
    for (const lane of this.lanes) this._draw(lane, Math.min(us, lane.schedule.total), true);
  }

  _tick(ts) {
    const dt = this.last == null ? 16 : Math.min(100, ts - this.last);
    this.last = ts;
    if (this.playing && this.lanes.length) {
      this.clock += dt;
      let snap = false;
      if (this.clock > this.slowMs + HOLD_MS) {
        this.clock = 0;
        snap = true;
      }
      this.frame++;
      for (const lane of this.lanes) {
        lane.frame++;
        this._draw(lane, Math.min(this.clock / this.msPerUs, lane.schedule.total), snap, dt);
      }
      window.dockScene.frame = this.frame;
    }
    requestAnimationFrame((t) => this._tick(t));
  }

  // ---- drawing: the lane's painter (dock_painters/) draws its family's picture ----------------

  _draw(lane, t, snap = false, dt = 16) {
    const { ctx, schedule: s, painter } = lane;
    const g = geometry(lane);
    const color = colorFor(lane.impl.name);
    const boxes = [];
    paintGround(ctx, g, s, t);
    painter.paint(ctx, lane, g, t, color, boxes);
    paintTrucks(ctx, lane, g, t, { snap, dt, color, painter, extra: painter.prepare?.(s, t) });

    // Labels.
    text(ctx, lane.impl.name, 8, 16, { size: 13, bold: true, color, boxes, name: "name" });
    const famText = painter.familyTitle ? painter.familyTitle(lane.impl.family) : painter.title;
    text(ctx, famText, g.W - 8, 16, { size: 11, align: "right", color: "#555", maxWidth: g.W * 0.5, boxes, name: "family" });
    const grid = `${s.programs} programs × ${s.rowsPerProgram} rows` +
      (s.partialRows != null ? ` · ${s.partialRows} partial rows` : "") +
      (s.blocksPerTruck > 1 ? ` · 1 truck = ${s.blocksPerTruck.toFixed(s.blocksPerTruck % 1 ? 1 : 0)} blocks` : "");
    text(ctx, grid, 8, 32, { size: 11, color: "#555", maxWidth: g.W - 16, boxes, name: "grid" });

    const q = painter.queue ? painter.queue(s, t) : 0;
    const phase = phaseAt(s, t);
    const status = phase + (painter.status ? painter.status(s, t) : "");
    const ratio = this.fastest ? s.total / this.fastest : 1;
    const clock = t >= s.total
      ? `done in ${fmtUs(s.total)} (${lane.timing}) · ${ratio.toFixed(2)}× the fastest`
      : `${fmtUs(t)} of ${fmtUs(s.total)} (${lane.timing})`;
    text(ctx, status, 8, g.H - 8, { size: 11, color: "#333", maxWidth: g.W * 0.55, boxes, name: "status" });
    text(ctx, clock, g.W - 8, g.H - 8, { size: 11, align: "right", color: t >= s.total ? "#1a7f37" : "#555", maxWidth: g.W * 0.45, boxes, name: "clock" });

    window.dockState[lane.impl.name] = {
      family: lane.impl.family, kind: s.kind, mode: this.mode, programs: s.programs, rowsPerProgram: s.rowsPerProgram,
      partialRows: s.partialRows, trucks: s.trucks.length, blocksPerTruck: s.blocksPerTruck, queueLength: q,
      maxQueueLength: s.maxQueueLength, frame: lane.frame, phase, progress: s.total ? t / s.total : 1, totalUs: s.total,
      modelUs: s.modelTotal, measuredUs: lane.measured?.us ?? null, timing: lane.timing, M: s.M, N: s.N, smCount: s.smCount,
      labels: boxes,
    };
  }
}
