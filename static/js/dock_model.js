// The loading dock's timetable: from an implementation's real launch grid (programs, rows per
// program, partial rows) and the shape, when each truck (a group of thread blocks) loads its carts
// (rows), reaches the dock (the dγ vector), waits, unloads, and when the second pass consolidates.
//
// Durations come from a small cost model (illustrative: bytes over an assumed bandwidth, atomics
// serialised per address). When a run with measured times is selected, the whole timetable is
// stretched to the measured time, so lanes' speed ratios are the measured ratios.

export const MAX_TRUCKS = 64; // trucks drawn; one truck stands for `blocksPerTruck` blocks beyond that
export const MAX_BAYS = 14;

// Trucks drawn for G programs: all of them up to 16, then √G (so many blocks look like many trucks
// and a persistent grid like a few), at most MAX_TRUCKS.
export function trucksFor(programs) {
  return Math.min(programs, MAX_TRUCKS, Math.max(16, Math.ceil(Math.sqrt(programs))));
}
const BYTES_PER_US = 3.0e6; // 3 TB/s
const ATOMIC_BYTES_PER_US = 0.4e6; // fp32 atomics landing on the same N addresses
const ATOMIC_SERIAL_US = 0.003; // one address takes one update at a time
const LAUNCH_US = 3;
const RESIDENT_PER_SM = 4;

// Blocks [i*k, (i+1)*k) of a truck run in waves of `resident` blocks; its load window spans them.
function loadWindows(programs, trucks, resident, mainUs) {
  const waves = Math.max(1, Math.ceil(programs / resident));
  const waveUs = mainUs / waves;
  const k = programs / trucks;
  const out = [];
  for (let i = 0; i < trucks; i++) {
    const first = Math.floor((i * k) / resident);
    const last = Math.floor((Math.ceil((i + 1) * k) - 1) / resident);
    out.push({ loadStart: first * waveUs, loadEnd: (Math.min(last, waves - 1) + 1) * waveUs });
  }
  return { windows: out, waves };
}

// The painter's plan says how its trucks unload (dock_painters/index.js passes it): "one-door" (atomics
// serialised on the same addresses), "bays" (partial rows, then a consolidation pass), "floor" (every truck
// unloads its whole cart of dγ terms on the floor, an M×N tensor; then two crews: a column sum into the partial
// rows, then their sum into dγ) or "direct";
// allResident: every program is resident at once (a persistent grid). `kind` is the painter's name.
export function buildSchedule({
  kind = "generic", family = kind, unload = "direct", allResident = false, launch, M, N, smCount, mode = "bwd",
  elementBytes = 2, forwardLaunch = null,
}) {
  if (mode === "fwd") unload = "direct";
  const sm = Math.max(1, smCount | 0);
  const resident = sm * RESIDENT_PER_SM;
  const MN = M * N;
  let programs = launch?.programs ?? M;
  let rowsPerProgram = launch?.rows_per_program ?? Math.max(1, Math.ceil(M / programs));
  let partialRows = launch?.partial_rows ?? null;
  if (mode === "fwd") {
    // A forward-only implementation's launch is its forward grid; otherwise one program per row.
    programs = forwardLaunch?.programs ?? M;
    rowsPerProgram = forwardLaunch?.rows_per_program ?? Math.max(1, Math.ceil(M / programs));
    partialRows = null;
  }
  programs = Math.max(1, Math.round(programs));
  const trucks = trucksFor(programs);
  const blocksPerTruck = programs / trucks;

  // The main pass: forward reads x, writes y; backward reads x and dy, writes dx (+ its dγ partials; on the floor,
  // the M×N dγ terms in x's dtype).
  const partialBytes = (partialRows ?? 0) * N * 4;
  const floorBytes = unload === "floor" ? MN * elementBytes : 0;
  const mainBytes = mode === "fwd" ? 2 * MN * elementBytes
    : 3 * MN * elementBytes + (unload === "one-door" ? 0 : unload === "floor" ? floorBytes : partialBytes);
  const mainUs = LAUNCH_US + mainBytes / BYTES_PER_US;
  const driveUs = 0.06 * mainUs;
  const { windows, waves } = loadWindows(programs, trucks, allResident ? Math.max(resident, programs) : resident, mainUs);

  const truckList = windows.map((w, i) => ({ ...w, arrive: w.loadEnd + driveUs, unloadStart: 0, unloadEnd: 0, bay: 0, index: i }));
  let consolidation = null;
  let crews = null;
  let bays = 0;

  if (unload === "one-door") {
    // One dock, one truck at a time: every block's N fp32 atomics serialise on the same addresses.
    const atomicUs = Math.max(programs * ATOMIC_SERIAL_US, (programs * N * 4) / ATOMIC_BYTES_PER_US);
    const unloadUs = atomicUs / trucks;
    let free = 0;
    for (const t of [...truckList].sort((a, b) => a.arrive - b.arrive || a.index - b.index)) {
      t.unloadStart = Math.max(t.arrive, free);
      t.unloadEnd = t.unloadStart + unloadUs;
      free = t.unloadEnd;
    }
  } else if (unload === "bays") {
    // Every truck unloads at its own bay (its rows of the fp32 partial buffer), in parallel;
    // then a second pass reads the partial rows and writes dγ into the dock.
    bays = Math.max(1, Math.min(partialRows ?? trucks, trucks, MAX_BAYS));
    const unloadUs = Math.max(0.02 * mainUs, partialBytes / trucks / BYTES_PER_US);
    for (const t of truckList) {
      t.bay = Math.min(bays - 1, Math.floor((t.index * bays) / trucks));
      t.unloadStart = t.arrive;
      t.unloadEnd = t.arrive + unloadUs;
    }
    const start = Math.max(...truckList.map((t) => t.unloadEnd));
    consolidation = { start, end: start + LAUNCH_US + (partialBytes + N * 4) / BYTES_PER_US };
  } else if (unload === "floor") {
    // Every truck tips its whole cart (its rows of dγ terms) on the floor, all at once; crew 1 sums the floor's
    // columns into the partial rows (the bays), crew 2 sums those into the dock (dγ).
    bays = Math.max(1, Math.min(partialRows ?? 1, MAX_BAYS));
    const unloadUs = Math.max(0.03 * mainUs, floorBytes / trucks / BYTES_PER_US);
    for (const t of truckList) {
      t.unloadStart = t.arrive;
      t.unloadEnd = t.arrive + unloadUs;
    }
    const start = Math.max(...truckList.map((t) => t.unloadEnd));
    const mid = start + LAUNCH_US + (floorBytes + partialBytes) / BYTES_PER_US;
    crews = [{ start, end: mid }, { start: mid, end: mid + LAUNCH_US + (partialBytes + N * elementBytes) / BYTES_PER_US }];
    consolidation = { start, end: crews[1].end };
  } else {
    const unloadUs = 0.03 * mainUs;
    for (const t of truckList) {
      t.unloadStart = t.arrive;
      t.unloadEnd = t.arrive + unloadUs;
    }
  }

  const total = consolidation ? consolidation.end : Math.max(...truckList.map((t) => t.unloadEnd));
  const schedule = {
    kind, family, unload, mode, programs, rowsPerProgram, partialRows, trucks: truckList, blocksPerTruck, bays,
    consolidation, crews, total, occupancy: occupancyOf(launch, mode), modelTotal: total, waves, M, N, smCount: sm,
  };
  schedule.maxQueueLength = maxQueue(schedule);
  return schedule;
}

// SMs × blocks per SM, where a launch publishes them (from the occupancy API, a recorded grid, or an estimate).
function occupancyOf(launch, mode) {
  if (mode === "fwd" || !launch?.blocks_per_sm || !launch?.sm_count) return null;
  const how = String(launch.occupancy ?? "");
  const source = how.startsWith("estimate") ? " (estimate)" : how.startsWith("recorded") ? " (recorded)" : "";
  return { sms: launch.sm_count, perSm: launch.blocks_per_sm, source };
}

// Stretch a timetable so that it takes `us` in total (a measured time).
export function stretchTo(schedule, us) {
  const f = us / schedule.total;
  const s = { ...schedule, total: us };
  s.trucks = schedule.trucks.map((t) => ({
    ...t, loadStart: t.loadStart * f, loadEnd: t.loadEnd * f, arrive: t.arrive * f, unloadStart: t.unloadStart * f, unloadEnd: t.unloadEnd * f,
  }));
  s.consolidation = schedule.consolidation && { start: schedule.consolidation.start * f, end: schedule.consolidation.end * f };
  s.crews = schedule.crews && schedule.crews.map((c) => ({ start: c.start * f, end: c.end * f }));
  return s;
}

// Trucks that have arrived at the dock and wait for it at time t (in drawn trucks).
export function waitingTrucks(schedule, t) {
  return schedule.trucks.filter((tr) => tr.arrive <= t && t < tr.unloadStart);
}

export function queueLength(schedule, t) {
  return Math.round(waitingTrucks(schedule, t).length * schedule.blocksPerTruck);
}

// The longest queue (in blocks) during the whole timetable: it peaks just after an arrival.
export function maxQueue(schedule) {
  let best = 0;
  for (const tr of schedule.trucks) best = Math.max(best, queueLength(schedule, tr.arrive));
  return best;
}

export function phaseAt(schedule, t) {
  if (t >= schedule.total) return "done";
  if (schedule.crews && t >= schedule.crews[1].start) return `crew 2: the ${schedule.partialRows} partial rows into dγ`;
  if (schedule.crews && t >= schedule.crews[0].start) return `crew 1: the floor's columns into ${schedule.partialRows} partial rows`;
  if (schedule.consolidation && t >= schedule.consolidation.start) return "second pass: consolidating the bays into dγ";
  const loading = schedule.trucks.some((tr) => t >= tr.loadStart && t < tr.loadEnd);
  if (schedule.unload === "one-door" && waitingTrucks(schedule, t).length > 0) return "queueing at the one dock";
  if (loading) return schedule.mode === "fwd" ? "normalising rows" : "loading rows";
  return schedule.mode === "fwd" ? "writing y" : "unloading";
}
