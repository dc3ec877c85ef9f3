"""GPU check of the drop-in path (issue 16): host overhead, torch.compile, torch.export, CUDA graphs.

    python bench/dropin_check.py [--out DIR]        (default DIR: $OUT, else bench/logs)

1. host_us: median CPU time of one call that only enqueues (the GPU kept busy by ``torch.cuda._sleep``, so
   the call never waits), forward (no grad) and backward (``torch.autograd.grad``), ours vs ``F.rms_norm``,
   bf16 at a few default shapes, in 40 interleaved rounds (each round calls each implementation once, in a fresh
   order, back to back after one spin and one untimed call: the host's drift cancels in the paired ratios,
   bench/host_paired.py); each call's outputs are also checked against ``F.rms_norm`` in fp32 (the
   fast launch path launches compiled kernels directly from the second call: this is where it is proven).
2. ``torch.compile(fullgraph=True)`` (inductor): ``torch._dynamo.explain`` graph breaks, warnings raised,
   values and gradients vs eager; 3. ``torch.export``; 4. ``torch.cuda.make_graphed_callables`` and a whole
   training step (forward, backward, SGD) captured in one ``torch.cuda.graph`` and replayed.
Prints a short table and writes ``dropin-check.json``. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench.host_paired import interleaved, paired_stats, round_opening  # noqa: E402
from engine import device as devices  # noqa: E402
from rmsnorm_kernels import launch_plans, native  # noqa: E402
from rmsnorm_kernels.module import RMSNorm  # noqa: E402

SHAPES = ((4096, 1024), (4096, 4096), (16384, 4096), (4096, 8192), (1024, 2048))
BASELINE = "torch-native"
HOST_ROUNDS = 40
SPIN_CYCLES = 8_000_000  # ~4 ms of GPU work opens each round: longer than any round's calls take to enqueue
IMPLS = ("triton-persistent", "triton-workspace", "triton-atomic")


def _host_us(call) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1e6


def host_overhead(rounds: int = HOST_ROUNDS, rng: random.Random | None = None, device: str = "cuda", shapes=SHAPES):
    """Per shape, every implementation's forward (no grad) and backward host time in ``rounds`` interleaved rounds
    (bench/host_paired.py: each round calls each once, in a fresh order, so the host's drift cancels in the ratios to
    F.rms_norm's call of the same round); then each output checked against F.rms_norm in fp32."""
    rng = rng or random.Random(0)
    cuda = torch.device(device).type == "cuda"
    rows = []
    for m, n in shapes:
        x = torch.randn(m, n, device=device, dtype=torch.bfloat16, requires_grad=True)
        w = torch.nn.Parameter((1 + 0.1 * torch.randn(n, device=device)).to(torch.bfloat16))
        dy = torch.randn_like(x)
        y_ref = F.rms_norm(x.float(), (n,), w.float(), 1e-6)
        dx_ref, dw_ref = torch.autograd.grad(y_ref, (x, w), dy.float())
        fns = {}
        for impl in (BASELINE,) + IMPLS:
            if impl == BASELINE:
                fns[impl] = lambda x, w: F.rms_norm(x, (n,), w, 1e-6)  # noqa: E731
            else:
                mod = RMSNorm(n, impl=impl, device=device, dtype=torch.bfloat16)
                mod.weight = w
                fns[impl] = (lambda mod: lambda x, w: mod(x))(mod)
            for _ in range(launch_plans.CALLS_TO_A_REPLAY):  # whole steps first: the graph timed is one a
                torch.autograd.grad(fns[impl](x, w), (x, w), dy)  # training loop's later steps build (native node)
        with torch.no_grad():
            fwd = paired_stats(
                interleaved(
                    fns,
                    rounds,
                    rng,
                    lambda impl, r: _host_us(lambda: fns[impl](x, w)),
                    round_opening(cuda, SPIN_CYCLES, lambda impl, r: fns[impl](x, w)),
                ),
                BASELINE,
            )
        ys = {impl: fn(x, w) for impl, fn in fns.items()}
        grads = {
            impl: (lambda y: lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True))(y) for impl, y in ys.items()
        }
        bwd = paired_stats(
            interleaved(
                fns,
                rounds,
                rng,
                lambda impl, r: _host_us(grads[impl]),
                round_opening(cuda, SPIN_CYCLES, lambda impl, r: grads[impl]()),
            ),
            BASELINE,
        )
        ys = grads = None  # the graphs go before the next shape
        for impl, fn in fns.items():
            errors = []
            for _ in range(3):  # first call (JIT) and later ones (direct launches) are all checked
                y = fn(x, w)
                dx, dw = torch.autograd.grad(y, (x, w), dy, retain_graph=True)
                errors.append(
                    max(((a.float() - b).norm() / b.norm()).item() for a, b in ((y, y_ref), (dx, dx_ref), (dw, dw_ref)))
                )
            row = {
                "impl": impl,
                "M": m,
                "N": n,
                "rounds": rounds,
                "fwd_host_us": fwd[impl]["host_us"],
                "bwd_host_us": bwd[impl]["host_us"],
                "max_rel_err": max(errors),
                "correct": max(errors) < 2e-2,
            }
            if impl != BASELINE:
                row.update(
                    fwd_paired_ratio=fwd[impl]["paired_ratio"],
                    bwd_paired_ratio=bwd[impl]["paired_ratio"],
                    host_le_native=fwd[impl]["paired_ratio"] <= 1.0 and bwd[impl]["paired_ratio"] <= 1.0,
                )
            rows.append(row)
    return rows


class Block(torch.nn.Module):
    def __init__(self, n, impl):
        super().__init__()
        self.proj = torch.nn.Linear(n, n, bias=False)
        self.norm = RMSNorm(n, impl=impl)

    def forward(self, x):
        return self.proj(self.norm(x))


def _model(impl, n=1024):
    torch.manual_seed(0)
    return Block(n, impl).to("cuda", torch.bfloat16)


def _step_grads(model, x):
    out = model(x)
    out.float().square().mean().backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return out.detach(), grads


def _close(a, b):
    return all(((u.float() - v.float()).norm() / v.float().norm().clamp_min(1e-12)).item() < 2e-2 for u, v in zip(a, b))


def compile_export_graphs(impl):
    out = {"impl": impl}
    x = torch.randn(8, 256, 1024, device="cuda", dtype=torch.bfloat16)
    model = _model(impl)
    ref_out, ref_grads = _step_grads(model, x)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x)
    out["graph_breaks"] = explained.graph_break_count
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(model, fullgraph=True)
        got_out, got_grads = _step_grads(compiled, x)
    out["compile_warnings"] = [str(w.message)[:200] for w in caught]
    out["compile_ok"] = out["graph_breaks"] == 0 and _close([got_out] + got_grads, [ref_out] + ref_grads)
    try:
        exported = torch.export.export(model, (x,))
        ops = [str(n.target) for n in exported.graph.nodes if "rmsnorm_dashboard" in str(n.target)]
        out["export_ok"] = bool(ops) and _close([exported.module()(x)], [ref_out])
        out["export_ops"] = ops
    except Exception as exc:
        out["export_ok"], out["export_error"] = False, f"{type(exc).__name__}: {exc}"[:300]
    try:
        graphed = torch.cuda.make_graphed_callables(_model(impl), (x.clone().requires_grad_(True),))
        g_out, g_grads = _step_grads(graphed, x.clone().requires_grad_(True))
        out["graphed_callables_ok"] = _close([g_out] + g_grads, [ref_out] + ref_grads)
    except Exception as exc:
        out["graphed_callables_ok"], out["graphed_error"] = False, f"{type(exc).__name__}: {exc}"[:300]
    try:
        out["graph_step_ok"] = _captured_step(impl, x)
    except Exception as exc:
        out["graph_step_ok"], out["graph_step_error"] = False, f"{type(exc).__name__}: {exc}"[:300]
    return out


def _captured_step(impl, x):
    """One training step (forward, backward, SGD) captured in a CUDA graph; 3 replays vs 3 eager steps."""
    eager, graphed = _model(impl), _model(impl)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_g = torch.optim.SGD(graphed.parameters(), lr=0.1)
    static_x = x.clone()

    def step(model, opt, inp):
        loss = model(inp).float().square().mean()
        loss.backward()
        opt.step()
        return loss

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on a side stream (compiles, autotunes, fills the caches)
        for _ in range(2):
            opt_g.zero_grad(set_to_none=False)
            step(graphed, opt_g, static_x)
    torch.cuda.current_stream().wait_stream(stream)
    with torch.no_grad():  # same starting point for both after the warm-up steps
        for pe, pg in zip(eager.parameters(), graphed.parameters()):
            pe.copy_(pg)
    graph = torch.cuda.CUDAGraph()
    opt_g.zero_grad(set_to_none=False)
    with torch.cuda.graph(graph):
        static_loss = step(graphed, opt_g, static_x)
    losses_g, losses_e = [], []
    for i in range(3):
        data = torch.randn_like(x)
        static_x.copy_(data)
        opt_g.zero_grad(set_to_none=False)
        graph.replay()
        losses_g.append(static_loss.item())
        opt_e.zero_grad(set_to_none=True)
        losses_e.append(step(eager, opt_e, data).item())
    return all(abs(a - b) <= 2e-2 * abs(b) for a, b in zip(losses_g, losses_e))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bench/logs"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("dropin_check needs a CUDA GPU")
        return 2
    info = devices.describe(torch.device("cuda"))
    native_module = native.ensure()  # the eager path as a training loop gets it (rmsnorm_kernels.native)
    print("native node:", "loaded" if native_module else native.STATE["error"])
    host = host_overhead()
    checks = [compile_export_graphs(impl) for impl in IMPLS]
    print(
        f"{'impl':<18} {'M×N':>11} {'fwd host µs':>12} {'bwd host µs':>12} {'fwd ratio':>10} {'bwd ratio':>10} "
        f"{'≤ native':>9} {'rel err':>9}"
    )
    for r in host:
        ratios = (
            f"{r['fwd_paired_ratio']:>10.3f} {r['bwd_paired_ratio']:>10.3f} {str(r['host_le_native']):>9}"
            if "host_le_native" in r
            else f"{'':>10} {'':>10} {'':>9}"
        )
        print(
            f"{r['impl']:<18} {r['M']:>5}×{r['N']:<5} {r['fwd_host_us']:>12.1f} {r['bwd_host_us']:>12.1f} "
            f"{ratios} {r['max_rel_err']:>9.2e}"
        )
    for c in checks:
        print(
            f"{c['impl']:<18} breaks={c['graph_breaks']} warnings={len(c['compile_warnings'])} "
            f"compile={c['compile_ok']} export={c['export_ok']} graphed_callables={c['graphed_callables_ok']} "
            f"graph_step={c['graph_step_ok']}"
        )
    result = {
        "kind": "dropin-check",
        "created_at": devices.utc_now_iso(),
        "device": info.model_dump(),
        "versions": devices.versions(),
        "git_commit": devices.git_commit(),
        "host": devices.host(),
        "host_overhead": host,
        "checks": checks,
        "native_node": {
            "state": "loaded" if native_module else native.STATE["error"],
            "stats": native_module.stats() if native_module else None,
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dropin-check.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out / 'dropin-check.json'}")
    ok = all(r["correct"] for r in host) and all(
        c["compile_ok"]
        and not c["compile_warnings"]
        and c["export_ok"]
        and c["graphed_callables_ok"]
        and c["graph_step_ok"]
        for c in checks
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
