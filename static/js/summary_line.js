// The one-line answer per pass above the charts (issue 35): for each implementation of one run, the shapes it wins
// of those it measured and the geometric means of its GB/s over the chosen baseline's and over the best peer's,
// the best peer of a shape being the fastest implementation OTHER than this one (so > 1× is the winner's margin,
// < 1× how far it trails the fastest other). The same rule as engine/summary.py `standings` (the API summary and
// the CLI table's footer); a shape is (dtype, M, N) of that pass, every dtype and M of the run (not the filters).

import { bestByShape, shapeKey } from "./shape_table.js";

const geomean = (xs) => (xs.length ? Math.exp(xs.reduce((s, x) => s + Math.log(x), 0) / xs.length) : null);

// rows of one run -> {pass: {impl: {won, measured, vs_baseline, vs_baseline_shapes, vs_best_peer, vs_best_peer_shapes}}}
export function standings(rows, baseline) {
  const measured = new Map(); // shape key -> Map(impl -> GB/s)
  for (const r of rows) {
    if (r.status !== "ok" || !r.GBps) continue;
    const key = shapeKey(r);
    if (!measured.has(key)) measured.set(key, new Map());
    measured.get(key).set(r.impl, r.GBps);
  }
  const best = bestByShape(rows);
  const acc = {};
  for (const [key, byImpl] of measured) {
    const pass = key.split("/")[0];
    for (const [impl, gbps] of byImpl) {
      const a = ((acc[pass] ??= {})[impl] ??= { won: 0, measured: 0, base: [], peer: [] });
      a.measured++;
      if (best.get(key)?.impl === impl) a.won++;
      if (byImpl.get(baseline)) a.base.push(gbps / byImpl.get(baseline));
      const peers = [...byImpl].filter(([other]) => other !== impl).map(([, g]) => g);
      if (peers.length) a.peer.push(gbps / Math.max(...peers));
    }
  }
  const out = {};
  for (const [pass, byImpl] of Object.entries(acc)) {
    out[pass] = {};
    for (const [impl, a] of Object.entries(byImpl)) {
      out[pass][impl] = { won: a.won, measured: a.measured, vs_baseline: geomean(a.base), vs_baseline_shapes: a.base.length,
        vs_best_peer: geomean(a.peer), vs_best_peer_shapes: a.peer.length };
    }
  }
  return out;
}

export const ratioText = (v) => (v == null ? "–" : `${v.toFixed(2)}×`);
const PASS_WORDS = { fwd: "Forward", bwd: "Backward" };

// el: the box above the charts; sources: the chart sources; tableKey: the run the table shows (preferred per pass).
export function renderSummary(el, sources, { baseline, tableKey }) {
  if (!el) return;
  const lines = [];
  for (const pass of ["fwd", "bwd"]) {
    const has = (s) => s.rows.some((r) => r.pass === pass && r.status === "ok" && r.GBps);
    const src = sources.find((s) => String(s.key) === String(tableKey) && has(s)) ?? sources.find(has);
    if (!src) continue;
    const st = standings(src.rows, baseline)[pass] ?? {};
    const shapes = new Set(src.rows.filter((r) => r.pass === pass && r.status === "ok" && r.GBps).map(shapeKey)).size;
    const line = document.createElement("p");
    line.className = "summary-line";
    Object.assign(line.dataset, { pass, run: String(src.key), baseline });
    const head = document.createElement("b");
    head.textContent = `${PASS_WORDS[pass]}, ${src.label} (${shapes} shapes):`;
    line.append(head);
    const ranked = Object.entries(st).sort((a, b) => b[1].won - a[1].won || (b[1].vs_best_peer ?? 0) - (a[1].vs_best_peer ?? 0));
    for (const [impl, s] of ranked) {
      const item = document.createElement("span");
      item.className = "standing";
      Object.assign(item.dataset, { impl, won: String(s.won), measured: String(s.measured),
        vsBaseline: String(s.vs_baseline ?? ""), vsBestPeer: String(s.vs_best_peer ?? "") });
      item.textContent = ` ${impl} wins ${s.won}/${s.measured}` +
        (impl === baseline ? "" : `, ${ratioText(s.vs_baseline)} ${baseline}`) + `, ${ratioText(s.vs_best_peer)} best peer;`;
      line.append(item);
    }
    lines.push(line);
  }
  const note = document.createElement("p");
  note.className = "muted summary-note";
  note.textContent = lines.length ? "Geometric means of GB/s ratios over the shapes both measured; best peer: the fastest " +
    "other implementation of each shape (above 1× beats them all). The same numbers as the API summary's standings." : "";
  el.replaceChildren(...lines, ...(lines.length ? [note] : []));
  el.hidden = !lines.length;
}
