// The fwd+bwd view (issue 35): a training step pays both passes, so per shape the forward time of one
// implementation plus the backward time of another (a pair), from the runs shown (a session's forward and
// backward files count together). Default pairs: each implementation measured in both passes with itself; each
// backward-only implementation (our dγ strategies) with the `triton` forward (else the only forward-only one).
// The user adds and removes pairs; they go into the URL (pairs=fwd+bwd,…). Left: fwd + bwd µs per shape; right:
// the speedup of that sum over the baseline's own pair. Peak memory of each pass (where measured) in the hover.

import { drawPanel } from "./alt_chart.js";
import { mib } from "./chart_traces.js";

const ALL = "all";
const TRITON_FORWARD = "triton";
const ok = (r) => r.status === "ok" && Number.isFinite(r.median_us);
const caseKey = (impl, r) => `${impl}|${r.dtype}|${r.M}|${r.N}`;

// pass -> Map(case key -> row), the first shown run's row of a case winning.
export function rowsByPass(sources) {
  const out = { fwd: new Map(), bwd: new Map() };
  for (const s of sources) {
    for (const r of s.rows) {
      if (!ok(r) || !out[r.pass]) continue;
      const key = caseKey(r.impl, r);
      if (!out[r.pass].has(key)) out[r.pass].set(key, r);
    }
  }
  return out;
}

export function defaultPairs(sources) {
  const impls = { fwd: new Set(), bwd: new Set() };
  for (const s of sources) for (const r of s.rows) if (ok(r) && impls[r.pass]) impls[r.pass].add(r.impl);
  const pairs = [];
  for (const impl of [...impls.bwd].sort()) {
    if (impls.fwd.has(impl)) pairs.push([impl, impl]);
  }
  const fwdOnly = [...impls.fwd].filter((i) => !impls.bwd.has(i));
  const forward = impls.fwd.has(TRITON_FORWARD) ? TRITON_FORWARD : fwdOnly.length === 1 ? fwdOnly[0] : null;
  if (forward) for (const impl of [...impls.bwd].sort()) if (!impls.fwd.has(impl)) pairs.push([forward, impl]);
  return pairs;
}

export const pairName = ([f, b]) => (f === b ? f : `${f} + ${b}`);
export const parsePairs = (text) => String(text ?? "").split(",").map((p) => p.split("+").map((x) => x.trim()))
  .filter((p) => p.length === 2 && p[0] && p[1]);

// Per pair, the points of the shapes both its passes measured under the filter: {N, us, fwd, bwd, key}.
export function stepPoints(sources, pairs, { dtype, M }) {
  const by = rowsByPass(sources);
  const keep = (r) => (dtype === ALL || r.dtype === dtype) && (M === ALL || r.M === M);
  return pairs.map((pair) => {
    const points = [];
    for (const f of by.fwd.values()) {
      if (f.impl !== pair[0] || !keep(f)) continue;
      const b = by.bwd.get(caseKey(pair[1], f));
      if (b) points.push({ N: f.N, M: f.M, dtype: f.dtype, us: f.median_us + b.median_us, fwd: f, bwd: b, key: `${f.dtype}/${f.M}x${f.N}` });
    }
    return { pair, points };
  });
}

const peakText = (r) => (Number.isFinite(r.peak_bytes) ? `${mib(r.peak_bytes)} MiB` : "not measured");

export class StepView {
  // els: {controls, fwd, bwd, add, reset, list, altFwd, altBwd, note}; ctx: {sources(), filter(), onChange()}
  constructor(els, { sources, filter, onChange }) {
    this.els = els;
    this.sources = sources;
    this.filter = filter;
    this.onChange = onChange;
    this.picked = null; // null: the default pairs
    els.add?.addEventListener("click", () => {
      const pair = [els.fwd.value, els.bwd.value];
      if (!pair[0] || !pair[1]) return;
      const now = this.pairs();
      if (!now.some((p) => p[0] === pair[0] && p[1] === pair[1])) this.picked = [...now, pair];
      this.onChange?.();
    });
    els.reset?.addEventListener("click", () => {
      this.picked = null;
      this.onChange?.();
    });
  }

  pairs() {
    return this.picked ?? defaultPairs(this.sources());
  }

  _controls() {
    const { fwd, bwd, list } = this.els;
    const impls = { fwd: new Set(), bwd: new Set() };
    for (const s of this.sources()) for (const r of s.rows) if (ok(r) && impls[r.pass]) impls[r.pass].add(r.impl);
    for (const [sel, names] of [[fwd, impls.fwd], [bwd, impls.bwd]]) {
      const want = [...names].sort();
      if ([...sel.options].map((o) => o.value).join("|") !== want.join("|")) sel.replaceChildren(...want.map((n) => new Option(n, n)));
    }
    list.replaceChildren(...this.pairs().map((pair) => {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "pair";
      b.dataset.pair = pair.join("+");
      b.textContent = `${pair[0]} → ${pair[1]} ×`;
      b.setAttribute("aria-label", `remove the pair forward ${pair[0]}, backward ${pair[1]}`);
      b.addEventListener("click", () => {
        this.picked = this.pairs().filter((p) => p[0] !== pair[0] || p[1] !== pair[1]);
        this.onChange?.();
      });
      return b;
    }));
  }

  render(baseline) {
    this._controls();
    const f = this.filter() ?? {};
    const filter = { dtype: f.dtype ?? ALL, M: f.M ?? ALL };
    const sets = stepPoints(this.sources(), this.pairs(), filter);
    const varies = (get) => new Set(sets.flatMap((s) => s.points.map(get))).size > 1;
    const [varyD, varyM] = [varies((p) => p.dtype), varies((p) => p.M)];
    const groups = new Map();
    for (const { pair, points } of sets) {
      for (const p of points) {
        const name = [pairName(pair), varyD ? p.dtype : null, varyM ? `M=${p.M}` : null].filter(Boolean).join(" · ");
        if (!groups.has(name)) groups.set(name, { name, impl: pair[1], pair, dash: pair[0] === pair[1] ? 0 : 1, points: [] });
        groups.get(name).points.push({ N: p.N, y: p.us, key: p.key, p,
          hover: `forward ${pair[0]} + backward ${pair[1]}<br>M=${p.M}  N=${p.N}  ${p.dtype}` +
            `<br>${p.fwd.median_us.toFixed(2)} µs + ${p.bwd.median_us.toFixed(2)} µs = ${p.us.toFixed(2)} µs` +
            `<br>peak memory: forward ${peakText(p.fwd)}, backward ${peakText(p.bwd)}` });
      }
    }
    const list = [...groups.values()];
    drawPanel(this.els.altFwd, "fwd", { groups: list, ref: null, yTitle: "forward + backward time (µs)",
      title: "Forward + backward: the time of both passes (µs, lower is faster)",
      empty: "no shape where both passes of a pair were measured under these filters" });
    // The speedup of each pair's sum over the baseline's own pair (baseline forward + baseline backward).
    const base = new Map(stepPoints(this.sources(), [[baseline, baseline]], filter)[0].points.map((p) => [p.key, p.us]));
    const speed = list.map((g) => ({ ...g, points: g.points.filter((q) => base.has(q.key)).map((q) => ({
      N: q.N, key: q.key, y: base.get(q.key) / q.y,
      hover: `${pairName(g.pair)} · ${q.key}<br>${(base.get(q.key) / q.y).toFixed(2)}× ${baseline} (both passes)` +
        `<br>${q.y.toFixed(2)} µs vs ${base.get(q.key).toFixed(2)} µs` })) }));
    drawPanel(this.els.altBwd, "bwd", { groups: speed, ref: 1, refName: `${baseline} + ${baseline} (1×)`,
      yTitle: `speedup over ${baseline} (×, fwd+bwd time)`, title: `Forward + backward: speedup over ${baseline}'s own pair`,
      empty: `no shape where ${baseline} measured both passes` });
    const drawn = sets.reduce((n, s) => n + s.points.length, 0);
    const note = this.els.note;
    note.hidden = false;
    note.textContent = drawn
      ? `${drawn} points: ${sets.map((s) => `${pairName(s.pair)} (${s.points.length})`).join(", ")}; shapes where both passes ` +
        `were measured (${filter.dtype === ALL ? "every dtype" : filter.dtype}, ${filter.M === ALL ? "every M" : `M=${filter.M}`}).`
      : "No pair has both passes measured under these filters: open the forward and backward runs together, or pick pairs.";
  }

  state() {
    return { pairs: this.picked ? this.picked.map((p) => p.join("+")).join(",") : null };
  }

  apply(state) {
    const pairs = parsePairs(state.pairs);
    if (pairs.length) this.picked = pairs;
  }
}
