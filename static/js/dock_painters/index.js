// The painters' table: one painter per dγ family, keyed by the family name GET /api/implementations gives
// (`dgamma_family` when the service sends it, else `family`). A new family is one painter file (kind,
// title, plan, paint, destination; optionally loading, prepare, queue, status, sentence) and one line here.

import { buildSchedule } from "../dock_model.js";
import atomic from "./atomic.js";
import naiveChain from "./naive-chain.js";
import persistent from "./persistent.js";
import workspace from "./workspace.js";
import forward from "./forward.js";
import fallback from "./default.js";

export const PAINTERS = {
  atomic,
  workspace,
  persistent,
  "naive-chain": naiveChain,
};

export const familyOf = (impl) => impl?.dgamma_family ?? impl?.family ?? "other";

// The forward pass has one drawing whatever the family; a backward without a published grid, or of a
// family with no painter, gets the default one.
export function painterFor(family, launch, mode) {
  if (mode === "fwd") return forward;
  if (launch && Object.hasOwn(PAINTERS, family)) return PAINTERS[family];
  return fallback;
}

export const sceneKind = (family, launch, mode) => painterFor(family, launch, mode).kind;

// The timetable of one lane, with the painter's plan (how its trucks unload).
export function scheduleFor({ family, launch, mode = "bwd", ...rest }) {
  const painter = painterFor(family, launch, mode);
  return buildSchedule({ ...rest, launch, mode, family, kind: painter.kind, ...painter.plan });
}
