"""The correctness sweep behind ``rmsnorm-dash check``: every registered implementation, each pass it
declares, each dtype and shape, against the fp64 reference on fresh random inputs with poisoned outputs.
One dict per case; the CLI prints each as it is checked (`format_check_row`), then a summary; `check_main` exits non-zero on any failure."""

from __future__ import annotations

import argparse
import contextlib
import random
import time

import torch

from rmsnorm_kernels import native
from rmsnorm_kernels.launch_plans import calls_to_a_replay
from rmsnorm_kernels.poison import poison_allocator, poisoned_outputs
from rmsnorm_kernels.reference import (
    dx_scale,
    relative_error,
    rmsnorm_backward_reference,
    rmsnorm_reference,
    tolerance_for,
)
from rmsnorm_kernels.registry import REGISTRY, load_all

ODD_WIDTHS = (1000, 5000, 12345)
"""Widths no power-of-two block fits: every kernel's tail handling is exercised."""
CPU_SHAPES = ((5, 7), (16, 1000), (3, 4097), (3, 5000), (2, 12345), (3, 2880))
"""Small on CPU: the Triton interpreter runs each program in Python, and torch.compile builds C++ per shape.
Odd M and the odd widths; `preset_shapes` adds the model widths (``--preset-widths``)."""
GPU_SHAPES = (
    (4, 7),
    (1000, 1),
    (4099, 1000),
    (1024, 4096),
    (257, 8192),
    (300, 12289),
    (32, 65536),
    (1023, 5000),
    (333, 12345),
)


def preset_shapes(m: int) -> tuple[tuple[int, int], ...]:
    """Every model width of the ``models`` preset (engine.presets) and the odd widths, at ``m`` rows."""
    from engine.presets import get_preset

    widths = sorted(set(get_preset("models")["N"]) | set(ODD_WIDTHS))
    return tuple((m, n) for n in widths)


DTYPES = ("float32", "bfloat16", "float16")
EPS = 1e-6


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _inputs(m: int, n: int, dtype: torch.dtype, device, generator: torch.Generator):
    """Fresh random inputs, never zeros: x with a per-row scale (so rstd varies by row), γ around 1 with
    spread and sign changes, dy standard normal."""
    x = torch.randn(m, n, generator=generator, dtype=torch.float32) * (0.5 + 2 * torch.rand(m, 1, generator=generator))
    w = 1.0 + 0.5 * torch.randn(n, generator=generator)
    dy = torch.randn(m, n, generator=generator)
    return (x.to(device=device, dtype=dtype), w.to(device=device, dtype=dtype), dy.to(device=device, dtype=dtype))


def check_case(impl, pass_: str, dtype_name: str, m: int, n: int, device, generator) -> dict:
    dtype = getattr(torch, dtype_name)
    row = {
        "impl": impl.name,
        "pass": pass_,
        "dtype": dtype_name,
        "M": m,
        "N": n,
        "device": str(device),
        "max_rel_err": None,
        "tolerance": tolerance_for(dtype),
        "ok": False,
        "skipped": False,
        "reason": None,
    }
    x, w, dy = _inputs(m, n, dtype, device, generator)
    element_bytes = m * n * x.element_size()
    try:
        # on CUDA until a call is a replay, the worst one counts: ours replay a launch plan from then on
        # (`rmsnorm_kernels.launch_plans`), and that is the path a training loop and the timed calls take;
        # outputs are poisoned (NaN) but in one more call, made as a training loop makes it (a replay then
        # reuses its kept scratch buffers, which poisoning replaces by fresh NaN ones)
        errors: dict = {}
        calls = calls_to_a_replay(device)
        for i in range(calls + (calls > 1)):
            for name, err in _check_once(impl, pass_, x, w, dy, device, element_bytes, poison=i < calls).items():
                old = errors.get(name, 0.0)
                errors[name] = err if (err != err or old == old and err > old) else old  # NaN is the worst
    except Exception as exc:  # a crash is a failure with its reason, never the end of the sweep
        row["reason"] = f"{type(exc).__name__}: {exc}".strip()[:500]
        return row
    worst = max(errors, key=errors.get)
    row["max_rel_err"] = errors[worst]
    row["ok"] = errors[worst] <= row["tolerance"]
    if not row["ok"]:
        row["reason"] = f"{worst} relative error {errors[worst]:.3g} > {row['tolerance']:.0e}"
    return row


def _check_once(impl, pass_, x, w, dy, device, element_bytes, poison: bool = True) -> dict:
    if poison:
        poison_allocator(device, 4 * element_bytes)
    with poisoned_outputs() if poison else contextlib.nullcontext():
        if pass_ == "fwd":
            with torch.no_grad():
                y = impl.fn(x, w, EPS)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            y_ref, _ = rmsnorm_reference(x, w, EPS)
            errors = {"y": relative_error(y, y_ref)}
        else:
            xg = x.clone().requires_grad_(True)
            wg = w.clone().requires_grad_(True)
            y = impl.fn(xg, wg, EPS)
            dx, dw = torch.autograd.grad(y, (xg, wg), dy)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            dx_ref, dw_ref = rmsnorm_backward_reference(x, w, dy, EPS)
            errors = {"dx": relative_error(dx, dx_ref, dx_scale(x, w, dy, EPS)), "dγ": relative_error(dw, dw_ref)}
    return errors


def run_check(names=None, dtypes=DTYPES, shapes=None, device=None, seed: int | None = None, on_row=None) -> list[dict]:
    """Run the sweep. ``names``: implementations (default: every registered one); ``shapes``: (M, N)
    pairs (default: small on CPU, wider on a GPU). Unavailable implementations give one skipped row.
    ``on_row(row)`` is called with each row as it is checked (the CLI prints it then: a check cut short by a
    time limit still shows every case it finished)."""
    load_all()
    device = torch.device(device) if device is not None else default_device()
    if device.type == "cuda":
        native.ensure()  # the steady-state path of our kernels is the native node where it loads
    shapes = tuple(shapes) if shapes else (GPU_SHAPES if device.type == "cuda" else CPU_SHAPES)
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    generator = torch.Generator().manual_seed(seed)
    impls = [REGISTRY.get(n) for n in names] if names else list(REGISTRY)
    rows: list[dict] = []
    for impl in impls:
        reason = impl.unavailable_reason()
        if reason is not None:
            rows.append(
                {
                    "impl": impl.name,
                    "pass": "/".join(impl.passes),
                    "dtype": None,
                    "M": None,
                    "N": None,
                    "device": str(device),
                    "max_rel_err": None,
                    "tolerance": None,
                    "ok": True,
                    "skipped": True,
                    "reason": reason,
                    "seed": seed,
                }
            )
            if on_row:
                on_row(rows[-1])
            continue
        for pass_ in impl.passes:
            for dtype_name in dtypes:
                for m, n in shapes:
                    shape = impl.shape_refusal(int(m), int(n), dtype_name)
                    if shape is not None:  # a shape it declares it does not take: skipped, as the engine does
                        rows.append(
                            {
                                "impl": impl.name,
                                "pass": pass_,
                                "dtype": dtype_name,
                                "M": int(m),
                                "N": int(n),
                                "device": str(device),
                                "max_rel_err": None,
                                "tolerance": None,
                                "ok": True,
                                "skipped": True,
                                "reason": shape,
                                "seed": seed,
                            }
                        )
                        if on_row:
                            on_row(rows[-1])
                        continue
                    started = time.perf_counter()
                    row = check_case(impl, pass_, dtype_name, int(m), int(n), device, generator)
                    row["seconds"] = round(time.perf_counter() - started, 3)
                    row["seed"] = seed
                    rows.append(row)
                    if on_row:
                        on_row(row)
    return rows


CHECK_HEADER = (
    f"{'implementation':<20} {'pass':<4} {'dtype':<9} {'M':>6} {'N':>6} {'max rel err':>11} {'tol':>7}  result"
)


def format_check_row(r: dict) -> str:
    if r.get("skipped"):
        dtype, m, n = (r.get(k) or "" for k in ("dtype", "M", "N"))
        return f"{r['impl']:<20} {r['pass']:<4} {dtype:<9} {m:>6} {n:>6} {'':>11} {'':>7}  SKIP  {r['reason']}"
    err = f"{r['max_rel_err']:.2e}" if r["max_rel_err"] is not None else "-"
    result = "ok" if r["ok"] else f"FAIL  {r['reason']}"
    return (
        f"{r['impl']:<20} {r['pass']:<4} {r['dtype']:<9} {r['M']:>6} {r['N']:>6} {err:>11} "
        f"{r['tolerance']:>7.0e}  {result}"
    )


def format_check_summary(rows: list[dict]) -> str:
    failed = sum(1 for r in rows if not r["ok"])
    skipped = sum(1 for r in rows if r.get("skipped"))
    passed = len(rows) - failed - skipped
    seed = next((r.get("seed") for r in rows if r.get("seed") is not None), None)
    return f"{passed} passed, {failed} failed, {skipped} skipped (seed {seed})"


def format_check_table(rows: list[dict]) -> str:
    return "\n".join([CHECK_HEADER, "-" * len(CHECK_HEADER), *map(format_check_row, rows), format_check_summary(rows)])


def _shape(text: str) -> tuple[int, int]:
    try:
        m, n = text.lower().split("x")
        return int(m), int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like MxN (e.g. 4096x1024), got {text!r}") from None


def check_main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="rmsnorm-dash check", description="Check every implementation against the fp64 reference."
    )
    parser.add_argument("--impl", action="append", help="implementation name (repeatable; default: all)")
    parser.add_argument("--dtype", action="append", choices=DTYPES, help="dtype (repeatable; default: all three)")
    parser.add_argument("--shape", action="append", type=_shape, help="MxN (repeatable; default depends on device)")
    parser.add_argument("--device", help="cuda, cuda:1 or cpu (default: cuda if present)")
    parser.add_argument("--seed", type=int, help="input seed (default: fresh)")
    parser.add_argument("--plugin", action="append", default=[], help="module or module:object to load first")
    parser.add_argument(
        "--preset-widths",
        action="store_true",
        help="add every model width of the models preset and N = 1000, 5000, 12345 at an odd M "
        "(3 on CPU, 4099 on a GPU)",
    )
    parser.add_argument(
        "--widths",
        action="store_true",
        help="add every width of the widths preset (multiples of 256 up to 16384) at an odd M "
        "(3 on CPU, 1027 on a GPU)",
    )
    parser.add_argument(
        "--random-widths",
        type=int,
        default=0,
        metavar="K",
        help="add K random widths (not multiples of 64), drawn from --width-seed, at that odd M",
    )
    parser.add_argument("--width-seed", type=int, help="seed of --random-widths (default: fresh, printed)")
    args = parser.parse_args(argv)
    load_all(extra_paths=args.plugin)
    shapes = list(args.shape or [])
    device = torch.device(args.device) if args.device else default_device()
    odd_m = 3 if device.type == "cpu" else None
    if (args.preset_widths or args.widths or args.random_widths) and not shapes:
        shapes = list(GPU_SHAPES if device.type == "cuda" else CPU_SHAPES)
    if args.preset_widths:
        shapes += preset_shapes(odd_m or 4099)
    if args.widths:
        from engine.presets import get_preset

        shapes += [(odd_m or 1027, n) for n in get_preset("widths")["N"]]
    if args.random_widths:
        from engine.presets import random_widths

        width_seed = args.width_seed if args.width_seed is not None else random.SystemRandom().randrange(2**31)
        drawn = random_widths(args.random_widths, width_seed)
        print(f"random widths (seed {width_seed}): {', '.join(map(str, drawn))}", flush=True)
        shapes += [(odd_m or 1027, n) for n in drawn]

    def show(row: dict) -> None:
        print(format_check_row(row), flush=True)

    print(CHECK_HEADER, "-" * len(CHECK_HEADER), sep="\n", flush=True)
    try:
        rows = run_check(args.impl, tuple(args.dtype or DTYPES), shapes or None, args.device, args.seed, on_row=show)
    except KeyError as exc:
        print(f"error: {exc.args[0]}")
        return 2
    print(format_check_summary(rows))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(check_main())
