// The per-shape table: for one run (stored or live), one line per shape (pass, dtype, M, N) and implementation
// with GB/s, % of ceiling and the speedup over a chosen baseline; ★ marks the best implementation of each shape
// (the same rule as the engine's run summary `best`: only `ok` rows with a GB/s compete, the first of equals wins).
// Skipped ("not applicable") rows are hidden; `wrong` rows (off the fp64 reference) are shown, marked, never starred.

import { colorFor } from "./palette.js";

export const BEST = "★";
export const shapeKey = (r) => `${r.pass}/${r.dtype}/${r.M}x${r.N}`;
// Three significant digits (whole numbers from 100 up: 3512, 15.1, 0.263), so small CPU values do not all read 0.1.
export const sig3 = (v) => (v == null || !Number.isFinite(v) ? "–" : Math.abs(v) >= 100 ? Number(v).toFixed(0) : Number(v).toPrecision(3));
const PASS_ORDER = { fwd: 0, bwd: 1 };

// shape key -> {impl, GBps} of the winner (engine/summary.py's rule).
export function bestByShape(rows) {
  const best = new Map();
  for (const r of rows) {
    if (r.status !== "ok" || !r.GBps) continue;
    const key = shapeKey(r);
    if (!best.has(key) || r.GBps > best.get(key).GBps) best.set(key, { impl: r.impl, GBps: r.GBps });
  }
  return best;
}

// shape key -> GB/s of the baseline's ok row.
export function baselineByShape(rows, baseline) {
  const out = new Map();
  for (const r of rows) if (r.impl === baseline && r.status === "ok" && r.GBps) out.set(shapeKey(r), r.GBps);
  return out;
}

// The lines of the table: every row except skipped ones, with its speedup and whether it is the shape's best.
export function tableEntries(rows, { baseline, filter = {} } = {}) {
  const best = bestByShape(rows);
  const base = baselineByShape(rows, baseline);
  const keep = (r) => r.status !== "skipped" && (filter.dtype == null || filter.dtype === "all" || r.dtype === filter.dtype)
    && (filter.M == null || filter.M === "all" || r.M === Number(filter.M));
  return rows.filter(keep).map((r) => {
    const key = shapeKey(r);
    const b = base.get(key);
    const measured = r.status === "ok" && r.GBps > 0;
    return {
      key, row: r, pass: r.pass, dtype: r.dtype, M: r.M, N: r.N, impl: r.impl, status: r.status,
      GBps: r.GBps ?? null, pct: r.pct_of_ceiling ?? null, us: r.median_us ?? null, host: r.host_us ?? null,
      peak: Number.isFinite(r.peak_bytes) ? r.peak_bytes / 2 ** 20 : null,
      speedup: measured && b ? r.GBps / b : null,
      best: measured && best.get(key)?.impl === r.impl,
    };
  });
}

const COLUMNS = [
  { id: "pass", label: "pass", value: (e) => PASS_ORDER[e.pass] ?? 9 },
  { id: "dtype", label: "dtype", value: (e) => e.dtype },
  { id: "M", label: "M", value: (e) => e.M, num: true },
  { id: "N", label: "N", value: (e) => e.N, num: true },
  { id: "impl", label: "implementation", value: (e) => e.impl },
  { id: "GBps", label: "GB/s", value: (e) => e.GBps, num: true, desc: true },
  { id: "pct", label: "% of ceiling", value: (e) => e.pct, num: true, desc: true },
  { id: "us", label: "latency µs", value: (e) => e.us, num: true },
  { id: "host", label: "host µs", value: (e) => e.host, num: true },
  { id: "peak", label: "peak MiB", value: (e) => e.peak, num: true },
  { id: "speedup", label: "speedup", value: (e) => e.speedup, num: true, desc: true },
  { id: "status", label: "status", value: (e) => (e.best ? 0 : e.status === "ok" ? 1 : 2) },
];

function compare(a, b) {
  if (a == null && b == null) return 0;
  if (a == null) return 1; // missing values last, whatever the direction
  if (b == null) return -1;
  return typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b));
}

const byShape = (a, b) => compare(PASS_ORDER[a.pass], PASS_ORDER[b.pass]) || compare(a.dtype, b.dtype)
  || a.M - b.M || a.N - b.N || compare(b.GBps, a.GBps);

export function sortEntries(entries, sort) {
  const col = COLUMNS.find((c) => c.id === sort?.column);
  const out = [...entries];
  if (!col) return out.sort(byShape);
  const dir = sort.dir === "desc" ? -1 : 1;
  return out.sort((a, b) => {
    const va = col.value(a);
    const vb = col.value(b);
    if (va == null || vb == null) return compare(va, vb) || byShape(a, b);
    return dir * compare(va, vb) || byShape(a, b);
  });
}

export class ShapeTable {
  constructor({ table, status }) {
    this.table = table;
    this.status = status;
    this.sort = null; // {column, dir}; null: by shape, the fastest first within a shape
    this.onSort = null;
    this._head();
  }

  _head() {
    const tr = document.createElement("tr");
    for (const col of COLUMNS) {
      const th = document.createElement("th");
      th.scope = "col";
      th.dataset.column = col.id;
      if (col.num) th.className = "num";
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "sort";
      btn.textContent = col.label;
      btn.addEventListener("click", () => {
        const same = this.sort?.column === col.id;
        const first = col.desc ? "desc" : "asc";
        this.sort = { column: col.id, dir: same ? (this.sort.dir === "asc" ? "desc" : "asc") : first };
        this.onSort?.(this.sort);
        this.draw();
      });
      th.append(btn);
      tr.append(th);
    }
    this.table.tHead.replaceChildren(tr);
  }

  // run: {label, rows, live}; baseline: an implementation name; filter: {dtype, M} ("all" or a value).
  show(run, { baseline, filter }) {
    this.run = run;
    this.baseline = baseline;
    this.filter = filter;
    this.draw();
  }

  draw() {
    const tbody = this.table.tBodies[0];
    for (const th of this.table.tHead.rows[0].cells) {
      const on = this.sort?.column === th.dataset.column;
      th.setAttribute("aria-sort", on ? (this.sort.dir === "asc" ? "ascending" : "descending") : "none");
      if (th.dataset.column === "speedup") th.querySelector("button").textContent = `speedup vs ${this.baseline ?? "–"}`;
    }
    if (!this.run) {
      tbody.replaceChildren();
      this.status.textContent = "No run open: open one under History, or start a sweep.";
      return;
    }
    const entries = sortEntries(tableEntries(this.run.rows, { baseline: this.baseline, filter: this.filter }), this.sort);
    const skipped = this.run.rows.filter((r) => r.status === "skipped").length;
    const shapes = new Set(entries.map((e) => e.key)).size;
    const wrong = entries.filter((e) => e.status === "wrong").length;
    const f = this.filter ?? {};
    const where = [f.dtype && f.dtype !== "all" ? f.dtype : "every dtype", f.M && f.M !== "all" ? `M=${f.M}` : "every M"].join(", ");
    this.status.textContent = `${this.run.label}: ${shapes} shapes (${where}), ${entries.length} lines; ${BEST} best GB/s per shape` +
      (wrong ? `; ${wrong} wrong (failed the correctness check, never ranked)` : "") +
      (skipped ? `; ${skipped} not-applicable/skipped rows hidden` : "") + ".";
    tbody.replaceChildren(...entries.map((e) => this._line(e)));
  }

  _line(e) {
    const tr = document.createElement("tr");
    tr.dataset.key = e.key;
    tr.dataset.impl = e.impl;
    tr.className = `status-${e.status}${e.best ? " best" : ""}`;
    const cell = (text, cls) => {
      const td = document.createElement("td");
      td.textContent = text;
      if (cls) td.className = cls;
      tr.append(td);
      return td;
    };
    cell(e.pass);
    cell(e.dtype);
    cell(String(e.M), "num");
    cell(String(e.N), "num");
    const name = cell(e.impl, "impl");
    const sw = document.createElement("span");
    sw.className = "swatch";
    sw.style.background = colorFor(e.impl);
    name.prepend(sw);
    if (e.best) {
      const star = document.createElement("span");
      star.className = "star";
      star.title = "best GB/s of this shape";
      star.textContent = ` ${BEST}`;
      name.append(star);
    }
    cell(sig3(e.GBps), "num");
    cell(sig3(e.pct), "num");
    cell(sig3(e.us), "num");
    const host = cell(sig3(e.host), "num");
    if (e.host == null && e.status === "ok") host.title = "host time per call: measured on CUDA only (on CPU it is the latency)";
    const peak = cell(sig3(e.peak), "num");
    peak.title = e.peak != null ? `${e.row.peak_bytes} bytes allocated at the pass's peak (outputs and temporaries)`
      : e.row.peak_bytes_note ?? "peak memory not measured (older file)";
    cell(e.speedup == null ? "–" : `${sig3(e.speedup)}×`, "num");
    const st = cell(e.best ? `${BEST} best` : e.status === "wrong" ? "✗ wrong" : e.status, "status");
    if (e.row.reason) st.title = e.row.reason;
    if (e.status === "wrong" && e.row.max_rel_err != null) st.textContent += ` (rel. err ${Number(e.row.max_rel_err).toExponential(1)})`;
    return tr;
  }
}
