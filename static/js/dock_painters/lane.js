// What every painter shares: the lane's geometry, the ground (yard of carts, the road), the trucks'
// movement from their parking place to where the painter sends them, the dock bar, and one truck.

import { text } from "./labels.js";
import { DOCK_LIGHT } from "../chart_theme.js";

export const clamp01 = (v) => Math.max(0, Math.min(1, v));
export const lerp = (a, b, f) => a + (b - a) * f;
export const frac = (t, start, end) => clamp01((t - start) / Math.max(1e-9, end - start));
export const loaded = (tr, t) => frac(t, tr.loadStart, tr.loadEnd);
export const unloaded = (tr, t) => frac(t, tr.unloadStart, tr.unloadEnd);
// Share of the work unloaded at the dock (or its bays) by time t, over all trucks.
export const delivered = (s, t) => s.trucks.reduce((a, tr) => a + unloaded(tr, t), 0) / s.trucks.length;

// g.c: the canvas colours (lane.theme, from the page's colour scheme; the light ones without it).
export function geometry(lane, { top = 44, bottomPad = 26 } = {}) {
  const W = lane.w ?? 400;
  const H = lane.h ?? 260;
  const bottom = H - bottomPad;
  const tw = Math.max(11, Math.min(20, W / 30));
  const th = Math.round(tw * 0.55);
  const rows = Math.max(1, Math.floor((bottom - top) / (th + 3)));
  const dockW = Math.max(14, W * 0.045);
  return {
    W, H, top, bottom, mid: (top + bottom) / 2, tw, th, rows, c: lane.theme ?? DOCK_LIGHT,
    yard: [8, W * 0.17], park: [W * 0.2, W * 0.42], bayX: W * 0.7, dockX: W - 8 - dockW, dockW,
  };
}

// Where truck i of `count` waits before it loads: columns of the parking area.
export function parkPos(g, i, count) {
  const perCol = Math.max(1, Math.floor((g.park[1] - g.park[0]) / (g.tw + 4)));
  const rows = Math.min(g.rows, Math.max(1, Math.ceil(count / perCol)));
  const col = Math.floor(i / rows);
  const row = i % rows;
  const usedH = rows * (g.th + 3);
  return { x: g.park[0] + col * (g.tw + 4), y: g.mid - usedH / 2 + row * (g.th + 3) };
}

// Background, the road from the parking area to the dock, and the carts (rows) in the yard: picked
// ones fade as the trucks load them.
export function paintGround(ctx, g, s, t) {
  ctx.clearRect(0, 0, g.W, g.H);
  ctx.fillStyle = g.c.bg;
  ctx.fillRect(0, 0, g.W, g.H);
  ctx.fillStyle = g.c.road;
  ctx.fillRect(g.park[0] - 4, g.top - 4, g.dockX - g.park[0] + 4, g.bottom - g.top + 8);
  const picked = s.trucks.reduce((a, tr) => a + loaded(tr, t), 0) / s.trucks.length;
  const carts = Math.min(s.M, 60);
  const cw = Math.min(10, (g.yard[1] - g.yard[0]) / Math.max(1, Math.ceil(carts / 10)) - 3);
  const ch = Math.min(8, (g.bottom - g.top) / 10 - 3);
  for (let j = 0; j < carts; j++) {
    ctx.fillStyle = j < picked * carts ? g.c.cartDone : g.c.cart;
    ctx.fillRect(g.yard[0] + Math.floor(j / 10) * (cw + 3), g.top + (j % 10) * (ch + 3), cw, ch);
  }
}

// The dock: the dγ vector (or y, forward), filling as it is written.
export function paintDockBar(ctx, g, fill, color, label, boxes) {
  ctx.fillStyle = g.c.bar;
  ctx.fillRect(g.dockX, g.top, g.dockW, g.bottom - g.top);
  ctx.fillStyle = color;
  const fh = (g.bottom - g.top - 4) * fill;
  ctx.fillRect(g.dockX + 2, g.bottom - 2 - fh, g.dockW - 4, fh);
  text(ctx, label, g.dockX + g.dockW / 2, g.top - 4, { size: 11, bold: true, align: "center", color: g.c.ink, boxes, name: "dock" });
}

// From the parking place to `dest`, smoothly, between loading's end and the arrival.
export function driveTo(park, dest, tr, t) {
  if (t >= tr.arrive) return dest;
  const f = frac(t, tr.loadEnd, tr.arrive);
  const e = f * f * (3 - 2 * f);
  return { x: lerp(park.x, dest.x, e), y: lerp(park.y, dest.y, e) };
}

// Every truck at its place for time t: parked, loading (the painter may move it), then driven to the
// painter's destination. Positions ease towards their targets between frames (snap: jump).
export function paintTrucks(ctx, lane, g, t, { snap, dt, color, painter, extra }) {
  const s = lane.schedule;
  const k = snap ? 1 : 1 - Math.exp(-dt / 70);
  for (const tr of s.trucks) {
    const park = parkPos(g, tr.index, s.trucks.length);
    let target = park;
    if (t >= tr.loadStart && t < tr.loadEnd) target = painter.loading?.(lane, g, tr, t, park) ?? park;
    else if (t >= tr.loadEnd) target = driveTo(park, painter.destination(lane, g, tr, t, extra, park), tr, t);
    const prev = lane.pos.get(tr.index);
    const p = !prev || snap ? target : { x: lerp(prev.x, target.x, k), y: lerp(prev.y, target.y, k) };
    lane.pos.set(tr.index, p);
    const fade = t > tr.unloadEnd ? clamp01(1 - (t - tr.unloadEnd) / (0.04 * s.total + 1e-9)) : 1;
    if (fade <= 0 || t >= s.total) continue;
    const load = t < tr.unloadStart ? loaded(tr, t) : 1 - unloaded(tr, t);
    truck(ctx, p.x, p.y, g.tw, g.th, color, load, fade * (t < tr.loadStart ? 0.45 : 1), g.c);
  }
}

export function truck(ctx, x, y, w, h, color, load, alpha, c = DOCK_LIGHT) {
  ctx.globalAlpha = alpha;
  const body = w * 0.72;
  ctx.fillStyle = c.truck;
  ctx.fillRect(x, y, body, h);
  ctx.fillStyle = color;
  ctx.fillRect(x, y + h * (1 - load), body, h * load); // the cargo
  ctx.strokeStyle = color;
  ctx.lineWidth = 1;
  ctx.strokeRect(x + 0.5, y + 0.5, body - 1, h - 1);
  ctx.fillStyle = c.cab;
  ctx.fillRect(x + body + 1, y + h * 0.25, w - body - 1, h * 0.75); // the cab
  ctx.globalAlpha = 1;
}
