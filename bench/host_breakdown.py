"""Device script (issue 16): one backward's host time taken apart, on the GPU host.

Every number is the median host µs of one call that only enqueues work (the GPU spins meanwhile, as in the
engine's ``host_us``), bf16, one shape. Beside our three backwards through ``torch.autograd.grad``:

- the autograd floors: a C++ node with no kernel (``clone``'s backward), a Python ``autograd.Function`` whose
  backward returns dy, the same allocating three outputs;
- our backward without autograd: the launch plan's replay called on the calling thread, and each of its
  compiled launchers alone (through Triton's Python ``__call__``; its C ``launch`` given tensors; given the
  pointers as ints);
- ``F.rms_norm``'s forward and backward, and two ``torch.empty``.

So the gap to ``F.rms_norm`` splits into the Python autograd node, the allocations and the launches.
(`bench/host_profile.py` profiles the same calls function by function.)

    python3 bench/host_breakdown.py [--m 4096] [--n 4096] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

os.environ.setdefault("RMSNORM_NATIVE", "0")  # the Python path first; `native_section` turns the node on

from rmsnorm_kernels import launch_plans, native  # noqa: E402
from rmsnorm_kernels.module import RMSNorm  # noqa: E402
from rmsnorm_kernels.triton_backward.function import BACKWARD_PLANS  # noqa: E402

CALLS = 300


def host_us(call, calls=CALLS):
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls):
        torch.cuda._sleep(400_000)
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
        if len(samples) % 50 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return round(statistics.median(samples) * 1e6, 2)


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, dy):
        return dy


class IdentityAlloc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        a = torch.empty_like(x)
        b = torch.empty((132, w.shape[0]), device=x.device, dtype=torch.float32)
        c = torch.empty_like(w)
        del b
        return a, c


def native_section(r: dict, t: dict, x, w, dy, m: int, n: int, dev: str) -> None:
    """The same calls through the native node (`rmsnorm_kernels.native`): first its values against the Python
    path's (bit for bit where the strategy is deterministic), then its host µs; with grad, the forward that
    builds the graph too (a training step pays it)."""
    impls = ("triton-persistent", "triton-workspace", "triton-atomic")
    mods, refs = {}, {}
    for impl in impls:  # the Python path's values, before the node is loaded
        mods[impl] = mod = RMSNorm(n, impl=impl, device=dev, dtype=torch.bfloat16)
        mod.weight = w
        ref = mod(x)
        refs[impl] = (ref, *torch.autograd.grad(ref, (x, w), dy))
    os.environ["RMSNORM_NATIVE"] = "1"
    t0 = time.perf_counter()
    mod_native = native.ensure()
    r["native"] = {
        "state": "loaded" if mod_native else native.STATE["error"],
        "path": native.STATE["path"],
        "load_s": round(time.perf_counter() - t0, 1),
        "values": {},
    }
    if mod_native is None:
        return
    t["F.rms_norm fwd with grad (builds the graph)"] = host_us(lambda: F.rms_norm(x, (n,), w, 1e-6))
    for impl in impls:
        mod = mods[impl]
        before = mod_native.stats()
        for _ in range(5):
            y = mod(x)
        grads = torch.autograd.grad(y, (x, w), dy)
        after = mod_native.stats()
        torch.cuda.synchronize()
        diffs = [float((a.float() - b.float()).abs().max()) for a, b in zip((y, *grads), refs[impl])]
        r["native"]["values"][impl] = {
            "native_nodes": after["nodes"] - before["nodes"],
            "native_backwards": after["backwards"] - before["backwards"],
            "max_abs_diff_vs_python_path (y, dx, dw)": diffs,
        }
        with torch.no_grad():
            t[f"native {impl} fwd (module, no grad)"] = host_us(lambda: mod(x))
        t[f"native {impl} fwd with grad (builds the graph)"] = host_us(lambda: mod(x))
        yo = mod(x)
        t[f"native {impl} bwd (autograd.grad)"] = host_us(
            lambda: torch.autograd.grad(yo, (x, w), dy, retain_graph=True)
        )
    from rmsnorm_kernels.ops import _NATIVE_STRATEGY
    from rmsnorm_kernels.registry import REGISTRY

    sid = _NATIVE_STRATEGY["persistent"]
    fn = REGISTRY.get("triton-persistent").fn
    with torch.no_grad():
        t["native C++ entry alone, no grad (rms_norm of the module)"] = host_us(
            lambda: mod_native.rms_norm(x, w, 1e-6, 0.0, sid)
        )
        t["native registry fn triton-persistent, no grad (what the engine times)"] = host_us(lambda: fn(x, w, 1e-6))
    t["native C++ entry alone, with grad"] = host_us(lambda: mod_native.rms_norm(x, w, 1e-6, 0.0, sid))
    r["native"]["stats"] = mod_native.stats()
    print(json.dumps(r["native"], indent=1))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bench/logs"))
    args = p.parse_args()
    m, n = args.m, args.n
    dev = "cuda"
    x = torch.randn(m, n, device=dev, dtype=torch.bfloat16, requires_grad=True)
    w = torch.nn.Parameter(1 + 0.1 * torch.randn(n, device=dev, dtype=torch.bfloat16))
    dy = torch.randn_like(x)
    r: dict = {
        "M": m,
        "N": n,
        "dtype": "bfloat16",
        "calls": CALLS,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    import triton

    r["triton"] = triton.__version__
    t: dict = {}
    t["torch.empty x2"] = host_us(
        lambda: (torch.empty(m, n, device=dev, dtype=torch.bfloat16), torch.empty(m, device=dev))
    )
    with torch.no_grad():
        t["F.rms_norm fwd"] = host_us(lambda: F.rms_norm(x, (n,), w, 1e-6))
    y = F.rms_norm(x, (n,), w, 1e-6)
    t["F.rms_norm bwd"] = host_us(lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True))
    yc = x.clone()
    t["autograd floor: clone (C++ node, no kernel)"] = host_us(
        lambda: torch.autograd.grad(yc, (x,), dy, retain_graph=True)
    )
    yi = Identity.apply(x)
    t["autograd floor: Python Function returning dy"] = host_us(
        lambda: torch.autograd.grad(yi, (x,), dy, retain_graph=True)
    )
    ya = IdentityAlloc.apply(x, w)
    t["autograd floor: Python Function, 3 allocations"] = host_us(
        lambda: torch.autograd.grad(ya, (x, w), dy, retain_graph=True)
    )
    for impl in ("triton-persistent", "triton-workspace", "triton-atomic"):
        mod = RMSNorm(n, impl=impl, device=dev, dtype=torch.bfloat16)
        mod.weight = w
        with torch.no_grad():
            t[f"{impl} fwd (module, no grad)"] = host_us(lambda: mod(x))
        yo = mod(x)
        t[f"{impl} bwd (autograd.grad)"] = host_us(lambda: torch.autograd.grad(yo, (x, w), dy, retain_graph=True))
        plans = [(k, pl) for k, pl in BACKWARD_PLANS.plans.items() if pl and k[1] == x.shape]
        if not plans:
            t[f"{impl} replay"] = None
            continue
        key, plan = plans[-1]
        BACKWARD_PLANS.plans.clear()
        fn = yo.grad_fn
        x2d, wsaved, rstd = fn.saved_tensors
        inputs = (dy, x2d, wsaved, rstd)
        t[f"{impl} replay on the calling thread"] = host_us(lambda: plan.run(inputs))
        values = list(inputs) + [torch.empty(s, dtype=d, device=dev) for s, d, _ in plan.outputs]
        stream = torch._C._cuda_getCurrentRawStream(torch.cuda.current_device())
        for j, (compiled, _, g0, g1, g2, targs, slots, tail) in enumerate(plan.launches):
            a = list(targs)
            for i, slot in slots:
                a[i] = values[slot]
            name = getattr(compiled, "name", None) or getattr(getattr(compiled, "metadata", None), "name", f"kernel{j}")
            t[f"{impl} launcher {j} ({name}) alone"] = host_us(
                lambda: compiled.run(
                    g0, g1, g2, stream, compiled.function, compiled.packed_metadata, None, None, None, *a, *tail
                )
            )
            # the next idea, measured apart: Triton's C launch with the pointers as ints skips a data_ptr() call
            # and a cuPointerGetAttribute per tensor argument
            launch = compiled.run.launch
            meta = (
                compiled.run.launch_cooperative_grid,
                compiled.run.launch_pdl,
                None,
                None,
                compiled.packed_metadata,
                None,
                None,
                None,
            )
            ints = [v.data_ptr() if isinstance(v, torch.Tensor) else v for v in a]
            t[f"{impl} launcher {j} C launch, tensors"] = host_us(
                lambda: launch(g0, g1, g2, stream, compiled.function, *meta, *a, *tail)
            )
            t[f"{impl} launcher {j} C launch, pointers as ints"] = host_us(
                lambda: launch(g0, g1, g2, stream, compiled.function, *meta, *ints, *tail)
            )
        t[f"{impl} allocations of the plan ({len(plan.outputs)})"] = host_us(
            lambda: [torch.empty(s, dtype=d, device=dev) for s, d, _ in plan.outputs]
        )
    native_section(r, t, x, w, dy, m, n, dev)
    r["host_us"] = t
    r["plan_stats"] = dict(launch_plans.STATS)
    for k, v in t.items():
        print(f"{v if v is None else f'{v:8.1f}'} µs  {k}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "host-breakdown.json").write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
