// The view in the URL's query string (issue 17), so a view can be shared and bookmarked:
//   runs=ID,ID  view=GBps|pct|latency|speedup|step|diff|trend  dtype=…  M=…  N=… (the filter when x=M)  x=M (the
//   charts' x axis; absent: N)  logy=1 (a log y axis)  baseline=…  table=ID  sort=col.dir
//   base=ID new=ID (the run-vs-run view)  dockM=… dockN=… (the loading dock's shape: the dock reads them;
//   this module only keeps them and writes the dock's shown shape)
// Parameters this module does not know are kept as they are. Changes use history.replaceState (no new entry).

const LIST = new Set(["runs"]);
export const KEYS = ["runs", "view", "dtype", "M", "N", "x", "logy", "baseline", "table", "sort", "base", "new", "dockM",
  "dockN", "pairs", "trendDevice", "trendTiming"]; // the fwd+bwd view's pairs, the trends view's device and timing

export function readUrlState(search = window.location.search) {
  const q = new URLSearchParams(search);
  const out = {};
  for (const key of KEYS) {
    const v = q.get(key);
    if (LIST.has(key)) out[key] = v ? v.split(",").map((s) => s.trim()).filter(Boolean) : [];
    else out[key] = v == null || v === "" ? null : v;
  }
  return out;
}

// Merge `partial` into the URL: null/undefined/[] removes a key; returns the new query string.
export function writeUrlState(partial) {
  const url = new URL(window.location.href);
  const q = url.searchParams;
  for (const [key, value] of Object.entries(partial)) {
    if (!KEYS.includes(key)) continue;
    const text = Array.isArray(value) ? value.join(",") : value == null ? "" : String(value);
    if (text) q.set(key, text);
    else q.delete(key);
  }
  const next = `${url.pathname}${q.toString() ? `?${q}` : ""}${url.hash}`;
  if (next !== `${window.location.pathname}${window.location.search}${window.location.hash}`) {
    window.history.replaceState(window.history.state, "", next);
  }
  return q.toString();
}

// The dock's shape, as its outputs show it, goes into dockM / dockN when the user moves it.
export function followDockShape(root = document.getElementById("dock")) {
  if (!root) return;
  const read = () => {
    const num = (id) => {
      const v = Number(String(document.getElementById(id)?.textContent ?? "").replace(/[^0-9]/g, ""));
      return Number.isInteger(v) && v > 0 ? v : null;
    };
    const dockM = num("dock-m-out");
    const dockN = num("dock-n-out");
    if (dockM && dockN) writeUrlState({ dockM, dockN });
  };
  // After the dock's own handlers ran (they update the outputs).
  for (const type of ["input", "change"]) root.addEventListener(type, () => setTimeout(read, 0));
}
