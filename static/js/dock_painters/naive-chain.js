// The naive-chain family (the CUDA plug-in's cuda-naive): one truck per row, and every truck tips its whole cart on
// the floor (its row of dγ terms: an M×N tensor in x's dtype, as much as dx itself); then two consolidation crews:
// crew 1 sums the floor's columns into the partial rows (the bays), crew 2 sums those into the dock (dγ).
// Three kernels, five passes over M×N; dock_model.js times it ("floor").

import { bayPos, paintBay } from "./workspace.js";
import { frac, lerp, paintDockBar, unloaded } from "./lane.js";
import { text } from "./labels.js";

// The floor, between the parking area and the bays; truck i of n tips its cart at spot i (columns of rows).
function floorBox(g) {
  const x0 = g.park[1] + 6;
  return { x0, x1: Math.max(x0 + 20, g.bayX - 14) };
}

function spot(g, i, n) {
  const f = floorBox(g);
  const rows = Math.max(1, Math.min(g.rows, n));
  const cols = Math.max(1, Math.ceil(n / rows));
  const w = (f.x1 - f.x0) / cols;
  return { x: f.x0 + Math.floor(i / rows) * w, y: g.top + (i % rows) * (g.th + 3), w };
}

const crewProgress = (s, t) => (s.crews ? s.crews.map((c) => frac(t, c.start, c.end)) : [0, 0]);

export default {
  kind: "naive-chain",
  title: "naive chain: every cart on the floor, then two crews",
  plan: { unload: "floor" },

  paint(ctx, lane, g, t, color, boxes) {
    const s = lane.schedule;
    const [c1, c2] = crewProgress(s, t);
    const f = floorBox(g);
    ctx.fillStyle = "#e0dccd"; // the floor
    ctx.fillRect(f.x0 - 2, g.top - 2, f.x1 - f.x0 + 4, g.bottom - g.top + 4);
    text(ctx, "floor", f.x0, g.top - 4, { size: 10, color: "#6b6960", boxes, name: "floor" });
    // The piles: what each truck tipped, swept away by crew 1.
    ctx.fillStyle = color;
    s.trucks.forEach((tr, i) => {
      const p = spot(g, i, s.trucks.length);
      const pile = unloaded(tr, t) * (1 - c1);
      if (pile <= 0) return;
      ctx.globalAlpha = 0.55;
      const w = Math.max(2, Math.min(p.w - g.tw - 2, g.tw)) * pile;
      ctx.fillRect(p.x + g.tw, p.y + 1, w, g.th - 2);
      ctx.globalAlpha = 1;
    });
    // The partial rows: filled by crew 1, emptied into dγ by crew 2.
    for (let b = 0; b < s.bays; b++) {
      const bay = bayPos(g, b, s.bays);
      paintBay(ctx, g, bay, c1 * (1 - c2), color);
      // The crews at work: packets from the floor to the bays, then from the bays to the dock.
      const crew = c1 > 0 && c1 < 1 ? 1 : c2 > 0 && c2 < 1 ? 2 : 0;
      if (crew) {
        const k = ((crew === 1 ? c1 : c2) * 4 + b * 0.37) % 1;
        const [x0, y0, x1, y1] = crew === 1
          ? [f.x1, lerp(g.top, g.bottom, (b + 0.5) / s.bays), bay.x, bay.y + bay.h / 2]
          : [bay.x + g.tw, bay.y + bay.h / 2, g.dockX, g.mid];
        ctx.beginPath();
        ctx.arc(lerp(x0, x1, k), lerp(y0, y1, k), 2, 0, Math.PI * 2);
        ctx.fill();
      }
    }
    text(ctx, `${s.partialRows} rows`, g.bayX, g.top - 4, { size: 10, color: "#6b6960", boxes, name: "bays" });
    paintDockBar(ctx, g, c2, color, "dγ", boxes);
  },

  destination(lane, g, tr) {
    const p = spot(g, tr.index, lane.schedule.trucks.length);
    return { x: p.x, y: p.y };
  },

  status(s, t) {
    const [c1, c2] = crewProgress(s, t);
    return c2 >= 1 ? "" : c1 > 0 ? ` · crew ${c1 < 1 ? 1 : 2} of 2` : "";
  },

  sentence: (s) => `; every block tips its row of dγ terms on the floor (M×N), then crew 1 sums the floor into ` +
    `${s.partialRows} partial rows and crew 2 sums those into dγ.`,
};
