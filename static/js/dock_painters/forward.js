// The forward pass (any family): no dγ reduction; each truck normalises its rows and writes y.

import { delivered, paintDockBar } from "./lane.js";

export default {
  kind: "forward",
  title: "forward: no dγ reduction",
  plan: { unload: "direct" },
  paint(ctx, lane, g, t, color, boxes) {
    paintDockBar(ctx, g, delivered(lane.schedule, t), color, "y", boxes);
  },
  destination(lane, g, tr, t, extra, park) {
    return { x: g.W * 0.74 - g.tw - 4, y: park.y };
  },
  what: () => "each block normalises its own rows and writes y; no row needs another's, so nothing waits: " +
    "the time is the bytes moved (x read, y written) and the launch.",
};
