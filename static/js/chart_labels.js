// Names and ticks the charts write: a run's label (device, date, CUDA-graph timings said so), N ticks, the
// notes under the charts and the line naming the runs shown.

function shortDate(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toISOString().slice(0, 16).replace("T", " ");
}

// A run's name in legends and hovers; CUDA-graph timings (launch overhead left out) are said so.
export function sourceLabel(header, { live = false, timing = null } = {}) {
  const device = header?.device?.name ?? "unknown device";
  const graphs = (timing ?? header?.sweep?.timing) === "cuda-graph" ? " · CUDA graph" : "";
  return live ? `live: ${device}${graphs}` : `${device}, ${shortDate(header?.created_at)}${graphs}`;
}

export function powersOfTwo(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log2(lo)); e <= Math.ceil(Math.log2(hi)); e++) out.push(2 ** e);
  return out;
}

export const tickText = (v) => (v >= 1024 && v % 1024 === 0 ? `${v / 1024}K` : String(v));

// A log axis's ticks at 1, 2 and 5 × 10^k over the values (issue 35: plotly's own read "2 3 … 9 100 2 3"), written
// in full ("20", "500", "2k"); {} when there is no positive value (plotly's own ticks then).
export function logTicks(values) {
  const pos = values.filter((v) => Number.isFinite(v) && v > 0);
  if (!pos.length) return {};
  const lo = Math.floor(Math.log10(Math.min(...pos)));
  const hi = Math.ceil(Math.log10(Math.max(...pos)));
  const vals = [];
  for (let k = lo; k <= hi; k++) for (const m of [1, 2, 5]) vals.push(m * 10 ** k);
  const text = (v) => (v >= 1e6 ? `${+(v / 1e6).toPrecision(3)}M` : v >= 1e3 ? `${+(v / 1e3).toPrecision(3)}k` : String(+v.toPrecision(3)));
  return { tickmode: "array", tickvals: vals, ticktext: vals.map(text) };
}

// The line under the charts that says what the marks mean (only those drawn now).
export function chartNotes(built, entries) {
  const bound = built.fwd.cpuBoundCount + built.bwd.cpuBoundCount;
  const wrong = built.fwd.wrongCount + built.bwd.wrongCount;
  const parts = [];
  if (wrong) parts.push(`hollow markers: ${wrong} row${wrong > 1 ? "s" : ""} the correctness gate marked wrong (timed, never ranked)`);
  if (bound) parts.push(`outlined markers: CPU-bound here (${bound} point${bound > 1 ? "s" : ""} whose host time exceeds the GPU time)`);
  if (built.fwd.best.length + built.bwd.best.length) parts.push("★ the fastest measured implementation of each shape");
  if (entries.some((e) => e.row.q1_us != null)) parts.push("error bars: interquartile range (min–max in the hover)");
  return parts.join(" · ");
}

// The caption of the speedup and run-vs-run views: what their lines and reference line mean (no markers, ★ or error
// bars are drawn there).
export function altCaption(view) {
  if (view === "speedup") {
    return "Each line: an implementation's GB/s divided by the baseline's at the same shape; above the dotted 1× line " +
      "it is faster than the baseline.";
  }
  if (view === "diff") {
    return "Each line: the change in GB/s from the base run to the new run at the same shape; above the dotted 0 % " +
      "line the new run is faster.";
  }
  return "";
}

const fmt = (v, digits = 1) => (v == null || !Number.isFinite(v) ? "–" : Number(v).toFixed(digits));

// What a run header's kernel_configs says the Triton kernels ran with: the tuned table (and the card it was tuned
// on) or the rule; nothing for runs older than the tables.
export function configSentence(configs) {
  if (!configs || typeof configs !== "object") return "";
  if (configs.source === "table" && configs.table) {
    const tuned = configs.device ? ` tuned on ${configs.device}${configs.created_at ? ` ${String(configs.created_at).slice(0, 10)}` : ""}` : "";
    return `kernel configs: ${configs.table}${tuned}${configs.override ? " (RMSNORM_CONFIG_TABLE)" : ""}`;
  }
  if (configs.source === "rule") return `kernel configs: the rule (no table for ${configs.arch || "this GPU"})`;
  return "";
}

// The line above the charts: each run shown, its rows per status, its copy ceiling, timing mode and kernel configs.
export function sourcesSentence(sources) {
  if (sources.length === 0) return "No results yet: start a sweep, or open a stored run under History.";
  const parts = sources.map((s) => {
    const n = (st) => s.rows.filter((r) => r.status === st).length;
    const ceiling = s.header?.ceiling_GBps;
    const mode = s.rows.find((r) => r.mode)?.mode;
    const device = s.header?.device?.name;
    let text = `${s.label}${device && !s.live && !String(s.label).includes(device) ? ` (${device})` : ""}: ${n("ok")} measured`;
    for (const st of ["skipped", "error", "wrong"]) if (n(st)) text += `, ${n(st)} ${st}`;
    if (Number.isFinite(ceiling)) text += `, copy ceiling ${fmt(ceiling)} GB/s`;
    if (mode && mode !== "cuda") text += ` (${mode} timings)`;
    const configs = configSentence(s.header?.kernel_configs);
    if (configs) text += `, ${configs}`;
    return text;
  });
  return `Showing ${parts.join(" | ")}`;
}
