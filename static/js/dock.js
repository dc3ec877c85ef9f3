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
import { buildSchedule, stretchTo, queueLength, waitingTrucks, phaseAt } from "./dock_model.js";

const POW2 = (lo, hi) => Array.from({ length: hi - lo + 1 }, (_, i) => 2 ** (lo + i));
const DEFAULT_M = POW2(8, 17);
const DEFAULT_N = POW2(8, 15);
const LANE_HEIGHT = 260;
const HOLD_MS = 1500;
const clamp01 = (v) => Math.max(0, Math.min(1, v));
const lerp = (a, b, f) => a + (b - a) * f;
const fmtUs = (us) => (us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(us < 10 ? 2 : 1)} µs`);
const FAMILY_TEXT = {
  atomic: "atomic: all trucks share one dock door",
  workspace: "workspace: own bay per truck, then a 2nd pass",
  persistent: "persistent: few trucks, running load",
  forward: "forward: no dγ reduction",
  generic: "generic drawing",
};

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
      const schedule = buildSchedule({ family: impl.family, launch, M, N, smCount, mode, elementBytes, forwardLaunch });
      return { impl, launch, measured: m, schedule };
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
    this.lanes = schedules.map(({ impl, launch, measured, schedule, timing }) => {
      const figure = document.createElement("figure");
      figure.className = "lane";
      figure.dataset.impl = impl.name;
      const canvas = document.createElement("canvas");
      canvas.setAttribute("role", "img");
      const caption = document.createElement("figcaption");
      caption.className = "sr-only";
      figure.append(canvas, caption);
      box.append(figure);
      const lane = { impl, launch, measured, schedule, timing, canvas, caption, ctx: canvas.getContext("2d"), pos: new Map(), frame: 0 };
      const label = this._laneSentence(lane);
      canvas.setAttribute("aria-label", label);
      caption.textContent = label;
      return lane;
    });
    this._resize();
    for (const lane of this.lanes) this._draw(lane, 0, true);
  }

  _laneSentence({ impl, schedule: s }) {
    const base = `${impl.name} (${impl.family}): ${s.programs} programs, ${s.rowsPerProgram} rows each`;
    if (s.kind === "atomic") return `${base}; all queue at one dock, up to ${s.maxQueueLength} blocks waiting.`;
    if (s.kind === "workspace" || s.kind === "persistent") return `${base}; ${s.partialRows} partial rows, consolidated in a second pass.`;
    return `${base}.`;
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

  // ---- drawing -------------------------------------------------------------------------------

  _geometry(lane) {
    const W = lane.w ?? 400;
    const H = lane.h ?? LANE_HEIGHT;
    const top = 44;
    const bottom = H - 26;
    const tw = Math.max(11, Math.min(20, W / 30));
    const th = Math.round(tw * 0.55);
    const rows = Math.max(1, Math.floor((bottom - top) / (th + 3)));
    return {
      W, H, top, bottom, mid: (top + bottom) / 2, tw, th, rows,
      yard: [8, W * 0.17], park: [W * 0.2, W * 0.42], bayX: W * 0.7, dockX: W - 8 - Math.max(14, W * 0.045), dockW: Math.max(14, W * 0.045),
    };
  }

  _parkPos(g, i, count) {
    const rows = Math.min(g.rows, Math.max(1, Math.ceil(count / Math.max(1, Math.floor((g.park[1] - g.park[0]) / (g.tw + 4))))));
    const col = Math.floor(i / rows);
    const row = i % rows;
    const usedH = rows * (g.th + 3);
    return { x: g.park[0] + col * (g.tw + 4), y: g.mid - usedH / 2 + row * (g.th + 3) };
  }

  _queuePos(g, j) {
    // j = 0 is the truck at the door; the rest wait in a snaking line behind it, as at an airport:
    // row 0 leads into the door, the next rows alternate below and above it.
    const doorX = g.dockX - g.tw - 4;
    if (j === 0) return { x: doorX, y: g.mid - g.th / 2 };
    const step = g.tw + 4;
    const left = g.park[1] + 8;
    const perRow = Math.max(1, Math.floor((doorX - step - left) / step) + 1);
    const k = j - 1;
    const row = Math.floor(k / perRow);
    const col = k % perRow;
    const along = row % 2 === 0 ? col : perRow - 1 - col; // snake: back and forth
    const band = Math.ceil(row / 2) * (row % 2 ? -1 : 1);
    return { x: doorX - step - along * step, y: g.mid - g.th / 2 + band * (g.th + 5) };
  }

  _bayPos(g, b, bays) {
    const span = g.bottom - g.top;
    const h = Math.min(g.th + 3, span / bays);
    return { x: g.bayX, y: g.mid - (bays * h) / 2 + b * h, h };
  }

  _target(lane, g, tr, t, waitingOrder) {
    const s = lane.schedule;
    const park = this._parkPos(g, tr.index, s.trucks.length);
    if (t < tr.loadStart) return park;
    if (t < tr.loadEnd) {
      if (s.kind !== "persistent") return park;
      // A persistent truck makes round after round to the yard, collecting its many rows.
      const f = (t - tr.loadStart) / Math.max(1e-9, tr.loadEnd - tr.loadStart);
      const rounds = Math.min(6, Math.max(1, s.rowsPerProgram / 8));
      const reach = Math.max(0, g.park[0] - g.yard[1] - 2);
      return { x: park.x - reach * Math.abs(Math.sin(Math.PI * rounds * f)), y: park.y };
    }
    let dest;
    if (s.kind === "atomic") {
      const j = t >= tr.unloadStart ? 0 : 1 + waitingOrder.indexOf(tr);
      dest = this._queuePos(g, j);
    } else if (s.kind === "workspace" || s.kind === "persistent") {
      const bay = this._bayPos(g, tr.bay, s.bays);
      dest = { x: bay.x - g.tw - 3, y: bay.y + (bay.h - g.th) / 2 };
    } else {
      dest = { x: g.W * 0.74 - g.tw - 4, y: park.y };
    }
    if (t < tr.arrive) {
      const f = clamp01((t - tr.loadEnd) / Math.max(1e-9, tr.arrive - tr.loadEnd));
      const e = f * f * (3 - 2 * f);
      return { x: lerp(park.x, dest.x, e), y: lerp(park.y, dest.y, e) };
    }
    return dest;
  }

  _draw(lane, t, snap = false, dt = 16) {
    const ctx = lane.ctx;
    const s = lane.schedule;
    const g = this._geometry(lane);
    const color = colorFor(lane.impl.name);
    ctx.clearRect(0, 0, g.W, g.H);
    ctx.fillStyle = "#fbfaf6";
    ctx.fillRect(0, 0, g.W, g.H);

    // Road from the parking area to the dock.
    ctx.fillStyle = "#ecebe4";
    ctx.fillRect(g.park[0] - 4, g.top - 4, g.dockX - g.park[0] + 4, g.bottom - g.top + 8);

    // Carts (rows) in the yard; picked ones fade as the trucks load them.
    const loaded = s.trucks.reduce((a, tr) => a + clamp01((t - tr.loadStart) / Math.max(1e-9, tr.loadEnd - tr.loadStart)), 0) / s.trucks.length;
    const carts = Math.min(s.M, 60);
    const cartCols = Math.ceil(carts / 10);
    const cw = Math.min(10, (g.yard[1] - g.yard[0]) / Math.max(1, cartCols) - 3);
    const ch = Math.min(8, (g.bottom - g.top) / 10 - 3);
    for (let j = 0; j < carts; j++) {
      const x = g.yard[0] + Math.floor(j / 10) * (cw + 3);
      const y = g.top + (j % 10) * (ch + 3);
      const picked = j < loaded * carts;
      ctx.fillStyle = picked ? "#e2e0d8" : "#8d8a7e";
      ctx.fillRect(x, y, cw, ch);
    }

    // The destination: dock door (atomic), bays + dock (workspace/persistent), a box (generic), y (forward).
    const delivered = s.trucks.reduce((a, tr) => a + clamp01((t - tr.unloadStart) / Math.max(1e-9, tr.unloadEnd - tr.unloadStart)), 0) / s.trucks.length;
    let dockFill = delivered;
    if (s.consolidation) {
      const c = clamp01((t - s.consolidation.start) / Math.max(1e-9, s.consolidation.end - s.consolidation.start));
      dockFill = c;
      for (let b = 0; b < s.bays; b++) {
        const bay = this._bayPos(g, b, s.bays);
        const mine = s.trucks.filter((tr) => tr.bay === b);
        const filled = mine.reduce((a, tr) => a + clamp01((t - tr.unloadStart) / Math.max(1e-9, tr.unloadEnd - tr.unloadStart)), 0) / Math.max(1, mine.length);
        ctx.strokeStyle = "#9a978c";
        ctx.strokeRect(bay.x, bay.y + 0.5, g.tw * 0.9, Math.max(1, bay.h - 1));
        ctx.fillStyle = color;
        ctx.globalAlpha = 0.85;
        ctx.fillRect(bay.x, bay.y + 0.5, g.tw * 0.9 * filled * (1 - c), Math.max(1, bay.h - 1));
        ctx.globalAlpha = 1;
        if (c > 0 && c < 1) {
          // Packets of partial sums flowing from the bays into dγ.
          const f = (c * 4 + b * 0.37) % 1;
          ctx.fillStyle = color;
          ctx.beginPath();
          ctx.arc(lerp(bay.x + g.tw, g.dockX, f), lerp(bay.y + bay.h / 2, g.mid, f), 2, 0, Math.PI * 2);
          ctx.fill();
        }
      }
    }
    if (s.kind === "generic") {
      const x0 = g.W * 0.74;
      ctx.strokeStyle = "#6b6960";
      ctx.strokeRect(x0, g.top, g.W - 8 - x0, g.bottom - g.top);
      ctx.fillStyle = color;
      ctx.globalAlpha = 0.25;
      ctx.fillRect(x0, g.bottom - (g.bottom - g.top) * delivered, g.W - 8 - x0, (g.bottom - g.top) * delivered);
      ctx.globalAlpha = 1;
      this._text(ctx, lane.impl.name, x0 + 4, g.mid - 4, { size: 11, bold: true, color: "#333", maxWidth: g.W - 16 - x0 });
      this._text(ctx, lane.launch ? `${s.programs} programs` : "grid not published", x0 + 4, g.mid + 10, { size: 10, color: "#666", maxWidth: g.W - 16 - x0 });
    } else {
      // The dock: the dγ vector (or y, forward), filling as it is written.
      ctx.fillStyle = "#3c4048";
      ctx.fillRect(g.dockX, g.top, g.dockW, g.bottom - g.top);
      ctx.fillStyle = color;
      const fh = (g.bottom - g.top - 4) * dockFill;
      ctx.fillRect(g.dockX + 2, g.bottom - 2 - fh, g.dockW - 4, fh);
      this._text(ctx, s.kind === "forward" ? "y" : "dγ", g.dockX + g.dockW / 2, g.top - 4, { size: 11, bold: true, align: "center", color: "#333" });
      if (s.kind === "atomic") {
        ctx.fillStyle = "#f2a900";
        ctx.fillRect(g.dockX - 4, g.mid - g.th / 2 - 3, 4, g.th + 6); // the one door
        this._text(ctx, "1 door", g.dockX - 6, g.top + 10, { size: 10, align: "right", color: "#8a6d00" });
      }
    }

    // Trucks.
    const waiting = s.kind === "atomic" ? waitingTrucks(s, t).sort((a, b) => a.unloadStart - b.unloadStart) : [];
    const k = snap ? 1 : 1 - Math.exp(-dt / 70);
    for (const tr of s.trucks) {
      const target = this._target(lane, g, tr, t, waiting);
      const prev = lane.pos.get(tr.index);
      const p = !prev || snap ? target : { x: lerp(prev.x, target.x, k), y: lerp(prev.y, target.y, k) };
      lane.pos.set(tr.index, p);
      const fade = t > tr.unloadEnd ? clamp01(1 - (t - tr.unloadEnd) / (0.04 * s.total + 1e-9)) : 1;
      if (fade <= 0 || t >= s.total) continue;
      const load = t < tr.unloadStart
        ? clamp01((t - tr.loadStart) / Math.max(1e-9, tr.loadEnd - tr.loadStart))
        : 1 - clamp01((t - tr.unloadStart) / Math.max(1e-9, tr.unloadEnd - tr.unloadStart));
      this._truck(ctx, p.x, p.y, g.tw, g.th, color, load, fade * (t < tr.loadStart ? 0.45 : 1));
    }

    // Labels.
    this._text(ctx, lane.impl.name, 8, 16, { size: 13, bold: true, color });
    const famText = FAMILY_TEXT[s.kind] + (s.kind === "generic" ? ` (${lane.impl.family})` : "");
    this._text(ctx, famText, g.W - 8, 16, { size: 11, align: "right", color: "#555", maxWidth: g.W * 0.5 });
    const grid = `${s.programs} programs × ${s.rowsPerProgram} rows` +
      (s.partialRows != null ? ` · ${s.partialRows} partial rows` : "") +
      (s.blocksPerTruck > 1 ? ` · 1 truck = ${s.blocksPerTruck.toFixed(s.blocksPerTruck % 1 ? 1 : 0)} blocks` : "");
    this._text(ctx, grid, 8, 32, { size: 11, color: "#555", maxWidth: g.W - 16 });

    const q = s.kind === "atomic" ? queueLength(s, t) : 0;
    const phase = phaseAt(s, t);
    let status = phase;
    if (s.kind === "atomic") status += ` · queue ${q} blocks (max ${s.maxQueueLength})`;
    const ratio = this.fastest ? s.total / this.fastest : 1;
    const clock = t >= s.total
      ? `done in ${fmtUs(s.total)} (${lane.timing}) · ${ratio.toFixed(2)}× the fastest`
      : `${fmtUs(t)} of ${fmtUs(s.total)} (${lane.timing})`;
    this._text(ctx, status, 8, g.H - 8, { size: 11, color: "#333", maxWidth: g.W * 0.55 });
    this._text(ctx, clock, g.W - 8, g.H - 8, { size: 11, align: "right", color: t >= s.total ? "#1a7f37" : "#555", maxWidth: g.W * 0.45 });

    window.dockState[lane.impl.name] = {
      family: lane.impl.family, kind: s.kind, mode: this.mode, programs: s.programs, rowsPerProgram: s.rowsPerProgram,
      partialRows: s.partialRows, trucks: s.trucks.length, blocksPerTruck: s.blocksPerTruck, queueLength: q,
      maxQueueLength: s.maxQueueLength, frame: lane.frame, phase, progress: s.total ? t / s.total : 1, totalUs: s.total,
      modelUs: s.modelTotal, measuredUs: lane.measured?.us ?? null, timing: lane.timing, M: s.M, N: s.N, smCount: s.smCount,
    };
  }

  _truck(ctx, x, y, w, h, color, load, alpha) {
    ctx.globalAlpha = alpha;
    const body = w * 0.72;
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(x, y, body, h);
    ctx.fillStyle = color;
    ctx.fillRect(x, y + h * (1 - load), body, h * load); // the cargo
    ctx.strokeStyle = color;
    ctx.lineWidth = 1;
    ctx.strokeRect(x + 0.5, y + 0.5, body - 1, h - 1);
    ctx.fillStyle = "#3c4048";
    ctx.fillRect(x + body + 1, y + h * 0.25, w - body - 1, h * 0.75); // the cab
    ctx.globalAlpha = 1;
  }

  _text(ctx, text, x, y, { size = 11, bold = false, color = "#333", align = "left", maxWidth } = {}) {
    ctx.font = `${bold ? "600 " : ""}${size}px system-ui, -apple-system, "Segoe UI", sans-serif`;
    ctx.fillStyle = color;
    ctx.textAlign = align;
    ctx.textBaseline = "alphabetic";
    if (maxWidth) ctx.fillText(text, x, y, maxWidth);
    else ctx.fillText(text, x, y);
    ctx.textAlign = "left";
  }
}
