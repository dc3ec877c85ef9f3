// One lane's DOM: a figure with its labels as text (name, family, grid above the canvas; phase and clock
// below), laid out by CSS so they wrap instead of overlapping on narrow screens, and the canvas the painter
// draws on. The canvas carries a sentence for screen readers.

import { colorFor } from "./palette.js";
import { plural } from "./dock_painters/labels.js";

export const LANE_HEIGHT = 216;

function label(cls, textValue = "") {
  const el = document.createElement("span");
  el.className = `lane-label ${cls}`;
  el.textContent = textValue;
  return el;
}

export function gridText(s) {
  return `${plural(s.programs, "program")} × ${plural(s.rowsPerProgram, "row")}` +
    (s.partialRows != null ? ` · ${plural(s.partialRows, "partial row")}` : "") +
    (s.occupancy ? ` · ${s.occupancy.sms} SMs × ${s.occupancy.perSm} per SM${s.occupancy.source}` : "") +
    (s.blocksPerTruck > 1 ? ` · 1 truck = ${s.blocksPerTruck.toFixed(s.blocksPerTruck % 1 ? 1 : 0)} blocks` : "");
}

export function laneSentence({ impl, schedule: s, painter }) {
  const base = `${impl.name} (${impl.family}): ${plural(s.programs, "program")}, ${plural(s.rowsPerProgram, "row")} each`;
  return base + (painter.sentence ? painter.sentence(s) : ".");
}

// Append a lane for `info` ({impl, painter, schedule, ...}) to `box`; returns the lane object.
export function makeLane(box, info) {
  const { impl, painter, schedule } = info;
  const figure = document.createElement("figure");
  figure.className = "lane";
  figure.dataset.impl = impl.name;
  figure.dataset.kind = schedule.kind;
  const head = document.createElement("figcaption");
  head.className = "lane-head";
  const name = label("lane-name", impl.name);
  name.style.color = colorFor(impl.name);
  const family = label("lane-family", painter.familyTitle ? painter.familyTitle(impl.family) : painter.title);
  const grid = label("lane-grid", gridText(schedule));
  const sentence = document.createElement("span");
  sentence.className = "sr-only";
  head.append(name, family, grid, sentence);
  const canvas = document.createElement("canvas");
  canvas.setAttribute("role", "img");
  const foot = document.createElement("div");
  foot.className = "lane-foot";
  const status = label("lane-status");
  const clock = label("lane-clock");
  foot.append(status, clock);
  const what = document.createElement("p"); // what to conclude from this lane (setLaneWhat)
  what.className = "lane-what";
  figure.append(head, canvas, foot, what);
  box.append(figure);
  const lane = { ...info, figure, canvas, ctx: canvas.getContext("2d"), pos: new Map(), frame: 0, texts: { status, clock, what } };
  const said = laneSentence(lane);
  canvas.setAttribute("aria-label", said);
  sentence.textContent = said;
  return lane;
}

// The lane's "what you see" line: what its picture and time say (dock_scene.js writes it once per show).
export function setLaneWhat(lane, text) {
  lane.texts.what.textContent = text;
}

// Set the lane's phase and clock lines (only when they change: they are rewritten every frame).
export function setLaneTexts(lane, { status, clock, done }) {
  const { texts } = lane;
  if (texts.status.textContent !== status) texts.status.textContent = status;
  if (texts.clock.textContent !== clock) texts.clock.textContent = clock;
  texts.clock.classList.toggle("done", Boolean(done));
}
