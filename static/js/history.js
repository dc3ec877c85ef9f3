// History: the stored runs (live ones and imported result files, e.g. the committed GPU results),
// open one into the charts, overlay several (two GPUs, two commits), download CSV/JSON, import a file.

import { deleteRun, getRun, getRuns, importRun, runCsvUrl, runJsonUrl } from "./api.js";

function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso ?? "") : d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

export class History {
  constructor(els, handlers) {
    this.els = els; // {tbody, status, refresh, overlay, importInput}
    this.on = handlers; // {open(doc, {overlay})}
    this.runs = [];
    this.shown = new Set();
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

  async refresh() {
    try {
      this.runs = await getRuns();
    } catch (err) {
      this._say(`Could not list the stored runs: ${err.message}`);
      return;
    }
    this.render();
  }

  render() {
    const tbody = this.els.tbody;
    tbody.replaceChildren();
    if (!this.runs.length) {
      this._say("No stored runs yet. Finished sweeps land here, and so do result files you import.");
    } else if (!this.els.status.textContent) {
      this._say(`${this.runs.length} stored runs.`);
    }
    for (const run of this.runs) {
      const tr = document.createElement("tr");
      tr.dataset.runId = run.run_id;
      if (this.shown.has(run.run_id)) tr.classList.add("shown");
      const pick = document.createElement("input");
      pick.type = "checkbox";
      pick.className = "pick";
      pick.value = run.run_id;
      pick.setAttribute("aria-label", `select run ${run.device_name} ${when(run.created_at)} for overlay`);
      pick.addEventListener("change", () => this._updateOverlayButton());
      const cells = [
        pick, when(run.created_at), run.device_name ?? "?",
        (run.kind ?? "?") + (run.timing === "cuda-graph" ? " · CUDA-graph timings" : ""), String(run.rows ?? "?"),
        run.complete === false ? "incomplete" : "complete", run.source === "import" ? "imported file" : run.source ?? "live",
      ];
      for (const c of cells) {
        const td = document.createElement("td");
        if (c instanceof Node) td.append(c);
        else td.textContent = c;
        tr.append(td);
      }
      const actions = document.createElement("td");
      actions.className = "actions";
      const open = document.createElement("button");
      open.type = "button";
      open.className = "open";
      open.textContent = "Open";
      open.setAttribute("aria-label", `open run ${run.device_name} ${when(run.created_at)}`);
      open.addEventListener("click", () => this.open(run.run_id));
      const add = document.createElement("button");
      add.type = "button";
      add.className = "overlay";
      add.textContent = "Overlay";
      add.setAttribute("aria-label", `overlay run ${run.device_name} ${when(run.created_at)} on the charts`);
      add.addEventListener("click", () => this.open(run.run_id, { overlay: true }));
      const csv = Object.assign(document.createElement("a"), { href: runCsvUrl(run.run_id), textContent: "CSV" });
      csv.setAttribute("download", `${run.run_id}.csv`);
      const json = Object.assign(document.createElement("a"), { href: runJsonUrl(run.run_id), textContent: "JSON" });
      json.setAttribute("download", `${run.run_id}.json`);
      const del = document.createElement("button");
      del.type = "button";
      del.className = "danger";
      del.textContent = "Delete";
      del.setAttribute("aria-label", `delete run ${run.device_name} ${when(run.created_at)}`);
      del.addEventListener("click", () => this.remove(run));
      actions.append(open, add, csv, json, del);
      tr.append(actions);
      tbody.append(tr);
    }
    this._updateOverlayButton();
  }

  _updateOverlayButton() {
    const n = this.els.tbody.querySelectorAll("input.pick:checked").length;
    this.els.overlay.disabled = n < 1;
    this.els.overlay.textContent = n > 1 ? `Overlay ${n} selected` : "Open selected";
  }

  async open(runId, { overlay = false } = {}) {
    this._say(`Opening ${runId}…`);
    let doc;
    try {
      doc = await getRun(runId);
    } catch (err) {
      this._say(`Could not open ${runId}: ${err.message}`);
      return null;
    }
    if (!overlay) this.shown.clear();
    this.shown.add(runId);
    this.on.open?.(doc, { overlay });
    this._say(`${overlay ? "Overlaid" : "Showing"} ${doc.run?.device?.name ?? "?"} run of ${when(doc.run?.created_at)} (${doc.rows?.length ?? 0} rows).`);
    this.render();
    return doc;
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
      const answer = await importRun(doc);
      const id = answer?.run_id ?? doc?.run?.run_id;
      this._say(`Imported ${file.name}.`);
      await this.refresh();
      if (id) await this.open(id);
    } catch (err) {
      this._say(`Could not import ${file.name}: ${err.message}`);
    }
  }

  async remove(run) {
    if (!window.confirm(`Delete the ${run.device_name} run of ${when(run.created_at)}? This cannot be undone.`)) return;
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
