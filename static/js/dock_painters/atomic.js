// The atomic family: every truck (block) queues at ONE dock door and unloads one at a time (its N fp32
// atomics land on the same dγ addresses), so the queue grows with the block count.

import { queueLength, waitingTrucks } from "../dock_model.js";
import { delivered, paintDockBar } from "./lane.js";
import { plural, text } from "./labels.js";

// j = 0 is the truck at the door; the rest wait in a snaking line behind it, as at an airport:
// row 0 leads into the door, the next rows alternate below and above it.
function queuePos(g, j) {
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

export default {
  kind: "atomic",
  title: "atomic: all trucks share one dock door",
  plan: { unload: "one-door" }, // dock_model.js: unloads serialised at one door

  paint(ctx, lane, g, t, color, boxes) {
    paintDockBar(ctx, g, delivered(lane.schedule, t), color, "dγ", boxes);
    ctx.fillStyle = g.c.door;
    ctx.fillRect(g.dockX - 4, g.mid - g.th / 2 - 3, 4, g.th + 6); // the one door
    text(ctx, "1 door", g.dockX - 6, g.top + 10, { size: 10, align: "right", color: g.c.doorInk, boxes, name: "door" });
  },

  // The waiting line, in the order the trucks will get the door.
  prepare(s, t) {
    return waitingTrucks(s, t).sort((a, b) => a.unloadStart - b.unloadStart);
  },

  destination(lane, g, tr, t, waiting) {
    return queuePos(g, t >= tr.unloadStart ? 0 : 1 + waiting.indexOf(tr));
  },

  queue(s, t) {
    return queueLength(s, t);
  },

  status(s, t) {
    return ` · queue ${plural(queueLength(s, t), "block")} (max ${s.maxQueueLength})`;
  },

  sentence(s) {
    return `; all queue at one dock, up to ${plural(s.maxQueueLength, "block")} waiting.`;
  },

  what(s) {
    return `every block adds its rows' dγ into one fp32 vector with atomics, so they wait in one line at its door ` +
      `(up to ${s.maxQueueLength} at once): the more blocks (larger M), the longer the line.`;
  },
};
