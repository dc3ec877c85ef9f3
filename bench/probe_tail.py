"""Probe for the next device session (issue 33; docs/NOTES.md, nineteenth session): A/B of two layout changes at the
configuration in force, interleaved, M 16384 bf16 — ``wide_tail`` (a tuner candidate) and the rows' alignment told
to the compiler (`segments.row_alignment`, shipped unmeasured); each variant first checked against fp64
(`engine.tune.compile_and_check`). Run as `python3 -u -c 'exec(open("bench/probe_tail.py").read())'`; it goes
once it has been run and its numbers are in docs/."""

import json
import os
import statistics
from dataclasses import replace

import torch

from engine import device as devices
from engine import tune as T
from engine.byte_model import min_bytes
from engine.ceiling import measure_copy
from rmsnorm_kernels import kernel_config as kc
from rmsnorm_kernels import triton_forward as tf

M = 16384
dev = torch.device("cuda", 0)
info = devices.describe(dev)
ceil = measure_copy(dev, nbytes=None).GBps
table = kc.table_for("sm90")
real_alignment = kc.row_alignment


def set_variant(what, new):
    if what == "align":
        kc.row_alignment = tf.row_alignment = real_alignment if new else (lambda *a, **k: 1)


CASES = [("align", k, n) for k in ("persistent", "fwd") for n in (8298, 8450, 10668, 15678, 8200, 5299)]
CASES += [("tail", "persistent", n) for n in (6400, 6656, 8448, 8960, 9472, 10496, 12544)]
CASES += [("tail", "fwd", n) for n in (8448, 8960)]
print(f"{info.name} ceiling {ceil:.0f} GB/s", flush=True)
out = {"device": info.name, "ceiling_GBps": ceil, "git_commit": devices.git_commit(), "ab": []}
for what, kind, n in CASES:
    base = table.lookup(kind, n, M) or kc.rule(kind, n)
    variant = {False: base, True: replace(base, wide_tail=True) if what == "tail" else base}
    set_variant("align", True)
    _, reason = T.compile_and_check((kind, n, kc.config_to_dict(variant[True]), "bfloat16", "cuda"))
    nb = min_bytes("fwd" if kind == "fwd" else "bwd", M, n, "bfloat16")
    got = {False: [], True: []}
    for _ in range(2):
        for new in (False, True):
            set_variant(what, new)
            config = variant[new]
            t = T._time_candidates(kind, M, n, torch.bfloat16, [config], info.l2_bytes, dev, n)[config]
            got[new].append(nb / t / 1e3)
    set_variant("align", True)
    old, new = statistics.median(got[False]), statistics.median(got[True])
    print(
        f"{what:5s} {kind:10s} {n:6d} old {old:6.0f} ({100 * old / ceil:4.1f} %) new {new:6.0f} ({100 * new / ceil:4.1f} %) "
        f"{new / old:5.3f}x check {reason or 'ok'} {kc.config_to_dict(base)}",
        flush=True,
    )
    out["ab"].append(
        {
            "what": what,
            "kind": kind,
            "N": n,
            "old": got[False],
            "new": got[True],
            "check": reason or "ok",
            "config": kc.config_to_dict(base),
        }
    )
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe_tail.json"), "w"), indent=1)
