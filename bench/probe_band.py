"""Probe for the next device session (issue 33; docs/NOTES.md, twentieth session): every candidate the tuner knows,
timed at the scan's widths where we still trail, against the configuration in force there — the forward from 8448 to
11008 (89–95 % of the copy ceiling where torch.compile runs at 98 %), the persistent backward at the even widths
that are not multiples of 8 (42–52 %, 0.70–0.82× QuACK) and at 768 (4 µs above the line from 512 to 1024), and
the split kernels at odd widths. Each candidate is checked against fp64 first (`engine.tune.compile_all`). What it
answers: is the miss the lookup's (a better candidate exists at that width) or the kernels'? Run as
`python3 -u -c 'exec(open("bench/probe_band.py").read())'` (the compile workers are spawned); it goes once its
numbers are in docs/."""

import json
import os

import torch

from engine import device as devices
from engine import tune as T
from engine.byte_model import min_bytes
from engine.ceiling import measure_copy
from rmsnorm_kernels import kernel_config as kc

M = 16384
# the backward first (the widest gap), then the forward band; PROBE_SHORT=1 keeps a case or two of each
CASES = [("persistent", n) for n in (8298, 8450, 10668, 15678, 768)]
CASES += [("fwd", n) for n in (8448, 8960, 9472, 9728, 9984, 10496, 10752, 11008)]
# the split kernels (tuner candidates since the twentieth session) where rows do not start aligned
CASES += [(kind, n) for kind in ("persistent", "fwd") for n in (5299, 14155, 15651)] + [
    ("fwd", n) for n in (8298, 15678)
]
if os.environ.get("PROBE_CASES"):  # e.g. "fwd:8960,persistent:14155"
    CASES = [(c.split(":")[0], int(c.split(":")[1])) for c in os.environ["PROBE_CASES"].split(",")]
elif os.environ.get("PROBE_SHORT"):
    CASES = [c for c in CASES if c[1] in (8298, 8450, 10668, 15678, 8448, 9472, 10496, 11008, 5299, 15651)]
dev = torch.device("cuda", 0)
info = devices.describe(dev)
ceil = measure_copy(dev, nbytes=None).GBps
print(f"{info.name} ceiling {ceil:.0f} GB/s", flush=True)
plan = {}
for kind, n in CASES:
    in_force = kc.config_for(kind, n, M)
    plan[(kind, n)] = (in_force, list(dict.fromkeys([in_force, *kc.candidates(kind, n, M)])))
jobs = [(kind, n, kc.config_to_dict(c), "bfloat16", "cuda") for (kind, n), (_, cs) in plan.items() for c in cs]
dropped = T.compile_all(jobs, workers=min(15, os.cpu_count() or 1))
out = {"device": info.name, "uuid": info.uuid, "ceiling_GBps": ceil, "git_commit": devices.git_commit(), "cases": []}
for (kind, n), (in_force, configs) in plan.items():
    ok = [c for c in configs if (kind, n, json.dumps(kc.config_to_dict(c), sort_keys=True)) not in dropped]
    times = T._time_candidates(kind, M, n, torch.bfloat16, ok, info.l2_bytes, dev, n)
    nb = min_bytes("fwd" if kind == "fwd" else "bwd", M, n, "bfloat16")
    pct = {c: 100 * nb / t / 1e3 / ceil for c, t in times.items()}
    ranked = sorted(pct, key=pct.get, reverse=True)
    print(
        f"{kind:10s} {n:6d} in force {pct.get(in_force, 0):5.1f} % {kc.config_to_dict(in_force)}\n"
        + "".join(f"           best {pct[c]:5.1f} % {kc.config_to_dict(c)}\n" for c in ranked[:3]),
        flush=True,
    )
    out["cases"].append(
        {
            "kind": kind,
            "N": n,
            "in_force": kc.config_to_dict(in_force),
            "pct": [[kc.config_to_dict(c), round(pct[c], 2)] for c in ranked],
            "dropped": len(configs) - len(ok),
        }
    )
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe_band.json"), "w"), indent=1)
