// The persistent family: a few trucks (SMs × k programs, all resident at once) each make round after round
// to the yard, carrying many rows with a running load; one delivery each to a small consolidation (bays).

import { bayDestination, baySentence, paintBays } from "./workspace.js";
import { plural } from "./labels.js";

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
  what: (s) => `only ${plural(s.programs, "program")}, all resident, each sweep ${plural(s.rowsPerProgram, "row")} keeping ` +
    `its dγ sum in registers: no queue, and the second pass sums just ${plural(s.partialRows, "partial row")}.`,
};
