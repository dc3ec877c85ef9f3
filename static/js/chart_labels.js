// Names and ticks the charts write: a run's label (device, date, CUDA-graph timings said so), N ticks.

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
