"""Training-step benchmark: a small randomly initialised ``transformers`` Llama, one variant of its RMSNorm at
a time, eager and under ``torch.compile``; step time and loss over a few steps, written as a JSON file.

    python bench/train_bench.py --out results/train-bench-<device>-<date>.json      (GPU: bf16 defaults)
    rmsnorm-dash train-bench --device cpu --tiny --out /tmp/t.json                   (CPU, interpreter: a test)

Variants: ``hf`` (the model's own LlamaRMSNorm), ``triton-persistent`` / ``triton-workspace`` / ``triton-atomic``
(ours, through `rmsnorm_kernels.patch.patch_rmsnorm`), ``liger`` (Liger-Kernel's, through the registry, if installed).
Every variant starts from the same weights and sees the same batches; the step is forward + loss + backward +
AdamW step. Step time: median over the timed steps (warm-up steps excluded), each step between two
``torch.cuda.synchronize()`` calls. Losses: every step's, compared with ``hf`` in the same mode (they must
agree to the dtype's noise: `LOSS_TOLERANCE`, relative).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS = ("hf", "triton-persistent", "triton-workspace", "triton-atomic", "liger")
LOSS_TOLERANCE = {"bfloat16": 2e-2, "float16": 1e-2, "float32": 1e-4}
GPU_CONFIG = dict(
    hidden_size=2048,
    intermediate_size=5632,
    num_hidden_layers=4,
    num_attention_heads=16,
    num_key_value_heads=4,
    vocab_size=32000,
    batch=8,
    seq=1024,
)
TINY_CONFIG = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=96,
    batch=2,
    seq=16,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmsnorm-dash train-bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto", help="cuda, cuda:N or cpu (default: cuda when present)")
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), help="default: bf16 on GPU, fp32 on CPU")
    p.add_argument("--tiny", action="store_true", help="hidden 64, 2 layers, batch 2 × 16 tokens (CPU tests)")
    p.add_argument("--steps", type=int, default=None, help="timed steps (default 20 GPU, 2 CPU)")
    p.add_argument("--warmup", type=int, default=None, help="untimed first steps (default 5 GPU, 1 CPU)")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of " + ", ".join(VARIANTS))
    p.add_argument("--modes", default="eager,compile", help="eager and/or compile")
    p.add_argument("--compile-backend", default=None, help="torch.compile backend (default inductor; eager on CPU)")
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "batch", "seq"):
        p.add_argument("--" + key.replace("_", "-"), type=int, default=None)
    p.add_argument("--out", type=Path, default=None, help="JSON result file")
    return p


def _available(variant: str) -> str | None:
    if variant == "hf":
        return None
    from rmsnorm_kernels.registry import REGISTRY, load_all

    load_all()
    try:
        return REGISTRY.get(variant).unavailable_reason()
    except KeyError as exc:
        return str(exc)


def _run_variant(base, variant, mode, batches, args, torch):
    model = copy.deepcopy(base)
    replaced = None
    if variant != "hf":
        from rmsnorm_kernels.patch import patch_rmsnorm

        replaced = int(patch_rmsnorm(model, impl=variant))
    step_model = model
    if mode == "compile":
        torch._dynamo.reset()
        step_model = torch.compile(model, fullgraph=True, backend=args.compile_backend or "inductor")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    cuda = batches[0].is_cuda
    losses, times = [], []
    for i, ids in enumerate(batches):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step_model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
        losses.append(float(loss.detach().float()))
        if i >= args.warmup:
            times.append(elapsed * 1e3)
    return {
        "variant": variant,
        "mode": mode,
        "status": "ok",
        "replaced": replaced,
        "losses": losses,
        "step_ms": times,
        "step_ms_median": statistics.median(times) if times else None,
    }


def run(args) -> dict:
    import torch
    import transformers

    from engine import device as devices

    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    tiny = args.tiny or device.type == "cpu"
    if device.type == "cuda":
        from rmsnorm_kernels import native

        native.ensure()  # ours as a training loop gets them: the native node, loaded before the first step
    config = dict(TINY_CONFIG if tiny else GPU_CONFIG)
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "batch", "seq"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    dtype_name = args.dtype or ("bfloat16" if device.type == "cuda" else "float32")
    dtype = getattr(torch, dtype_name)
    args.steps = args.steps if args.steps is not None else (20 if device.type == "cuda" else 2)
    args.warmup = args.warmup if args.warmup is not None else (5 if device.type == "cuda" else 1)
    if device.type == "cpu" and args.compile_backend is None:
        args.compile_backend = "eager"
    batch, seq = config.pop("batch"), config.pop("seq")
    torch.manual_seed(0)
    llama = transformers.LlamaConfig(**config, max_position_embeddings=max(seq, 64))
    base = transformers.LlamaForCausalLM(llama).to(device, dtype)
    generator = torch.Generator().manual_seed(1)
    batches = [
        torch.randint(0, config["vocab_size"], (batch, seq), generator=generator).to(device)
        for _ in range(args.warmup + args.steps)
    ]
    rows = []
    for mode in [m for m in args.modes.split(",") if m]:
        for variant in [v for v in args.variants.split(",") if v]:
            reason = _available(variant)
            if reason is not None:
                rows.append({"variant": variant, "mode": mode, "status": "skipped", "reason": reason})
                continue
            try:
                rows.append(_run_variant(base, variant, mode, batches, args, torch))
            except Exception as exc:  # one variant's failure is a row, not the end of the run
                rows.append(
                    {
                        "variant": variant,
                        "mode": mode,
                        "status": "error",
                        "reason": f"{type(exc).__name__}: {exc}"[:500],
                    }
                )
    tolerance = LOSS_TOLERANCE[dtype_name]
    for row in rows:
        ref = next((r for r in rows if r["variant"] == "hf" and r["mode"] == row["mode"] and r["status"] == "ok"), None)
        if row["status"] == "ok" and ref is not None:
            diff = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(row["losses"], ref["losses"]))
            row["max_rel_loss_diff_vs_hf"] = diff
            row["losses_agree"] = diff <= tolerance
    info = devices.describe(device)
    return {
        "kind": "train-bench",
        "created_at": devices.utc_now_iso(),
        "device": info.model_dump(),
        "label": "CPU (Triton interpreter)" if device.type == "cpu" else info.name,
        "versions": {**devices.versions(), "transformers": transformers.__version__},
        "git_commit": devices.git_commit(),
        "git_dirty": devices.git_dirty(),
        "host": devices.host(),
        "config": {
            **config,
            "batch": batch,
            "seq": seq,
            "dtype": dtype_name,
            "steps": args.steps,
            "warmup": args.warmup,
            "optimizer": "AdamW(lr=1e-3)",
            "compile_backend": args.compile_backend or "inductor",
            "loss_tolerance": tolerance,
        },
        "rows": rows,
    }


def show(result: dict) -> None:
    print(f"train-bench on {result['label']}  ({result['config']['dtype']}, {result['config']})")
    print(f"{'variant':<20} {'mode':<8} {'step ms':>9} {'loss[0]':>9} {'loss[-1]':>9}  agrees")
    for r in result["rows"]:
        if r["status"] != "ok":
            print(f"{r['variant']:<20} {r['mode']:<8} {r['status']}: {r['reason'][:80]}")
            continue
        ms = f"{r['step_ms_median']:.2f}" if r["step_ms_median"] is not None else "-"
        print(
            f"{r['variant']:<20} {r['mode']:<8} {ms:>9} {r['losses'][0]:>9.4f} {r['losses'][-1]:>9.4f}  "
            f"{r.get('losses_agree', '-')}"
        )


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from engine.device import use_triton_interpreter_without_gpu

    use_triton_interpreter_without_gpu()
    result = run(args)
    show(result)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}")
    bad = [r for r in result["rows"] if r["status"] == "error" or r.get("losses_agree") is False]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
