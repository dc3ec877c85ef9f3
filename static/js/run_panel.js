// The run panel: build a Sweep from the form, POST it to /benchmark, read the NDJSON stream,
// show the queue position, progress and every row as it arrives; Cancel aborts the request
// (the service keeps the partial run, marked incomplete).

import { setToken, streamBenchmark } from "./api.js";
import { colorFor } from "./palette.js";

const MAX_TABLE_ROWS = 2000;
const fmt = (v, d = 2) => (v == null || !Number.isFinite(v) ? "–" : Number(v).toFixed(d));

function parseIntList(text, field) {
  const parts = String(text).split(/[\s,;]+/).filter(Boolean);
  if (!parts.length) throw new Error(`${field}: give at least one value`);
  return parts.map((p) => {
    const v = Number(p);
    if (!Number.isInteger(v) || v <= 0) throw new Error(`${field}: "${p}" is not a positive whole number`);
    return v;
  });
}

export class RunPanel {
  constructor(els, handlers) {
    this.els = els; // {form, impls, mList, nList, reps, device, split, interpreter, interpreterField, token, tokenField, start, cancel, plan, progress, progressText, status, error, tbody}
    this.on = handlers; // {start(), queued(line), header(line), row(row), summary(line), finished({runId, complete, cancelled})}
    this.controller = null;
    this.received = 0;
    this.planned = 0;
    this.runId = null;
    els.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.start();
    });
    els.cancel.addEventListener("click", () => this.cancel());
    els.form.addEventListener("input", () => this._showPlan());
    els.form.addEventListener("change", () => this._showPlan());
  }

  setHealth(health) {
    const sel = this.els.device;
    sel.replaceChildren(new Option("automatic (the least busy device)", "auto"));
    const devices = health?.gpus ?? [];
    for (const d of devices) {
      const label = d.label ?? `cuda:${d.index}`;
      const state = d.ready === false ? ", starting" : d.busy ? `, busy (${d.queue_length} in its queue)` : "";
      sel.append(new Option(`${label}: ${d.name}${d.host ? ` on ${d.host}` : ""}${state}`, label));
    }
    // a fleet (serve --ray): any GPU of one model, the least busy of them
    const models = [...new Set(devices.map((d) => d.model).filter(Boolean))];
    if (models.length > 1) for (const m of models) sel.append(new Option(`any ${m} (the least busy)`, m.toLowerCase()));
    this.els.split.disabled = devices.length < 2;
    this.els.split.closest("label").title = devices.length < 2 ? "needs two or more devices" : "";
    this.cpuOnly = Boolean(health?.cpu_only);
    this.els.tokenField.hidden = !health?.token_required;
    // Without a GPU, Triton kernels can only run under Triton's interpreter, and only when asked.
    this.els.interpreterField.hidden = !health || health.triton_native !== false;
  }

  // The named shape presets (GET /api/presets): choosing one fills M and N from it; editing them makes it custom.
  setPresets(presets) {
    const sel = this.els.preset;
    if (!sel) return;
    this.presets = new Map((presets ?? []).map((p) => [p.name, p]));
    sel.replaceChildren(new Option("custom: the M and N below", ""));
    for (const p of this.presets.values()) sel.append(new Option(`${p.name}: ${p.description}`, p.name));
    sel.addEventListener("change", () => {
      const p = this.presets.get(sel.value);
      if (!p) return;
      this.els.mList.value = p.M.join(", ");
      this.els.nList.value = p.N.join(", ");
      this._showPlan();
    });
    for (const el of [this.els.mList, this.els.nList]) {
      el.addEventListener("input", () => { sel.value = ""; });
    }
  }

  setImplementations(impls) {
    const box = this.els.impls;
    box.replaceChildren();
    if (!impls.length) {
      box.textContent = "The registry is empty.";
      return;
    }
    for (const impl of impls) {
      const label = document.createElement("label");
      label.className = "impl";
      label.title = impl.description || impl.name;
      const input = document.createElement("input");
      input.type = "checkbox";
      input.name = "impl";
      input.value = impl.name;
      input.disabled = !impl.available;
      // On a CPU-only host the Triton kernels run in the interpreter (slow): start with the baselines.
      input.checked = impl.available && (!this.cpuOnly || (impl.family === "baseline" && !/compile/.test(impl.name)));
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = colorFor(impl.name);
      const name = document.createElement("span");
      name.className = "impl-name";
      name.textContent = impl.name;
      const meta = document.createElement("small");
      meta.className = "muted";
      meta.textContent = ` ${impl.family} · ${impl.passes.join("+")}${impl.source && impl.source !== "builtin" ? ` · ${impl.source}` : ""}`;
      label.append(input, swatch, name, meta);
      if (!impl.available) {
        const reason = document.createElement("small");
        reason.className = "reason";
        reason.textContent = `unavailable: ${impl.reason ?? "no reason given"}`;
        label.append(reason);
      }
      box.append(label);
    }
    this._showPlan();
  }

  _checked(name) {
    return [...this.els.form.querySelectorAll(`input[name="${name}"]:checked`)].map((i) => i.value);
  }

  // The Sweep body (docs/ARCHITECTURE.md); throws an Error naming the field when the form is wrong.
  readSweep() {
    const implementations = this._checked("impl");
    const passes = this._checked("pass");
    const dtypes = this._checked("dtype");
    if (!implementations.length) throw new Error("implementations: pick at least one");
    if (!passes.length) throw new Error("passes: pick forward, backward or both");
    if (!dtypes.length) throw new Error("dtypes: pick at least one");
    const M = parseIntList(this.els.mList.value, "M");
    const N = parseIntList(this.els.nList.value, "N");
    const repetitions = Number(this.els.reps.value);
    if (!Number.isInteger(repetitions) || repetitions < 1) throw new Error("repetitions: a whole number, at least 1");
    const sweep = { implementations, passes, dtypes, M, N, repetitions };
    if (this.els.device.value && this.els.device.value !== "auto") sweep.device = this.els.device.value;
    if (this.els.split.checked && !this.els.split.disabled) sweep.split = true;
    if (this.els.interpreter.checked && !this.els.interpreterField.hidden) sweep.triton_interpreter = true;
    if (this.els.profile?.checked) sweep.profile = true; // the kernel breakdown under the charts
    return sweep;
  }

  static plannedRows(s) {
    return s.implementations.length * s.passes.length * s.dtypes.length * s.M.length * s.N.length;
  }

  _showPlan() {
    try {
      const s = this.readSweep();
      const n = RunPanel.plannedRows(s);
      this.els.plan.textContent = `${s.implementations.length} implementations × ${s.passes.length} passes × ${s.dtypes.length} dtypes × ` +
        `${s.M.length} M × ${s.N.length} N = ${n} cases`;
    } catch (err) {
      this.els.plan.textContent = err.message;
    }
  }

  _setRunning(running) {
    this.els.start.disabled = running;
    this.els.cancel.disabled = !running;
    this.els.form.setAttribute("aria-busy", String(running));
  }

  _progress() {
    const { progress, progressText } = this.els;
    progress.max = Math.max(1, this.planned);
    progress.value = this.received;
    progressText.textContent = `${this.received} / ${this.planned} rows`;
  }

  _showError(message) {
    this.els.error.hidden = !message;
    this.els.error.textContent = message || "";
  }

  async start() {
    this._showError("");
    let sweep;
    try {
      sweep = this.readSweep();
    } catch (err) {
      this._showError(err.message);
      return;
    }
    setToken(this.els.token.value);
    this.controller = new AbortController();
    this.planned = RunPanel.plannedRows(sweep);
    this.received = 0;
    this.counts = { ok: 0, skipped: 0, error: 0 };
    this.runId = null;
    this.els.tbody.replaceChildren();
    this._progress();
    this.els.status.textContent = "Sending the sweep…";
    this._setRunning(true);
    let complete = false;
    let cancelled = false;
    try {
      await streamBenchmark(sweep, { signal: this.controller.signal, onLine: (line) => {
        if (line.type === "summary") complete = line.complete !== false;
        this._line(line);
      } });
      if (!complete) this.els.status.textContent += " The stream ended before its summary: the run is incomplete.";
    } catch (err) {
      if (err.name === "AbortError") {
        cancelled = true;
        this.els.status.textContent = `Cancelled after ${this.received} of ${this.planned} rows; the service keeps them as an incomplete run.`;
      } else {
        this.els.status.textContent = "The sweep did not run.";
        this._showError(err.message);
      }
    } finally {
      this._setRunning(false);
      this.controller = null;
      this.on.finished?.({ runId: this.runId, complete, cancelled });
    }
  }

  cancel() {
    this.controller?.abort();
  }

  _line(line) {
    if (line.run_id && !this.runId) {
      this.runId = line.run_id;
      this.on.start?.(line.run_id);
    }
    switch (line.type) {
      case "queued":
        this.els.status.textContent = line.position > 0
          ? `Waiting in the queue for ${line.device ?? "the device"}: position ${line.position} (${line.position} job${line.position > 1 ? "s" : ""} ahead).`
          : `Starting on ${line.device ?? "the device"}…`;
        this.on.queued?.(line);
        break;
      case "header":
        this.els.status.textContent = `Running on ${line.device?.name ?? "?"}` +
          (Number.isFinite(line.ceiling_GBps) ? ` (measured copy ceiling ${line.ceiling_GBps.toFixed(1)} GB/s)` : "") + "…";
        this.on.header?.(line);
        break;
      case "row":
        this.received++;
        this.counts[line.status] = (this.counts[line.status] ?? 0) + 1;
        this._progress();
        this._tableRow(line);
        this.on.row?.(line);
        break;
      case "summary": {
        const planned = Number.isFinite(line.planned) ? line.planned : line.rows;
        if (Number.isFinite(planned) && planned !== this.planned) {
          this.planned = Math.max(planned, this.received);
          this._progress();
        }
        const c = { ok: line.ok ?? this.counts.ok, skipped: line.skipped ?? this.counts.skipped, error: line.error ?? this.counts.error };
        this.els.status.textContent = `Done: ${c.ok} measured, ${c.skipped} skipped, ${c.error} failed` +
          (line.complete === false ? " (incomplete run)." : ".") + (c.skipped || c.error ? " Reasons are in the table below." : "");
        this.on.summary?.(line);
        break;
      }
      case "error":
        this._showError(line.message ?? line.reason ?? line.detail ?? JSON.stringify(line));
        break;
      default:
        break;
    }
  }

  _tableRow(r) {
    const tr = document.createElement("tr");
    tr.className = `status-${r.status}`;
    const cells = [
      r.impl, r.pass, r.dtype, r.M, r.N, fmt(r.median_us), r.status === "ok" ? `${fmt(r.min_us)}–${fmt(r.max_us)}` : "–",
      fmt(r.GBps, 1), fmt(r.pct_of_ceiling, 1), r.status === "ok" ? "ok" : `${r.status}: ${r.reason ?? "no reason given"}`,
    ];
    for (const [i, c] of cells.entries()) {
      const td = document.createElement("td");
      td.textContent = String(c);
      if (i === 0) {
        const sw = document.createElement("span");
        sw.className = "swatch";
        sw.style.background = colorFor(r.impl);
        td.prepend(sw);
      }
      if (i >= 3 && i <= 8) td.className = "num";
      tr.append(td);
    }
    const tbody = this.els.tbody;
    tbody.append(tr);
    while (tbody.rows.length > MAX_TABLE_ROWS) tbody.deleteRow(0);
  }
}

// On a phone (the one-column layout) of a CPU-only service, the stored GPU results are what a visitor came for: the
// run panel folds to its title and a button, so the charts start on the first screen; one tap opens the form.
export function foldOnPhone(panel, toggle, health, query = window.matchMedia?.("(max-width: 900px)")) {
  if (!panel || !toggle || !health?.cpu_only || !query?.matches) return;
  const set = (open) => {
    panel.classList.toggle("folded", !open);
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? "Hide the sweep form" : "Show the sweep form";
  };
  panel.classList.add("foldable");
  set(false);
  toggle.addEventListener("click", () => set(panel.classList.contains("folded")));
}
