// The JSON API, and nothing else: every request the page makes goes through here.
// URLs are relative to the page, so the dashboard also works behind a path prefix.

export class ApiError extends Error {
  constructor(message, status, body) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
  }
}

// A readable sentence from an error response: FastAPI's 422 `detail` list becomes
// "field: message" lines; a string detail is shown as is.
export function describeError(status, body) {
  const detail = body && typeof body === "object" ? body.detail ?? body.message ?? body.reason : body;
  if (Array.isArray(detail)) {
    const lines = detail.map((d) => {
      const loc = Array.isArray(d.loc) ? d.loc.filter((p) => p !== "body").join(".") : "";
      return loc ? `${loc}: ${d.msg}` : String(d.msg ?? JSON.stringify(d));
    });
    return lines.join("\n");
  }
  if (detail && typeof detail === "object") return JSON.stringify(detail);
  if (detail) return String(detail);
  return `the service answered HTTP ${status}`;
}

async function errorFrom(res) {
  let body = null;
  const text = await res.text().catch(() => "");
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  const prefix = res.status === 422 ? "The request was refused" : `HTTP ${res.status}`;
  return new ApiError(`${prefix}: ${describeError(res.status, body)}`, res.status, body);
}

// The API token, when the service asks for one (bound to a non-loopback address): sent on writes only.
let token = "";
export function setToken(value) {
  token = String(value || "").trim();
}
function writeHeaders(extra) {
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function json(url, options = {}) {
  const res = await fetch(url, { headers: { Accept: "application/json" }, ...options });
  if (!res.ok) throw await errorFrom(res);
  return res.json();
}

export const getHealth = () => json("api/health");
export const getImplementations = () => json("api/implementations");
export const getPresets = () => json("api/presets");
export const getRuns = () => json("api/runs");
export const getRun = (id) => json(`api/runs/${encodeURIComponent(id)}`);
export const runJsonUrl = (id) => `api/runs/${encodeURIComponent(id)}.json`;
export const runCsvUrl = (id) => `api/runs/${encodeURIComponent(id)}.csv`;

export function getLaunch(M, N, smCount) {
  const q = new URLSearchParams({ M: String(M), N: String(N), sm_count: String(smCount) });
  return json(`api/launch?${q}`);
}

export function importRun(doc, { label = null } = {}) {
  const query = label ? `?${new URLSearchParams({ label: String(label).slice(0, 200) })}` : "";
  return json(`api/runs/import${query}`, {
    method: "POST",
    headers: writeHeaders({ "Content-Type": "application/json", Accept: "application/json" }),
    body: JSON.stringify(doc),
  });
}

export async function deleteRun(id) {
  const res = await fetch(`api/runs/${encodeURIComponent(id)}`, { method: "DELETE", headers: writeHeaders({}) });
  if (!res.ok) throw await errorFrom(res);
}

// POST /benchmark and read its NDJSON stream line by line as it arrives.
// `onLine(obj)` is called once per line ({type: queued|header|row|summary, run_id, ...}); a `heartbeat` line
// (sent when the stream was silent for a few seconds: a case is still running) only keeps the connection alive.
// Resolves when the stream ends; rejects with ApiError (non-2xx) or AbortError (cancelled).
export async function streamBenchmark(sweep, { signal, onLine }) {
  const res = await fetch("benchmark", {
    method: "POST",
    headers: writeHeaders({ "Content-Type": "application/json", Accept: "application/x-ndjson" }),
    body: JSON.stringify(sweep),
    signal,
  });
  if (!res.ok) throw await errorFrom(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const emit = (line) => {
    const text = line.trim();
    if (!text) return;
    let obj;
    try {
      obj = JSON.parse(text);
    } catch {
      throw new ApiError(`The stream sent a line that is not JSON: ${text.slice(0, 120)}`, res.status, text);
    }
    if (obj && obj.type === "heartbeat") return;
    onLine(obj);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n")) >= 0) {
      emit(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 1);
    }
  }
  buffer += decoder.decode();
  emit(buffer);
}

// dashA (issue 17): NEW/BASE GB/s per shape of two stored runs (engine.compare); mixed timing modes are
// allowed here, the page warns about them itself (the answer names both runs' timing modes).
export function getCompare(base, newId, { allowMixedTiming = true } = {}) {
  const q = new URLSearchParams({ base, new: newId, allow_mixed_timing: String(allowMixedTiming) });
  return json(`api/compare?${q}`);
}

// Trends across the stored runs of one device and timing mode (engine.compare.trends); null: the service's default.
export function getTrends(device = null, timing = null) {
  const q = new URLSearchParams();
  if (device) q.set("device", device);
  if (timing) q.set("timing", timing);
  return json(`api/trends?${q}`);
}
