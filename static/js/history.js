// History: the stored runs (live ones and imported result files, e.g. the committed GPU results), each
// with its label (the file's name, or one the user gives: kept in this browser), commit, torch/triton
// versions, timing-mode badge and rows counted per status (ok / skipped / error / wrong: "does not provide
// this pass" is skipped, not a failure). Open one into the charts, overlay several (two GPUs, two commits;
// an overlay that adds no point under the filters says why), download CSV/JSON, import a file.

import { deleteRun, getRun, getRuns, importRun, runCsvUrl, runJsonUrl } from "./api.js";
import { PARTIAL, listingOf, runName, when } from "./run_names.js";

const LABELS_KEY = "rmsnorm-dashboard.run-labels";

function loadLabels() {
  try {
    const v = JSON.parse(window.localStorage?.getItem(LABELS_KEY) ?? "{}");
    return v && typeof v === "object" ? v : {};
  } catch {
    return {};
  }
}

const el = (tag, props = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children.filter((c) => c != null));
  return node;
};

export class History {
  constructor(els, handlers) {
    this.els = els; // {tbody, status, refresh, overlay, importInput, count}
    this.on = handlers; // {open(doc, {overlay}) -> {points, why}}
    this.runs = [];
    this.shown = new Set();
    this.labels = loadLabels();
    els.refresh.addEventListener("click", () => this.refresh());
    els.overlay.addEventListener("click", () => this.openSelected());
    els.importInput.addEventListener("change", () => {
      const file = els.importInput.files?.[0];
      if (file) this.importFile(file).finally(() => (els.importInput.value = ""));
    });
  }

  _say(text) {
    this.els.status.textContent = text;
  }

  // pending: a GET /api/runs already sent (the page's first requests go out together).
  async refresh(pending = null) {
    try {
      this.runs = await (pending ?? getRuns());
    } catch (err) {
      this._say(`Could not list the stored runs: ${err.message}`);
      return;
    }
    this.render();
  }

  labelOf(run) {
    return this.labels[run.run_id] || run.label || null;
  }

  setLabel(runId, text) {
    const value = String(text ?? "").trim().slice(0, 120);
    if (value) this.labels[runId] = value;
    else delete this.labels[runId];
    try {
      window.localStorage?.setItem(LABELS_KEY, JSON.stringify(this.labels));
    } catch {
      /* private mode: the label lasts for this page */
    }
    this.render();
  }

  _name(run) {
    return runName(run, this.labels);
  }

  // The History's name of a run (by id, or of a document not listed yet): what every picker and legend shows.
  nameOf(runId, doc = null) {
    const run = this.runs.find((r) => r.run_id === runId);
    return runName(run ?? listingOf(doc), this.labels);
  }

  render() {
    const tbody = this.els.tbody;
    tbody.replaceChildren();
    const n = this.runs.length;
    if (this.els.count) this.els.count.textContent = n ? `${n} stored run${n > 1 ? "s" : ""}` : "";
    if (!n) this._say("No stored runs yet. Finished sweeps land here, and so do result files you import.");
    for (const run of this.runs) tbody.append(this._row(run));
    this._updateOverlayButton();
  }

  _row(run) {
    const tr = el("tr");
    tr.dataset.runId = run.run_id;
    if (this.shown.has(run.run_id)) tr.classList.add("shown");
    const name = this._name(run);
    const pick = el("input", { type: "checkbox", className: "pick", value: run.run_id });
    pick.setAttribute("aria-label", `select run ${name} for overlay`);
    pick.addEventListener("change", () => this._updateOverlayButton());

    const label = this.labelOf(run);
    const source = run.source === "import" ? "imported file" : run.source === "live" ? "live run" : run.source ?? "live run";
    const labelCell = el("td", { className: "label-cell" },
      el("span", { className: "label-text", textContent: label ?? "(no label)" }),
      run.complete === false ? el("span", { className: "badge partial", textContent: "partial", title: "cut short: not every planned case was measured" }) : null,
      el("small", { textContent: source }));
    const edit = el("button", { type: "button", className: "label-edit", textContent: "Label…" });
    edit.setAttribute("aria-label", `give run ${name} a label`);
    edit.addEventListener("click", () => this._editLabel(labelCell, run));
    labelCell.append(edit);

    const commit = run.git_commit ? String(run.git_commit).slice(0, 8) + (run.git_dirty ? " (dirty)" : "") : "–";
    const v = run.versions ?? {};
    const versions = `torch ${v.torch ?? "?"} / triton ${v.triton ?? "?"}`;
    const graphs = run.timing === "cuda-graph";
    const badge = el("span", { className: `badge${graphs ? " graph" : ""}`,
      textContent: graphs ? "CUDA-graph timings" : run.timing === "events" ? "event timings" : run.kind === "cpu" ? "CPU timings" : "timing ?" });
    badge.title = graphs ? "timed as replayed CUDA graphs: launch overhead left out, not comparable with event timings"
      : "timed with CUDA events (or the CPU clock on a CPU run), launch overhead included";
    const c = run.counts ?? {};
    const counts = el("td", { className: "counts" });
    for (const k of ["ok", "skipped", "error", "wrong"]) {
      const span = el("span", { className: `c-${k}`, textContent: `${c[k] ?? 0} ${k}` });
      span.dataset.status = k;
      span.dataset.count = String(c[k] ?? 0);
      counts.append(span);
    }
    counts.title = `${run.rows ?? "?"} rows; skipped: e.g. an implementation that does not provide this pass`;
    const cells = [el("td", {}, pick), labelCell, el("td", { textContent: when(run.created_at) }),
      el("td", { textContent: `${run.device_name ?? "?"} · ${run.kind ?? "?"}` }), el("td", { className: "commit", textContent: commit }),
      el("td", { className: "versions", textContent: versions }), el("td", { className: "timing" }, badge), counts,
      el("td", { className: run.complete === false ? "partial" : "", textContent: run.complete === false ? `incomplete ${PARTIAL}` : "complete" })];
    tr.append(...cells, this._actions(run, name));
    return tr;
  }

  _actions(run, name) {
    const button = (cls, text, aria, onClick) => {
      const b = el("button", { type: "button", className: cls, textContent: text });
      b.setAttribute("aria-label", aria);
      b.addEventListener("click", onClick);
      return b;
    };
    const csv = el("a", { href: runCsvUrl(run.run_id), textContent: "CSV" });
    csv.setAttribute("download", `${run.run_id}.csv`);
    const json = el("a", { href: runJsonUrl(run.run_id), textContent: "JSON" });
    json.setAttribute("download", `${run.run_id}.json`);
    return el("td", { className: "actions" },
      button("open", "Open", `open run ${name}`, () => this.open(run.run_id)),
      button("overlay", "Overlay", `overlay run ${name} on the charts`, () => this.open(run.run_id, { overlay: true })),
      csv, json, button("danger", "Delete", `delete run ${name}`, () => this.remove(run)));
  }

  _editLabel(cell, run) {
    const input = el("input", { type: "text", className: "label-input", value: this.labelOf(run) ?? "", maxLength: 120 });
    input.setAttribute("aria-label", `label for run ${run.run_id} (Enter saves, Escape cancels; empty: the file's name)`);
    let done = false;
    const finish = (save) => {
      if (done) return;
      done = true;
      if (save) this.setLabel(run.run_id, input.value);
      else this.render();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") finish(true);
      else if (e.key === "Escape") finish(false);
    });
    input.addEventListener("blur", () => finish(true));
    cell.replaceChildren(input);
    input.focus();
  }

  _updateOverlayButton() {
    const n = this.els.tbody.querySelectorAll("input.pick:checked").length;
    this.els.overlay.disabled = n < 1;
    this.els.overlay.textContent = n > 1 ? `Overlay ${n} selected` : "Open selected";
  }

  // fetched: the run's document already asked for (a promise), when the caller fetches several at once.
  async open(runId, { overlay = false, fetched = null } = {}) {
    this._say(`Opening ${runId}…`);
    let doc;
    try {
      doc = await (fetched ?? getRun(runId));
    } catch (err) {
      this._say(`Could not open ${runId}: ${err.message}`);
      this._opened("");
      return null;
    }
    if (!overlay) this.shown.clear();
    this.shown.add(runId);
    const name = this.nameOf(runId, doc);
    const drawn = this.on.open?.(doc, { overlay, name }) ?? {};
    let text = `${overlay ? "Overlaid" : "Showing"} ${name} (${doc.rows?.length ?? 0} rows).`;
    if (overlay && drawn.points === 0) text = `Overlaid ${name}, but it adds no point to the charts: ${drawn.why}.`;
    this._say(text);
    this.render();
    this._opened(runId);
    return doc;
  }

  // Every finished open (or overlay) counts on the table: data-opens and data-last-opened tell a script (the browser
  // tests) that the open it started is drawn, even when the run was already shown before the click.
  _opened(runId) {
    const t = this.els.tbody;
    t.dataset.opens = String(Number(t.dataset.opens ?? 0) + 1);
    t.dataset.lastOpened = runId;
  }

  async openSelected() {
    const ids = [...this.els.tbody.querySelectorAll("input.pick:checked")].map((i) => i.value);
    for (const [i, id] of ids.entries()) await this.open(id, { overlay: i > 0 });
  }

  async importFile(file) {
    let doc;
    try {
      doc = JSON.parse(await file.text());
    } catch (err) {
      this._say(`${file.name} is not a JSON result file: ${err.message}`);
      return;
    }
    try {
      const answer = await importRun(doc, { label: file.name });
      const id = answer?.run_id ?? doc?.run?.run_id;
      this._say(`Imported ${file.name}.`);
      await this.refresh();
      if (id) await this.open(id);
    } catch (err) {
      this._say(`Could not import ${file.name}: ${err.message}`);
    }
  }

  async remove(run) {
    if (!window.confirm(`Delete the run ${this._name(run)}? This cannot be undone.`)) return;
    try {
      await deleteRun(run.run_id);
      this.shown.delete(run.run_id);
      this._say("Deleted.");
    } catch (err) {
      this._say(`Could not delete: ${err.message}`);
    }
    await this.refresh();
  }
}
