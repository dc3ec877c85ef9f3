"""The correctness gate: before a case is timed, the implementation runs once on that case's own inputs (the
first rotating set) and its output is compared with the fp64 reference (rmsnorm_kernels.reference).

- **Which rows**: every row when the case has at most ``FULL_CHECK_ELEMENTS`` elements; otherwise a sample:
  the first and last ``EDGE_ROWS`` rows (tail-tile bugs live there) plus random rows (seeded per case), about
  ``FULL_CHECK_ELEMENTS`` elements in all. The fp64 reference of those rows is computed on the device.
- **dγ** is a sum over all rows, so its reference always uses every row: fp64, on the device, in chunks of
  ``CHUNK_ELEMENTS`` elements (the memory it takes stays small whatever M is).
- **The measure**: each checked row's relative error ‖actual − reference‖ / ‖reference‖ (for dx against the
  size of its first term, `rmsnorm_kernels.reference.dx_scale`, where the two terms cancel), and dγ's as a whole; the
  largest is ``max_rel_err``. A row is wrong when that exceeds ``rmsnorm_kernels.reference.tolerance_for(dtype)``
  (bf16 1e-2, fp16 2e-3, fp32 1e-5): rounding of the output stays well inside it, a wrong or unwritten
  element (outputs are poisoned with NaN while checking: inf error) does not. Judging per row, not over the
  whole tensor, means one bad row among many cannot hide in the average.
- Its cost is outside the timing: it runs before the warm-up, and its tensors are freed before timing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from rmsnorm_kernels.launch_plans import calls_to_a_replay
from rmsnorm_kernels.poison import poison_allocator, poisoned_outputs
from rmsnorm_kernels.reference import tolerance_for

FULL_CHECK_ELEMENTS = 1 << 22
"""Cases up to this many elements (M·N) are checked at every row."""
EDGE_ROWS = 64
CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Verdict:
    verified: bool
    max_rel_err: float
    tolerance: float
    rows_checked: int
    reason: Optional[str] = None
    """why it failed: which output, which row, how far off"""


def sample_rows(M: int, N: int, seed: int) -> torch.Tensor:
    """Row indices to check (sorted, unique, on CPU): all rows for small cases, else edges + random rows."""
    if M * N <= FULL_CHECK_ELEMENTS or M <= 2 * EDGE_ROWS:
        return torch.arange(M)
    budget = max(2 * EDGE_ROWS + 1, FULL_CHECK_ELEMENTS // max(N, 1))
    gen = torch.Generator().manual_seed(seed)
    middle = torch.randperm(M - 2 * EDGE_ROWS, generator=gen)[: max(0, budget - 2 * EDGE_ROWS)] + EDGE_ROWS
    edges = torch.cat([torch.arange(EDGE_ROWS), torch.arange(M - EDGE_ROWS, M)])
    return torch.unique(torch.cat([edges, middle]))


def _rstd64(x64: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.rsqrt(x64.pow(2).mean(dim=-1, keepdim=True) + eps)


def _row_errors(actual: torch.Tensor, expected: torch.Tensor, scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Per-row relative error in fp64 (inf where the actual row holds NaN/Inf)."""
    a = actual.to(torch.float64)
    diff = (a - expected).norm(dim=-1)
    denom = expected.norm(dim=-1)
    if scale is not None:
        denom = torch.maximum(denom, scale)
    err = torch.where(denom > 0, diff / torch.where(denom > 0, denom, torch.ones_like(denom)), diff)
    return torch.where(torch.isfinite(a).all(dim=-1), err, torch.full_like(err, float("inf")))


def _dw_reference(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor, eps: float) -> torch.Tensor:
    """dγ = Σ_rows dy·x·rstd in fp64 over every row, in chunks, on x's device."""
    M, N = x.shape
    step = max(1, CHUNK_ELEMENTS // max(N, 1))
    total = torch.zeros(N, dtype=torch.float64, device=x.device)
    for start in range(0, M, step):
        x64 = x[start : start + step].detach().to(torch.float64)
        total += (dy[start : start + step].detach().to(torch.float64) * x64 * _rstd64(x64, eps)).sum(dim=0)
    return total


def _vector_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    a = actual.detach().to(torch.float64)
    if not torch.isfinite(a).all():
        return float("inf")
    denom = expected.norm().item()
    diff = (a - expected).norm().item()
    return diff / denom if denom > 0 else diff


def _expect(value, like: torch.Tensor, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.shape != like.shape:
        got = f"shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
        raise RuntimeError(f"{what} has {got}; expected shape {tuple(like.shape)}")
    return value


def verify(
    fn: Callable, x: torch.Tensor, weight: torch.Tensor, dy: Optional[torch.Tensor], eps: float, seed: int = 0
) -> Verdict:
    """Run ``fn`` (forward, or forward + ``autograd.grad`` when ``dy`` is given) on ``x``, ``weight``
    (``dy``) and compare with the fp64 reference. Raises what ``fn`` raises (the engine makes it an error row).
    On CUDA the call is made until one is a replay and the last one is checked: ours record a launch plan on the
    first complete call and replay it after (`rmsnorm_kernels.launch_plans`), and the timed calls are replays."""
    M, N = x.shape
    tol = tolerance_for(x.dtype)
    rows = sample_rows(M, N, seed).to(x.device)
    calls = calls_to_a_replay(x.device)
    with poisoned_outputs():
        for _ in range(calls):
            outputs = None
            poison_allocator(x.device, 4 * M * N * x.element_size())
            if dy is None:
                with torch.no_grad():
                    y = _expect(fn(x.detach(), weight.detach(), eps), x, "the forward's output")
                outputs = {"y": y}
            else:
                xg = x.detach().requires_grad_(True)
                wg = weight.detach().requires_grad_(True)
                y = fn(xg, wg, eps)
                dx, dw = torch.autograd.grad(y, (xg, wg), dy)
                outputs = {"dx": _expect(dx, x, "dx"), "dγ": _expect(dw, weight, "dγ")}
                del y, dx, dw
    if x.device.type == "cuda":
        torch.cuda.synchronize(x.device)
    x64 = x.detach()[rows].to(torch.float64)
    w64 = weight.detach().to(torch.float64)
    rstd = _rstd64(x64, eps)
    errors: dict[str, tuple[float, Optional[int]]] = {}
    if dy is None:
        per_row = _row_errors(outputs["y"].detach()[rows], x64 * rstd * w64)
        errors["y"] = _worst(per_row, rows)
    else:
        dy64 = dy.detach()[rows].to(torch.float64)
        wdy = w64 * dy64
        dx_ref = rstd * wdy - x64 * rstd.pow(3) * ((wdy * x64).sum(dim=-1, keepdim=True) / N)
        per_row = _row_errors(outputs["dx"].detach()[rows], dx_ref, (rstd * wdy).norm(dim=-1))
        errors["dx"] = _worst(per_row, rows)
        del dy64, wdy, dx_ref
        errors["dγ"] = (_vector_error(outputs["dγ"], _dw_reference(x, weight, dy, eps)), None)
    worst = max(errors, key=lambda k: errors[k][0])
    err, row = errors[worst]
    ok = err <= tol
    reason = None
    if not ok:
        where = f" (row {row})" if row is not None else ""
        reason = (
            f"wrong: {worst} relative error {err:.3g}{where} > tolerance {tol:.0e} against the fp64 reference "
            f"({len(rows)} of {M} rows checked)"
        )
    return Verdict(verified=ok, max_rel_err=err, tolerance=tol, rows_checked=len(rows), reason=reason)


def _worst(per_row: torch.Tensor, rows: torch.Tensor) -> tuple[float, int]:
    i = int(torch.argmax(per_row).item())
    return float(per_row[i].item()), int(rows[i].item())
