// The run-vs-run view: % change of GB/s per shape and implementation between two stored runs, from
// GET /api/compare (only rows measured ok in both). By default base is the older run and new the newer, so a
// change reads forward in time. Runs are named as History names them (run_names.js). A warning above the charts
// says when the two runs were timed in different modes (CUDA events vs CUDA-graph replays), ran on different
// devices, or with different torch / triton versions: then the card or the stack, not the code, may explain a
// change. The chart filters show what is drawn: when the compared runs lack the filter's dtype or M, the view
// draws another and moves the filter to it.

import { getCompare } from "./api.js";
import { drawPanel } from "./alt_chart.js";
import { runName } from "./run_names.js";

const ALL = "all";
const at = (r) => String(r?.created_at ?? "");

export class DiffView {
  constructor(els, { runs, shown, filter, onChange, openRuns, name, setFilter }) {
    this.els = els;
    this.name = name ?? ((r) => runName(r)); // (listing entry) -> the History's name
    this.setFilter = setFilter; // (dim, value) -> the chart filter shows what is drawn
    this.runs = runs; // () -> the stored-run listing (GET /api/runs)
    this.shown = shown; // () -> the chart sources
    this.filter = filter; // () -> the chart filter {dtype, M}
    this.onChange = onChange;
    this.openRuns = openRuns; // (ids) -> open them in the charts, the first one plain, the others overlaid
    this.picked = { base: null, new: null };
    this.cache = new Map(); // "base|new" -> the compare document (or {error})
    this.last = null;
    for (const which of ["base", "new"]) {
      const sel = which === "base" ? els.diffBase : els.diffNew;
      sel.addEventListener("change", async () => {
        this.picked[which] = sel.value;
        const other = which === "base" ? "new" : "base";
        this.picked[other] = this.resolved?.[other] ?? null;
        // The charts, the filters and the table then show the two runs compared (new first).
        const ids = [this.picked.new, this.picked.base].filter(Boolean);
        if (this.openRuns && ids.length === 2 && ids[0] !== ids[1]) await this.openRuns(ids);
        this.render();
        this.onChange?.();
      });
    }
  }

  // The two runs: the user's picks; else of the shown runs the newer as new and the older as base; with one run
  // shown, it is new and base is the newest older run of the same device (else of any device); base is never the
  // newer of the two unless the user picked it so.
  _resolve(listing) {
    const byId = new Map(listing.map((r) => [r.run_id, r]));
    const shown = this.shown().map((s) => String(s.key)).filter((k) => byId.has(k));
    const picked = (k) => (byId.has(this.picked[k]) ? this.picked[k] : null);
    let pickNew = picked("new");
    let pickBase = picked("base");
    if (!pickNew && !pickBase && shown.length > 1) {
      const [a, b] = shown.slice(0, 2).map((k) => byId.get(k));
      [pickBase, pickNew] = at(a) <= at(b) ? [a.run_id, b.run_id] : [b.run_id, a.run_id];
    }
    pickNew = pickNew ?? shown.find((k) => k !== pickBase) ?? listing[0]?.run_id ?? null;
    if (!pickBase) {
      const nw = byId.get(pickNew);
      const others = listing.filter((r) => r.run_id !== pickNew);
      const older = others.filter((r) => at(r) <= at(nw)); // the listing is newest first
      pickBase = (older.find((r) => r.device_name === nw?.device_name) ?? older[0] ?? others[0])?.run_id ?? null;
    }
    return { base: pickBase, new: pickNew };
  }

  // What differs between the two runs besides the code: device, torch / triton versions, timing mode.
  differences(listing, base, newId, doc) {
    const b = listing.find((r) => r.run_id === base) ?? {};
    const n = listing.find((r) => r.run_id === newId) ?? {};
    const out = [];
    if (b.device_name !== n.device_name) {
      out.push(`the devices differ (base: ${b.device_name ?? "?"}, new: ${n.device_name ?? "?"}): the card, not the code, may explain the changes`);
    }
    for (const k of ["torch", "triton"]) {
      const [vb, vn] = [b.versions?.[k] ?? "?", n.versions?.[k] ?? "?"];
      if (vb !== vn) out.push(`${k} versions differ (base: ${vb}, new: ${vn})`);
    }
    if (doc && doc.base.timing !== doc.new.timing) {
      out.push(`timing modes differ: the base run was timed with ${doc.base.timing}, the new one with ${doc.new.timing}. ` +
        "CUDA-graph replays leave out launch overhead that event timing includes: the % changes below mix both effects");
    }
    return out;
  }

  _fill(sel, listing, chosen) {
    const want = listing.map((r) => r.run_id);
    if ([...sel.options].map((o) => o.value).join("|") !== want.join("|")) {
      sel.replaceChildren(...listing.map((r) => new Option(this.name(r), r.run_id)));
    }
    if (chosen) sel.value = chosen;
  }

  async render() {
    const listing = this.runs() ?? [];
    const { base, new: newId } = this._resolve(listing);
    this.resolved = { base, new: newId };
    this._fill(this.els.diffBase, listing, base);
    this._fill(this.els.diffNew, listing, newId);
    const note = this.els.note;
    const warn = this.els.diffWarning;
    if (!base || !newId || base === newId) {
      warn.hidden = true;
      note.hidden = false;
      note.textContent = "Pick two different stored runs to compare (base and new).";
      this._draw(null);
      return;
    }
    const key = `${base}|${newId}`;
    if (!this.cache.has(key)) {
      note.hidden = false;
      note.textContent = "Comparing…";
      try {
        this.cache.set(key, await getCompare(base, newId));
      } catch (err) {
        this.cache.set(key, { error: err.message });
      }
      if (this.resolved.base !== base || this.resolved.new !== newId) return; // a newer pick took over
    }
    const doc = this.cache.get(key);
    this.last = doc;
    if (doc.error) {
      warn.hidden = true;
      note.hidden = false;
      note.textContent = `Could not compare: ${doc.error}`;
      this._draw(null);
      return;
    }
    const diffs = this.differences(listing, base, newId, doc);
    warn.hidden = !diffs.length;
    warn.textContent = diffs.length ? `Not like for like: ${diffs.join("; ")}.` : "";
    this._draw(doc);
  }

  _draw(doc) {
    const rows = doc?.rows ?? [];
    // The chart filter applies when the compared runs have its value; else the first dtype and the largest M.
    const f = this.filter() ?? {};
    const dtypes = [...new Set(rows.map((r) => r.dtype))];
    const Ms = [...new Set(rows.map((r) => r.M))].sort((a, b) => a - b);
    const dtype = f.dtype === ALL || dtypes.includes(f.dtype) ? f.dtype : dtypes[0];
    const inD = rows.filter((r) => dtype === ALL || r.dtype === dtype).map((r) => r.M);
    const M = f.M === ALL || Ms.includes(f.M) ? f.M : Math.max(...(inD.length ? inD : [0]));
    const keep = rows.filter((r) => (dtype === ALL || r.dtype === dtype) && (M === ALL || r.M === M));
    this.drawnFilter = { dtype, M };
    // The filters show what is drawn (issue 35: the M filter said one value while the chart drew another).
    if (rows.length && this.setFilter) {
      if (dtype !== f.dtype) this.setFilter("dtype", dtype);
      if (M !== f.M) this.setFilter("M", M);
      if (dtype !== f.dtype || M !== f.M) this.onChange?.();
    }
    for (const [pass, el] of [["fwd", this.els.altFwd], ["bwd", this.els.altBwd]]) {
      const mine = keep.filter((r) => r.pass === pass);
      const varyD = new Set(mine.map((r) => r.dtype)).size > 1;
      const varyM = new Set(mine.map((r) => r.M)).size > 1;
      const groups = new Map();
      for (const r of mine) {
        const name = [r.impl, varyD ? r.dtype : null, varyM ? `M=${r.M}` : null].filter(Boolean).join(" · ");
        if (!groups.has(name)) groups.set(name, { name, impl: r.impl, points: [] });
        const pct = (r.ratio - 1) * 100;
        groups.get(name).points.push({
          N: r.N, y: pct, key: r.key,
          hover: `${r.impl} · ${r.key}<br>${pct >= 0 ? "+" : ""}${pct.toFixed(1)} % (new/base ${r.ratio.toFixed(3)})` +
            `<br>base ${r.base_GBps.toFixed(1)} GB/s → new ${r.new_GBps.toFixed(1)} GB/s`,
        });
      }
      drawPanel(el, pass, {
        groups: [...groups.values()], ref: 0, refName: "no change (0 %)", yTitle: "GB/s change, new vs base (%)",
        empty: doc ? `no ${pass} shape measured in both runs here` : "no comparison",
      });
    }
    if (!doc) return;
    const note = this.els.note;
    note.hidden = false;
    const where = `${dtype === ALL ? "every dtype" : dtype}, ${M === ALL ? "every M" : `M=${M}`}`;
    const only = doc.only_in_base.length + doc.only_in_new.length;
    note.textContent = rows.length
      ? `${keep.length} of ${rows.length} shape × implementation pairs measured in both runs drawn (${where}); ` +
        `lowest ratio ${doc.min_ratio?.toFixed(3) ?? "–"}` + (only ? `; ${only} shapes are in one run only.` : ".")
      : "No shape and implementation was measured ok in both runs.";
  }

  state() {
    return { base: this.resolved?.base ?? this.picked.base, new: this.resolved?.new ?? this.picked.new };
  }

  apply(state) {
    if (state.base) this.picked.base = state.base;
    if (state.new) this.picked.new = state.new;
  }
}
