// The model names of a hidden size N (issue 15), from GET /api/presets (the engine's one source of truth):
// the charts write them under the N ticks and in the hover; the run panel offers the presets.

const names = new Map(); // N → ["Llama 3.1 8B", …]

export function setPresets(presets) {
  names.clear();
  for (const p of presets ?? []) {
    for (const [n, list] of Object.entries(p.labels ?? {})) names.set(Number(n), list);
  }
}

export const modelNames = (n) => names.get(Number(n)) ?? [];

// Ticks for the N axis: the powers of two in range, plus every model width drawn (so 2880 is labelled).
export function nTicks(xs, powers) {
  const drawn = new Set(xs);
  const out = new Set(powers);
  for (const n of drawn) if (names.has(n)) out.add(n);
  return [...out].sort((a, b) => a - b);
}

// Tick texts that never collide (issue 35: "2880 · GPT-OSS 20B" over "3K"): "4096 · Llama 3.1 8B" on a slanted
// axis (the first model name; all of them are in the hover), the number alone on a level one. A label is kept when
// the labels kept so far leave it room: slanted (parallel) labels 22 px apart along the axis, level ones half their
// widths and a gap; the measured widths first (those with a model name before the others), then the powers of two.
// A dropped label keeps its tick mark (text ""). drawn: the values plotted; pxPerOctave: the axis's scale.
export function tickLabels(ticks, text, pxPerOctave, { drawn = new Set(ticks), slanted = true } = {}) {
  const label = (n) => (slanted && modelNames(n).length ? `${text(n)} · ${modelNames(n)[0]}` : text(n));
  const width = (n) => label(n).length * 7 + 8; // 12 px digits and letters
  const x = (n) => Math.log2(n) * pxPerOctave;
  const rank = (n) => (drawn.has(n) ? 2 : 0) + (modelNames(n).length ? 1 : 0);
  const kept = [];
  for (const n of [...ticks].sort((a, b) => rank(b) - rank(a) || a - b)) {
    const room = (m) => Math.abs(x(n) - x(m)) >= (slanted ? 22 : (width(n) + width(m)) / 2);
    if (kept.every(room)) kept.push(n);
  }
  return ticks.map((n) => (kept.includes(n) ? label(n) : ""));
}

// The hover's line: "N = 4096: Llama 3.1 8B, Mistral 7B, …".
export function hoverNames(n) {
  const list = modelNames(n);
  return list.length ? `<br>models: ${list.join(", ")}` : "";
}
