// The fleet of a service started with --ray (GET /api/health's "fleet"): every node, its GPUs, each GPU's queue
// and whether its actor is ready. Hidden when the service runs on its own host's devices.

import { getHealth } from "./api.js";

const REFRESH_MS = 10000;

function cell(tr, text, className = "") {
  const td = document.createElement("td");
  td.textContent = String(text);
  if (className) td.className = className;
  tr.append(td);
}

export function showFleet(box, health) {
  const fleet = health?.fleet;
  box.hidden = !fleet;
  if (!fleet) return false;
  const gpus = new Map((health.gpus ?? []).map((d) => [d.label, d]));
  box.querySelector("summary").textContent =
    `Fleet: ${fleet.nodes.length} node${fleet.nodes.length === 1 ? "" : "s"}, ${fleet.gpus} GPU${fleet.gpus === 1 ? "" : "s"} (${fleet.ready} ready)`;
  const tbody = box.querySelector("tbody");
  tbody.replaceChildren();
  for (const node of fleet.nodes) {
    for (const g of node.gpus) {
      const d = gpus.get(g.label) ?? g;
      const tr = document.createElement("tr");
      if (!node.alive) tr.className = "status-error";
      cell(tr, `${node.host} (${node.address})${node.alive ? "" : " — left the cluster"}`);
      cell(tr, g.label);
      cell(tr, d.index ?? "–", "num");
      cell(tr, `${d.name}${d.model && !String(d.name).includes(d.model) ? ` [${d.model}]` : ""}`);
      cell(tr, d.queue_length, "num");
      cell(tr, d.ready ? (d.busy ? "busy" : "ready") : d.error ? `not ready: ${d.error}` : "starting");
      tr.title = `node ${node.node_id}${d.uuid ? ` · ${d.uuid}` : ""}`;
      tbody.append(tr);
    }
  }
  return true;
}

// Keep the list current while the page is open (queues move, actors start, nodes leave).
export function followFleet(box, health, onHealth) {
  if (!showFleet(box, health)) return;
  setInterval(async () => {
    try {
      const fresh = await getHealth();
      showFleet(box, fresh);
      onHealth?.(fresh);
    } catch {
      // the health line already says when the service stops answering
    }
  }, REFRESH_MS);
}
