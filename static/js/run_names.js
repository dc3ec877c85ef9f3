// One name per stored run, the History's, wherever a run is named (History, the chart legends and the line above
// the charts, the table's and the run-vs-run pickers, the dock): the label the user gave (kept in this browser),
// else the imported file's name, else "<device> <date>"; a run cut short (not complete) says "(partial)".

export function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso ?? "") : d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

export const PARTIAL = "(partial)";

// run: a GET /api/runs entry ({run_id, label, device_name, created_at, complete}); labels: run id -> the user's label.
export function runName(run, labels = {}) {
  if (!run) return "";
  const base = labels[run.run_id] || run.label || `${run.device_name ?? "?"} ${when(run.created_at)}`;
  return run.complete === false ? `${base} ${PARTIAL}` : base;
}

// The listing entry of a run document (GET /api/runs/{id}), for a run the listing does not have yet.
export function listingOf(doc) {
  const run = doc?.run ?? {};
  return { run_id: run.run_id, label: null, device_name: run.device?.name, created_at: run.created_at,
    complete: doc?.summary?.complete !== false };
}
