"""One-off probe (issue 33): every persistent-backward candidate, and the configuration the table gives, timed
at a few widths at M 16384; prints them all so a layout class's choice can be read off."""

import json
import os
import sys
import torch
from engine import device as devices
from engine.byte_model import min_bytes
from engine.ceiling import measure_copy
from engine import tune as T
from rmsnorm_kernels import kernel_config as kc

widths = [int(w) for w in sys.argv[1].split(",")]
kinds = sys.argv[2].split(",") if len(sys.argv) > 2 else ["persistent"]
m = 16384
dev = torch.device("cuda", 0)
table = kc.table_for("sm90")
plan = {}
for kind in kinds:
    for n in widths:
        cs = list(kc.candidates(kind, n))
        extra = [table.lookup(kind, n, m)]
        # configs in force at same-class neighbours (what a class refinement could pick from)
        for w in sorted({r[0] for r in table.entries[kind]}):
            if kc.layout_class(w) == kc.layout_class(n) and abs(w - n) / n < 0.6:
                extra.append(table.lookup(kind, w, m))
        plan[(kind, n)] = list(dict.fromkeys(cs + extra))
jobs = [(k, n, kc.config_to_dict(c), "bfloat16", "cuda") for (k, n), cs in plan.items() for c in cs]
dropped = T.compile_all(jobs, 15)
info = devices.describe(dev)
ceil = measure_copy(dev, nbytes=None).GBps
print(f"{info.name} ceiling {ceil:.0f} GB/s")
out = []
for (kind, n), cs in plan.items():
    cs = [c for c in cs if (kind, n, json.dumps(kc.config_to_dict(c), sort_keys=True)) not in dropped]
    times = T._time_candidates(kind, m, n, torch.bfloat16, cs, info.l2_bytes, dev, n)
    nb = min_bytes("fwd" if kind == "fwd" else "bwd", m, n, "bfloat16")
    inforce = table.lookup(kind, n, m)
    print(f"== {kind} {m}x{n} layout {kc.layout_class(n)}")
    for c in sorted(times, key=times.get):
        gb = nb / times[c] / 1e3
        tag = (" <in force" if c == inforce else "") + (" <rule" if c == kc.rule(kind, n) else "")
        print(f"  {gb:7.0f} GB/s {100 * gb / ceil:5.1f} %  {kc.config_to_dict(c)}{tag}")
        out.append(
            {
                "kind": kind,
                "N": n,
                "M": m,
                "GBps": round(gb, 1),
                "config": kc.config_to_dict(c),
                "in_force": c == inforce,
            }
        )
json.dump(
    {"device": info.name, "ceiling_GBps": ceil, "rows": out},
    open(os.path.join(os.environ.get("OUT", "/tmp"), "probe.json"), "w"),
    indent=1,
)
