// The dock's moving picture (dock.js decides what its lanes are): one canvas lane per implementation's
// timetable, all on one time scale, animated frame by frame; each lane drawn by its family's painter
// (dock_painters/) with its DOM texts (dock_lanes.js). Test hooks: window.dockState[impl] (what a lane shows
// now; runId: the run whose times it takes, null for none), window.dockScene.{playing, frame, seekUs}.

import { colorFor } from "./palette.js";
import { phaseAt, stretchTo } from "./dock_model.js";
import { geometry, paintGround, paintTrucks } from "./dock_painters/lane.js";
import { fmtUs } from "./dock_painters/labels.js";
import { LANE_HEIGHT, makeLane, setLaneTexts, setLaneWhat } from "./dock_lanes.js";
import { dockTheme, onSchemeChange } from "./chart_theme.js";

const HOLD_MS = 1500; // the finished picture stays this long before the loop starts again

export class DockScene {
  // box: the lanes' container; mode(): the pass shown ("fwd" / "bwd"); onFrame(): called before every frame
  // (the dock checks there whether what it shows changed).
  constructor({ box, mode, onFrame }) {
    this.box = box;
    this.mode = mode;
    this.onFrame = onFrame;
    this.lanes = [];
    this.playing = !window.matchMedia?.("(prefers-reduced-motion: reduce)").matches;
    this.clock = 0; // ms of wall time into the loop
    this.frame = 0;
    this.last = null;
    this.slowMs = 5000;
    this.msPerUs = 1;
    this.fastest = null;
    this.theme = dockTheme(); // the canvas colours of the page's colour scheme (light or dark)
    onSchemeChange(() => this._retheme());
    window.dockState = {};
    window.dockScene = { playing: this.playing, frame: 0, seekUs: (us) => this.seekUs(us) };
    new ResizeObserver(() => this.resize()).observe(box);
    requestAnimationFrame((ts) => this._tick(ts));
  }

  setPlaying(on) {
    this.playing = Boolean(on);
    window.dockScene.playing = this.playing;
  }

  // schedules: [{impl, launch, measured, schedule, painter, dtype, runId}]; a lane's measured time stretches its
  // timetable ("measured"); a lane with none is drawn from the cost model's times when `model` ("model"), else not
  // drawn ("unmeasured"). The model never replaces a measured time. Returns the slowest lane's time / the fastest's.
  show(schedules, { model }) {
    for (const s of schedules) {
      s.timing = s.measured ? "measured" : model ? "model" : "unmeasured";
      if (s.timing === "measured") s.schedule = stretchTo(s.schedule, s.measured.us);
    }
    const drawn = schedules.filter((s) => s.timing !== "unmeasured").map((s) => s.schedule.total);
    const fastest = Math.min(...drawn);
    const slowest = Math.max(...drawn);
    const ratio = drawn.length ? slowest / fastest : 1;
    // The slowest lane takes 6–30 s of wall time (the fastest at least 3 s when it can); every lane uses the same
    // scale, so the ratios on screen are the ratios of the times (measured ones when a run is selected).
    this.slowMs = Math.min(30000, Math.max(6000, 3000 * ratio));
    this.msPerUs = drawn.length ? this.slowMs / slowest : 1;
    this.fastest = drawn.length ? fastest : null;
    this.box.replaceChildren();
    window.dockState = {};
    this.lanes = schedules.map((info) => Object.assign(makeLane(this.box, info), { theme: this.theme }));
    for (const lane of this.lanes) setLaneWhat(lane, this._what(lane));
    this.resize();
    for (const lane of this.lanes) this._draw(lane, 0, true);
    this.clock = 0;
    return ratio;
  }

  resize() {
    const dpr = window.devicePixelRatio || 1;
    for (const lane of this.lanes) {
      const w = Math.max(240, lane.canvas.parentElement.clientWidth);
      lane.w = w;
      lane.h = LANE_HEIGHT;
      lane.canvas.style.width = `${w}px`;
      lane.canvas.style.height = `${LANE_HEIGHT}px`;
      lane.canvas.width = Math.round(w * dpr);
      lane.canvas.height = Math.round(LANE_HEIGHT * dpr);
      lane.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      lane.pos.clear();
      if (!this.playing || lane.timing === "unmeasured") this._draw(lane, this._laneTime(lane, this.clock / this.msPerUs), true);
    }
  }

  // "What you see": what the lane's picture shows, and where its time puts it among the lanes drawn.
  _what(lane) {
    if (lane.timing === "unmeasured") {
      return "What you see: no lane: the selected run did not measure it at this shape (the cost model can draw it).";
    }
    const s = lane.schedule;
    const drawn = this.lanes.filter((l) => l.timing !== "unmeasured");
    const ratio = this.fastest ? s.total / this.fastest : 1;
    const where = drawn.length < 2 ? ""
      : ratio <= 1.0005 ? ` Here it is the fastest of the ${drawn.length} lanes`
        : ` Here it takes ${ratio.toFixed(2)}× the fastest lane's time`;
    const how = lane.timing === "model" ? " (cost model: illustrative)." : where ? " (measured)." : "";
    return `What you see: ${lane.painter.what?.(s, lane) ?? "its blocks' work."}${where}${how}`;
  }

  // The system's colour scheme changed: the canvas colours and the lanes' names follow it.
  _retheme() {
    this.theme = dockTheme();
    for (const lane of this.lanes) {
      lane.theme = this.theme;
      lane.figure.querySelector(".lane-name").style.color = colorFor(lane.impl.name);
      this._draw(lane, this._laneTime(lane, this.clock / this.msPerUs), true);
    }
  }

  _laneTime(lane, us) {
    return lane.timing === "unmeasured" ? 0 : Math.min(us, lane.schedule.total);
  }

  // Jump to time `us` of the timetable (the tests' and screenshots' way to show a chosen moment).
  seekUs(us) {
    this.clock = Math.max(0, us) * this.msPerUs;
    for (const lane of this.lanes) this._draw(lane, this._laneTime(lane, us), true);
  }

  _tick(ts) {
    const dt = this.last == null ? 16 : Math.min(100, ts - this.last);
    this.last = ts;
    this.onFrame?.();
    if (this.playing && this.lanes.length) {
      this.clock += dt;
      let snap = false;
      if (this.clock > this.slowMs + HOLD_MS) {
        this.clock = 0;
        snap = true;
      }
      this.frame++;
      for (const lane of this.lanes) {
        if (lane.timing === "unmeasured") continue;
        lane.frame++;
        this._draw(lane, this._laneTime(lane, this.clock / this.msPerUs), snap, dt);
      }
      window.dockScene.frame = this.frame;
    }
    requestAnimationFrame((t) => this._tick(t));
  }

  // The lane's painter (dock_painters/) draws its family's picture; the texts are the lane's DOM labels.
  _draw(lane, t, snap = false, dt = 16) {
    const { ctx, schedule: s, painter } = lane;
    const g = geometry(lane, { top: 20, bottomPad: 8 });
    const color = colorFor(lane.impl.name);
    const boxes = [];
    paintGround(ctx, g, s, t);
    painter.paint(ctx, lane, g, t, color, boxes);
    paintTrucks(ctx, lane, g, t, { snap, dt, color, painter, extra: painter.prepare?.(s, t) });

    const unmeasured = lane.timing === "unmeasured";
    const q = painter.queue && !unmeasured ? painter.queue(s, t) : 0;
    const phase = unmeasured ? "not measured" : phaseAt(s, t);
    const ratio = this.fastest ? s.total / this.fastest : 1;
    const done = t >= s.total;
    setLaneTexts(lane, unmeasured
      ? { status: `not measured at this shape (${lane.dtype}) in the selected run`, clock: "no time" }
      : {
        status: phase + (painter.status ? painter.status(s, t) : ""),
        clock: done ? `done in ${fmtUs(s.total)} (${lane.timing}) · ${ratio.toFixed(2)}× the fastest` : `${fmtUs(t)} of ${fmtUs(s.total)} (${lane.timing})`,
        done,
      });

    window.dockState[lane.impl.name] = {
      family: lane.impl.family, kind: s.kind, mode: this.mode(), programs: s.programs, rowsPerProgram: s.rowsPerProgram,
      partialRows: s.partialRows, trucks: s.trucks.length, blocksPerTruck: s.blocksPerTruck, queueLength: q,
      maxQueueLength: s.maxQueueLength, frame: lane.frame, phase, progress: s.total ? t / s.total : 1, totalUs: s.total,
      modelUs: s.modelTotal, measuredUs: lane.measured?.us ?? null, timing: lane.timing, M: s.M, N: s.N, smCount: s.smCount,
      dtype: lane.dtype, runId: lane.runId ?? null, labels: boxes, canvasW: g.W, canvasH: g.H, what: lane.texts.what.textContent,
    };
  }
}
