// The charts' tools: the mode bar (an allow-list: no cloud upload or sharing; PNG export kept; our own
// "CSV of this view" button), kept out of the tab order (the page's own CSV / PNG buttons are the keyboard's
// way in), and the CSV of what the charts show.

const CSV_ICON = {
  width: 1000,
  height: 1000,
  // A sheet with rows: the "table" reading of a download.
  path: "M150 100h700v800h-700z M230 250h540v80h-540z M230 430h540v80h-540z M230 610h540v80h-540z",
};

// The mode-bar buttons a chart offers, in groups; nothing else (plotly's defaults include "Share chart…",
// sendChartToCloud, which uploads the data).
export function modeBarConfig({ filename, onCsv }) {
  const csv = { name: "csvOfView", title: "Download the CSV of this view", icon: CSV_ICON, click: () => onCsv() };
  return {
    responsive: true,
    displaylogo: false,
    showLink: false,
    showSendToCloud: false,
    modeBarButtons: [[csv, "toImage"], ["zoom2d", "pan2d", "zoomIn2d", "zoomOut2d", "autoScale2d", "resetScale2d"]],
    toImageButtonOptions: { format: "png", filename, scale: 2 },
  };
}

// One plotly draw at a time per chart: plotly 4 can spin for ever when a chart is redrawn while its previous
// react/relayout is still settling (seen: the first look's render followed in the same task by the URL's
// filters and view). `draw` returns plotly's promise; a draw asked for meanwhile waits, and only the latest
// waiting one runs.
export function drawSerial(el, draw) {
  if (el._drawing) {
    el._nextDraw = draw;
    return el._drawing;
  }
  let done;
  try {
    done = Promise.resolve(draw());
  } catch (err) {
    done = Promise.reject(err);
  }
  el._drawing = done.catch((err) => console.warn("plotly draw failed", err)).then(() => {
    el._drawing = null;
    const next = el._nextDraw;
    el._nextDraw = null;
    if (next) return drawSerial(el, next);
  });
  return el._drawing;
}

// Mode-bar buttons are reached by pointer only: the page's toolbar has the same actions for the keyboard.
export function untab(el) {
  for (const b of el.querySelectorAll(".modebar button, .modebar a, .modebar-btn")) b.setAttribute("tabindex", "-1");
}

const CSV_COLUMNS = ["pass", "run", "impl", "dtype", "M", "N", "status", "view", "value", "median_us", "q1_us", "q3_us",
  "min_us", "max_us", "GBps", "pct_of_ceiling", "host_us", "cpu_bound", "best", "reason", "peak_bytes"];

function cell(v) {
  if (v == null || (typeof v === "number" && !Number.isFinite(v))) return "";
  let s = String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`; // not a formula to a spreadsheet
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

// entries: [{pass, run, row, value, best, cpuBound}] -> CSV text (one line per plotted point).
export function csvOfView(entries, view) {
  const lines = [CSV_COLUMNS.join(",")];
  for (const e of entries) {
    const r = e.row;
    lines.push([e.pass, e.run, r.impl, r.dtype, r.M, r.N, r.status, view, e.value, r.median_us, r.q1_us, r.q3_us,
      r.min_us, r.max_us, r.GBps, r.pct_of_ceiling, r.host_us, e.cpuBound ? "yes" : "", e.best ? "yes" : "",
      r.status === "wrong" ? r.reason : "", r.peak_bytes].map(cell).join(","));
  }
  return lines.join("\n") + "\n";
}

export function download(text, filename, type = "text/csv") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = Object.assign(document.createElement("a"), { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
