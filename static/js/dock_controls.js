// The dock's words around the lanes: the implementation picker, the line naming the run and dtype it uses
// (with the offer of a run that just finished), and the sentence saying where the lanes' times come from.

import { colorFor } from "./palette.js";
import { familyOf } from "./dock_painters/index.js";
import { runName } from "./dock_data.js";

// A checkbox per candidate implementation; `hidden` (a Set of names) is updated in place, then onChange().
export function renderPicker(box, candidates, hidden, onChange) {
  box.replaceChildren();
  if (!candidates.length) box.textContent = "No implementation registers this pass.";
  for (const impl of candidates) {
    const label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "checkbox";
    input.value = impl.name;
    input.checked = !hidden.has(impl.name);
    input.addEventListener("change", () => {
      if (input.checked) hidden.delete(impl.name);
      else hidden.add(impl.name);
      onChange();
    });
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colorFor(impl.name);
    label.append(input, swatch, ` ${impl.name}`);
    label.title = `${familyOf(impl)}: ${impl.description || ""}`;
    box.append(label);
  }
}

// "Data: the run on <device · date · id>. dtype <d> (<why>)." and, when a run has just finished, a button
// to use it instead (the dock never switches to it on its own once it has a run, nor to a CPU run).
export function showSource(el, { measured, offered, dtypeChoice, useOffered, name = null, lacking = [] }) {
  const { dtype, why } = dtypeChoice;
  window.dockScene.dtype = dtype;
  window.dockScene.runId = measured?.run?.run_id ?? null;
  window.dockScene.offered = offered?.run?.run_id ?? null;
  if (!el) return;
  const run = measured ? (name ? `the run ${name} (${runName(measured.run)})` : `the run on ${runName(measured.run)}`)
    : "no run selected: the cost model draws every lane (open a run under History)";
  const data = document.createElement("span");
  data.className = "dock-run";
  data.textContent = `Data: ${run}.`;
  const dt = document.createElement("span");
  dt.className = "dock-dtype";
  dt.textContent = `dtype ${dtype} (${why}).`;
  el.replaceChildren(data, " ", dt);
  if (measured && lacking.length) { // the lanes this run cannot drive: said, not left standing still unexplained
    const lacks = document.createElement("span");
    lacks.className = "dock-lacks";
    lacks.textContent = ` This run has no measured time of ${lacking.join(", ")} in this pass: ` +
      `${lacking.length > 1 ? "their lanes draw" : "its lane draws"} from the cost model only where you tick it.`;
    el.append(lacks);
  }
  if (offered) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "dock-offer";
    button.textContent = `Use the finished run (${runName(offered.run)}) in the dock`;
    button.addEventListener("click", useOffered);
    el.append(" ", button);
  }
}

// The legend's words for the pass shown: the backward's trucks bring dγ to one dock; the forward's write y directly.
export const LEGEND = {
  bwd: ["Rows are ", ["carts"], ", thread blocks (programs) are ", ["trucks"], ", the dγ vector is the ", ["dock"], "."],
  fwd: ["Forward: rows are ", ["carts"], ", thread blocks (programs) are ", ["trucks"], "; each truck normalises its rows and ",
    "delivers y straight to its own place on the ", ["y bar"], ": no reduction across rows, so no truck waits for another."],
};

export function showLegend(el, mode) {
  if (!el) return;
  el.replaceChildren(...(LEGEND[mode] ?? LEGEND.bwd).map((part) =>
    (Array.isArray(part) ? Object.assign(document.createElement("b"), { textContent: part[0] }) : part)));
}

export function timingSentence(schedules, { allMeasured, model, ratio, mode, M, N, smCount, dtype, run }) {
  if (!schedules.length) return "Pick at least one implementation to show.";
  const shape = `M=${M}, N=${N}, ${smCount} SMs`;
  const device = run?.device?.name ?? "?";
  if (allMeasured) {
    return `Speeds are the measured ${mode} times (${dtype}) at ${shape} from the run on ${device} ` +
      `(slowest/fastest = ${ratio.toFixed(2)}×).`;
  }
  const missing = schedules.filter((s) => !s.measured).map((s) => s.impl.name).join(", ");
  const have = schedules.filter((s) => s.measured).map((s) => s.impl.name).join(", ");
  if (model && run && have) {
    return `Measured ${mode} times (${dtype}) at ${shape} from the run on ${device} for ${have}; ${missing}: ` +
      "illustrative times from a byte/atomic cost model (the run did not measure them here; cost model for unmeasured shapes is on).";
  }
  if (model) {
    const why = run
      ? `the selected run has no ${mode} time in ${dtype} at ${shape} for ${missing} (cost model for unmeasured shapes is on)`
      : "no run is selected (open one under History, or finish a sweep)";
    return `Illustrative timing from a byte/atomic cost model at ${shape}: ${why}.`;
  }
  return `Measured ${mode} times (${dtype}) at ${shape} from the run on ${device}` + (have ? ` for ${have}` : "") +
    `; the run did not measure ${missing} there (tick "cost model for unmeasured shapes" to draw them from the model).`;
}
