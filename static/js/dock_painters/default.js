// Any family without a painter of its own (baselines, "other", an implementation with no published grid):
// trucks deliver to a box labelled with the implementation's name; its title says the family.

import { delivered } from "./lane.js";
import { text } from "./labels.js";

export default {
  kind: "generic",
  title: "generic drawing",
  plan: { unload: "direct" },
  paint(ctx, lane, g, t, color, boxes) {
    const x0 = g.W * 0.74;
    const d = delivered(lane.schedule, t);
    ctx.strokeStyle = g.c.box;
    ctx.strokeRect(x0, g.top, g.W - 8 - x0, g.bottom - g.top);
    ctx.fillStyle = color;
    ctx.globalAlpha = 0.25;
    ctx.fillRect(x0, g.bottom - (g.bottom - g.top) * d, g.W - 8 - x0, (g.bottom - g.top) * d);
    ctx.globalAlpha = 1;
    const maxWidth = g.W - 16 - x0;
    text(ctx, lane.impl.name, x0 + 4, g.mid - 4, { size: 11, bold: true, color: g.c.ink, maxWidth, boxes, name: "box-name" });
    text(ctx, lane.launch ? `${lane.schedule.programs} programs` : "grid not published", x0 + 4, g.mid + 10,
      { size: 10, color: g.c.muted, maxWidth, boxes, name: "box-grid" });
  },
  destination(lane, g, tr, t, extra, park) {
    return { x: g.W * 0.74 - g.tw - 4, y: park.y };
  },
  familyTitle: (family) => `generic drawing (${family})`,
  what: (s, lane) => `a generic drawing: ${lane.launch ? "its family has no painter" : "it publishes no launch grid"}, ` +
    "so the picture is not its kernel; only its time is.",
};
