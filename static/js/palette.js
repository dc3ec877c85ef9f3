// A stable colour and marker shape per implementation, the same on every chart and in the dock.
// The colours: Okabe–Ito hues (plus a few of Paul Tol's), colour-blind safe, each tuned to a contrast of
// at least 3:1 against the page in light mode (white cards, #f5f4ef page) and in dark mode (#1c1f24 cards,
// #121417 page): one list per colour scheme, same hue order. The shape tells implementations apart where two
// hues are hard to tell apart: one shape per implementation, never per dtype.
// The registry's names take slots in its order (so the same registry always paints the same way); a name
// the registry did not list (an older file's plugin) gets a slot from a hash of its name.

export const PALETTES = {
  light: ["#0072B2", "#D55E00", "#007A5A", "#B8428C", "#8F6A00", "#5A3FA8",
    "#505050", "#00798C", "#C0392B", "#6B7A00", "#8E4A1C", "#7A2048",
    "#1565C0", "#2E7D32", "#8E24AA", "#795548"],
  dark: ["#56B4E9", "#E69F00", "#2EC4A0", "#E882C4", "#F0E442", "#A996F0",
    "#C8C8C8", "#3FD0E0", "#FF7F6E", "#B8C84A", "#E0A070", "#F4A3A8",
    "#90CAF9", "#A5D6A7", "#CE93D8", "#BCAAA4"],
};
// Plotly marker symbols; each has a hollow "-open" variant (used for rows the correctness gate marked wrong).
export const SYMBOLS = ["circle", "square", "diamond", "triangle-up", "triangle-down", "pentagon",
  "hexagon", "cross", "x", "triangle-left", "hourglass", "bowtie", "star", "hexagram", "star-diamond", "diamond-tall"];

const SLOTS = PALETTES.light.length;
const assigned = new Map(); // name -> slot (0 .. SLOTS*SYMBOLS-1: past the palette, the shape cycles on)

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
  [...new Set(names.map(String))].forEach((name, i) => assigned.set(name, i));
}

export function slotFor(name) {
  return assigned.get(String(name)) ?? hashName(String(name)) % SLOTS;
}

export function currentScheme() {
  return window.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function colorFor(name, scheme = currentScheme()) {
  const list = PALETTES[scheme] ?? PALETTES.light;
  return list[slotFor(name) % SLOTS];
}

// Past 16 names the colours repeat; the shape then shifts, so (colour, shape) stays unique for 256 names.
export function symbolFor(name) {
  const slot = slotFor(name);
  return SYMBOLS[(slot + Math.floor(slot / SLOTS)) % SYMBOLS.length];
}
