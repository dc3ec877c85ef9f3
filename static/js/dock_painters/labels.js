// Text on a lane's canvas, the shared way: one font stack, an optional width cap, and a record of the box
// each label took (lane.labelBoxes), so the test hook can check that no two labels overlap.

export const FONT = 'system-ui, -apple-system, "Segoe UI", sans-serif';

// "1 row", "2 rows": a count and its noun.
export const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

export const fmtUs = (us) => (us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(us < 10 ? 2 : 1)} µs`);

// Draw `text` at (x, y) (alphabetic baseline); returns the box it covers {x, y, w, h} in CSS pixels.
export function text(ctx, str, x, y, { size = 11, bold = false, color = "#333", align = "left", maxWidth, boxes, name } = {}) {
  ctx.font = `${bold ? "600 " : ""}${size}px ${FONT}`;
  ctx.fillStyle = color;
  ctx.textAlign = align;
  ctx.textBaseline = "alphabetic";
  if (maxWidth) ctx.fillText(str, x, y, maxWidth);
  else ctx.fillText(str, x, y);
  ctx.textAlign = "left";
  const w = Math.min(ctx.measureText(str).width, maxWidth ?? Infinity);
  const left = align === "right" ? x - w : align === "center" ? x - w / 2 : x;
  const box = { name: name ?? str, x: left, y: y - size * 0.8, w, h: size };
  boxes?.push(box);
  return box;
}
