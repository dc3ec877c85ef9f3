// The workspace family: every truck unloads at its own bay (its rows of the fp32 partial buffer), all in
// parallel; then a second pass consolidates the bays into the dock (dγ). The bays are shared with the
// persistent family (bayPos, paintBays).

import { frac, lerp, paintDockBar, unloaded } from "./lane.js";
import { plural } from "./labels.js";

export function bayPos(g, b, bays) {
  const h = Math.min(g.th + 3, (g.bottom - g.top) / bays);
  return { x: g.bayX, y: g.mid - (bays * h) / 2 + b * h, h };
}

// One bay (partial row), its outline and the share `filled` of it holding partial sums.
export function paintBay(ctx, g, bay, filled, color) {
  ctx.strokeStyle = g.c.bay;
  ctx.strokeRect(bay.x, bay.y + 0.5, g.tw * 0.9, Math.max(1, bay.h - 1));
  ctx.fillStyle = color;
  ctx.globalAlpha = 0.85;
  ctx.fillRect(bay.x, bay.y + 0.5, g.tw * 0.9 * filled, Math.max(1, bay.h - 1));
  ctx.globalAlpha = 1;
}

// The bays filling as their trucks unload, emptying into dγ during the consolidation; packets of partial
// sums flow from the bays to the dock meanwhile.
export function paintBays(ctx, lane, g, t, color, boxes) {
  const s = lane.schedule;
  const c = s.consolidation ? frac(t, s.consolidation.start, s.consolidation.end) : 0;
  for (let b = 0; b < s.bays; b++) {
    const bay = bayPos(g, b, s.bays);
    const mine = s.trucks.filter((tr) => tr.bay === b);
    const filled = mine.reduce((a, tr) => a + unloaded(tr, t), 0) / Math.max(1, mine.length);
    paintBay(ctx, g, bay, filled * (1 - c), color);
    if (c > 0 && c < 1) {
      const f = (c * 4 + b * 0.37) % 1;
      ctx.beginPath();
      ctx.arc(lerp(bay.x + g.tw, g.dockX, f), lerp(bay.y + bay.h / 2, g.mid, f), 2, 0, Math.PI * 2);
      ctx.fill();
    }
  }
  paintDockBar(ctx, g, c, color, "dγ", boxes);
}

export function bayDestination(lane, g, tr) {
  const bay = bayPos(g, tr.bay, lane.schedule.bays);
  return { x: bay.x - g.tw - 3, y: bay.y + (bay.h - g.th) / 2 };
}

export const baySentence = (s) => `; ${plural(s.partialRows, "partial row")}, consolidated in a second pass.`;

export default {
  kind: "workspace",
  title: "workspace: own bay per truck, then a 2nd pass",
  plan: { unload: "bays" },
  paint: paintBays,
  destination: bayDestination,
  sentence: baySentence,
  what: (s) => `every block writes its partial dγ row to its own bay at once (no waiting), then a second pass sums ` +
    `the ${plural(s.partialRows, "partial row")}: it pays that extra write and read instead of a queue.`,
};
