// The persistent family: a few trucks (SMs × k programs, all resident at once) each make round after round
// to the yard, carrying many rows with a running load; one delivery each to a small consolidation (bays).

import { bayDestination, baySentence, paintBays } from "./workspace.js";

export default {
  kind: "persistent",
  title: "persistent: few trucks, running load",
  plan: { unload: "bays", allResident: true },
  paint: paintBays,

  loading(lane, g, tr, t, park) {
    const s = lane.schedule;
    const f = (t - tr.loadStart) / Math.max(1e-9, tr.loadEnd - tr.loadStart);
    const rounds = Math.min(6, Math.max(1, s.rowsPerProgram / 8));
    const reach = Math.max(0, g.park[0] - g.yard[1] - 2);
    return { x: park.x - reach * Math.abs(Math.sin(Math.PI * rounds * f)), y: park.y };
  },

  destination: bayDestination,
  sentence: baySentence,
};
