// Wires the page together: health banner, run panel → charts (live), history → charts + dock.

import { getHealth, getImplementations, getPresets, getRuns, setToken } from "./api.js";
import { setPresets } from "./model_names.js";
import { Charts } from "./charts.js";
import { assignColors } from "./palette.js";
import { Dock } from "./dock.js";
import { followFleet } from "./fleet.js";
import { History } from "./history.js";
import { RunPanel, foldOnPhone } from "./run_panel.js";
// dashA (issue 17): first look, per-shape table, speedup / run-vs-run views, URL state.
import { openFirstLook, refineBaseline, startLiveOverBaseline } from "./first_look.js";
import { followDockShape, writeUrlState } from "./url_state.js";
import { Views } from "./views.js";

const $ = (sel) => document.querySelector(sel);

function showBanner(text, kind = "info") {
  const banner = $("#banner");
  banner.textContent = text;
  banner.className = `banner ${kind}`;
  banner.hidden = !text;
}

// The first requests, all sent at once (one after the other they cost a round trip each on a busy host); each is
// awaited where it was before. The no-op catch only keeps a failure quiet until its own await reports it.
function earlyRequests() {
  const quiet = (promise) => (promise.catch(() => {}), promise);
  return { health: quiet(getHealth()), impls: quiet(getImplementations()), presets: quiet(getPresets()), runs: quiet(getRuns()) };
}

// plotly.js loads async: its 1.2 MB parse need not hold up the requests above.
function plotlyLoaded() {
  const script = document.getElementById("plotly-js");
  return new Promise((resolve) => {
    if (window.Plotly || !script) return resolve();
    script.addEventListener("load", resolve);
    script.addEventListener("error", resolve); // the charts then say nothing is drawn; the rest of the page works
  });
}

async function main() {
  const early = earlyRequests();
  const plotly = plotlyLoaded();
  const charts = new Charts({
    fwd: $("#chart-fwd"), bwd: $("#chart-bwd"), sourcesLine: $("#chart-sources"), dtypeSelect: $("#chart-dtype"), mSelect: $("#chart-m"),
    nSelect: $("#chart-n"), xSelect: $("#chart-x"),
    // dashB: chart options, notes and the kernel breakdown
    logY: $("#chart-logy"), csvButton: $("#chart-csv"), pngButton: $("#chart-png"), notes: $("#chart-notes"),
    profile: $("#chart-profile"), profileCaption: $("#chart-profile-caption"),
  });
  for (const radio of document.querySelectorAll('input[name="view"]')) {
    radio.addEventListener("change", () => radio.checked && charts.setView(radio.value));
  }
  charts.render();

  const dock = new Dock({
    mode: $("#dock-mode"), m: $("#dock-m"), mOut: $("#dock-m-out"), n: $("#dock-n"), nOut: $("#dock-n-out"),
    sm: $("#dock-sm"), play: $("#dock-play"), impls: $("#dock-impls"), lanes: $("#dock-lanes"), timing: $("#dock-timing"),
    useModel: $("#dock-model"), source: $("#dock-source"), legend: $("#dock-legend-words"), dtypeFilter: $("#chart-dtype"), // the dock follows the chart's dtype
  });

  let history = null;
  // dashA: the views beside the charts (they read what the charts show).
  const views = new Views({
    metricPanels: $("#metric-panels"), altPanels: $("#alt-panels"), altFwd: $("#chart-alt-fwd"), altBwd: $("#chart-alt-bwd"),
    baseline: $("#baseline"), tableRun: $("#table-run"), table: $("#shape-table"), tableStatus: $("#shape-status"),
    note: $("#view-note"), diffControls: $("#diff-controls"), diffBase: $("#diff-base"), diffNew: $("#diff-new"),
    diffWarning: $("#diff-warning"), summary: $("#summary-lines"),
    stepControls: $("#step-controls"), stepFwd: $("#step-fwd"), stepBwd: $("#step-bwd"), stepAdd: $("#step-add"),
    stepReset: $("#step-reset"), stepPairs: $("#step-pairs"),
    trendControls: $("#trend-controls"), trendDevice: $("#trend-device"), trendTiming: $("#trend-timing"),
  }, { charts, runs: () => history?.runs ?? [], name: (run) => history?.nameOf(run.run_id) ?? run.run_id,
    nameOf: (id) => history?.nameOf(id) ?? id, openRuns: async (ids) => {
    for (const [i, id] of ids.entries()) await history.open(id, { overlay: i > 0 });
  } });
  views.onChange = (state) => writeUrlState(state);
  followDockShape();

  history = new History(
    { tbody: $("#history-table tbody"), status: $("#history-status"), refresh: $("#history-refresh"), overlay: $("#history-overlay"), importInput: $("#history-import"), count: $("#history-count") },
    { open: (doc, { overlay, name }) => {
      const points = charts.open(doc, { overlay, name });
      if (!overlay) dock.setMeasured(doc, name);
      views.changed(); // dashA
      // dashB: History says why a run adds no point under the filters in force
      return { points, why: points ? null : charts.emptyReason(doc.run?.run_id) };
    } },
  );

  let live = null; // the run document being streamed, for the dock once it is complete
  const panel = new RunPanel(
    {
      form: $("#sweep-form"), preset: $("#preset"), impls: $("#impl-list"), mList: $("#m-list"), nList: $("#n-list"), reps: $("#reps"),
      device: $("#device"), split: $("#split"), profile: $("#profile"), token: $("#token"), tokenField: $("#token-field"),
      interpreter: $("#interpreter"), interpreterField: $("#interpreter-field"), start: $("#start"), cancel: $("#cancel"), plan: $("#plan-line"),
      progress: $("#run-progress"), progressText: $("#progress-text"), status: $("#run-status"), error: $("#run-error"),
      tbody: $("#rows-table tbody"),
    },
    {
      start: (runId) => {
        live = { run: null, rows: [] };
        let sweep = null;
        try {
          sweep = panel.readSweep();
        } catch { /* the form changed meanwhile: the header's sweep refines it */ }
        startLiveOverBaseline(charts, runId, sweep); // dashA: drawn over the stored run that was open
        views.changed();
      },
      header: (line) => {
        live.run = line;
        charts.liveHeader(line.run_id, line);
        refineBaseline(charts, line.sweep); // dashA
      },
      row: (row) => {
        live.rows.push(row);
        charts.liveRow(row.run_id, row);
        views.changed(); // dashA
      },
      finished: ({ runId }) => {
        if (live?.run) dock.offerRun(live); // never a silent switch: a CPU run is offered, not taken
        if (runId) history.refresh().then(() => views.changed());
      },
    },
  );

  $("#token").addEventListener("input", (e) => setToken(e.target.value));

  let health = null;
  try {
    health = await early.health;
    const devices = health.gpus ?? [];
    const gpus = devices.filter((d) => String(d.label ?? "cuda").startsWith("cuda"));
    const workers = gpus.length ? `${gpus.length} GPU${gpus.length > 1 ? "s" : ""}` : `${devices.length} CPU worker${devices.length > 1 ? "s" : ""}`;
    $("#health-line").textContent = `Service ${health.version ?? "?"} on ${health.device ?? "?"} · ${workers}` +
      (Number.isFinite(health.ceiling_GBps) ? ` · copy ceiling ${health.ceiling_GBps.toFixed(1)} GB/s` : "") +
      (health.triton_native === false ? " · Triton runs in its interpreter here" : "") +
      (health.message && !health.cpu_only ? ` · ${health.message}` : ""); // dashB: the CPU-only notice once (the banner)
    if (health.cpu_only) showBanner("CPU only: timings are CPU timings; committed GPU results are under History.", "info");
  } catch (err) {
    $("#health-line").textContent = "The service did not answer /api/health.";
    showBanner(`The service is not answering: ${err.message}`, "error");
  }
  panel.setHealth(health);
  foldOnPhone($("#run-panel"), $("#run-toggle"), health);
  followFleet($("#fleet"), health);

  try {
    const impls = await early.impls;
    assignColors(impls.map((i) => i.name));
    panel.setImplementations(impls);
    dock.setImplementations(impls);
  } catch (err) {
    $("#impl-list").textContent = `Could not read the implementations: ${err.message}`;
  }
  try {
    const presets = await early.presets; // model names under the N ticks, and the run panel's presets
    setPresets(presets);
    panel.setPresets(presets);
  } catch (err) {
    panel.setPresets([]);
  }
  await history.refresh(early.runs);
  // The first run is fetched while plotly still parses: what opens before it is drawn when it is in.
  const drawn = plotly.then(() => {
    charts.plotlyArrived();
    views.changed();
  });
  // dashA: the runs the URL names, else the first look (firstLookRuns); then the URL's view, filters, baseline.
  await openFirstLook({ history, views, dock });
  charts.doneLoading();
  await drawn;
  views.ready = true;
  views.changed();
  window.dashboardReady = true;
}

main();
