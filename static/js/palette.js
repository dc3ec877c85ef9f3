// A stable colour per implementation: the name is hashed into a fixed palette, so the same
// implementation always gets the same colour on every chart and in the dock, and a new plugin
// gets one too with no front-end edit.

const PALETTE = [
  "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
  "#bcbd22", "#393b79", "#ad494a", "#637939", "#8c6d31", "#7b4173", "#3182bd", "#e6550d",
  "#31a354", "#756bb1", "#636363", "#d6616b",
];

// Names of the registry, in its order, get distinct colours: each takes its hashed slot, or the
// next free one when an earlier name holds it (so the same registry always paints the same way).
const assigned = new Map();

// FNV-1a, 32 bit.
export function hashName(name) {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

export function assignColors(names) {
  assigned.clear();
  const used = new Set();
  for (const name of names) {
    let slot = hashName(String(name)) % PALETTE.length;
    for (let tries = 0; used.has(slot) && tries < PALETTE.length; tries++) slot = (slot + 1) % PALETTE.length;
    used.add(slot);
    assigned.set(String(name), PALETTE[slot]);
  }
}

export function colorFor(name) {
  return assigned.get(String(name)) ?? PALETTE[hashName(String(name)) % PALETTE.length];
}
