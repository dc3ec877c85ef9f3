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

// Tick texts: "4096 · Llama 3.1 8B" (the first model name; all of them are in the hover) where the slanted
// label has room, the number alone where it would crowd the last named tick (2304 after 2048 at 600 px).
export function tickLabels(ticks, text, pxPerOctave) {
  let last = -Infinity;
  return ticks.map((n) => {
    const list = modelNames(n);
    const x = Math.log2(n) * pxPerOctave;
    if (!list.length || x - last < 40) return text(n);
    last = x;
    return `${text(n)} · ${list[0]}`;
  });
}

// The hover's line: "N = 4096: Llama 3.1 8B, Mistral 7B, …".
export function hoverNames(n) {
  const list = modelNames(n);
  return list.length ? `<br>models: ${list.join(", ")}` : "";
}
