"""What ptxas makes of a Triton kernel — registers per thread, spill stack, shared memory — read without a GPU.

Triton compiles to a cubin for a named target on any machine (its wheel carries ptxas and cuobjdump), so the
register pressure of a tile choice can be checked here, in CI, before a device call: this is how the wide-row
backward's spills (128 registers + 72 B of stack at 16384 × 16 warps) were found and removed.

    python -m engine.compiler_report            # the persistent backward at every tuned tile and model width, sm_90
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass

BACKWARD_SIGNATURE = {"X": "*bf16", "DY": "*bf16", "W": "*bf16", "RSTD": "*fp32", "DX": "*bf16", "PARTIAL": "*fp32",
                      "M": "i32", "N": "i32", "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32"}


@dataclass(frozen=True)
class Resources:
    registers: int
    spill_stack_bytes: int
    shared_bytes: int


def compiled_resources(kernel, signature: dict, constants: dict, num_warps: int, num_stages: int = 3,
                       capability: int = 90) -> Resources:
    """Compile ``kernel`` (a ``@triton.jit`` function) for ``sm_<capability>`` with every non-constexpr
    argument marked 16-divisible (as the launcher does for aligned tensors and sizes) and read the cubin's
    resource usage."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = kernel.arg_names
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k in signature}
    source = ASTSource(fn=kernel, signature={**signature, **{k: "constexpr" for k in constants}},
                       constexprs=constants, attrs=attrs)
    compiled = triton.compile(source, target=GPUTarget("cuda", capability, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([os.path.join(tools, "cuobjdump"), "--dump-resource-usage", cubin.name],
                               capture_output=True, text=True, check=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)", usage)
    if not found:
        raise RuntimeError(f"no resource usage in cuobjdump's output: {usage[:300]}")
    return Resources(int(found[1]), int(found[2]), int(found[3]) + compiled.metadata.shared)


def persistent_backward_resources(n: int, tile=None) -> Resources:
    """The persistent backward kernel as `persistent_backward` launches it for rows of width ``n`` (bf16)."""
    from rmsnorm_kernels.triton_backward.dx import backward_tile, pipeline_stages
    from rmsnorm_kernels.experimental import rmsnorm_bwd_persistent_halves_kernel
    from rmsnorm_kernels.triton_backward.persistent import rmsnorm_bwd_persistent_kernel

    tile = tile or backward_tile(n)
    stages = pipeline_stages(tile, 2, tile.programs_per_sm, tile.stages)
    if tile.column_halves:
        return compiled_resources(rmsnorm_bwd_persistent_halves_kernel, BACKWARD_SIGNATURE,
                                  {"HALF": tile.block // 2, "NUM_STAGES": stages, "USE_PDL": True}, tile.num_warps,
                                  stages)
    return compiled_resources(rmsnorm_bwd_persistent_kernel, BACKWARD_SIGNATURE,
                              {"ROWS": tile.rows, "NUM_STAGES": stages, "RELOAD_W": tile.reload_weight,
                               "USE_PDL": True, **tile.segments(n).constants()}, tile.num_warps, stages)


def main() -> int:
    from engine.presets import get_preset
    from rmsnorm_kernels.triton_backward.dx import TUNED_BACKWARD, backward_tile

    print(f"{'N':>6} {'segments':<18} {'rows':>4} {'warps':>5} {'k':>2} {'stages':>6} {'variant':<14} {'regs':>5} "
          f"{'spill B':>8} {'smem B':>8}")
    for n in sorted(set(TUNED_BACKWARD) | set(get_preset("models")["N"])):
        tile = backward_tile(n)
        r = persistent_backward_resources(n)
        variant = "reload-weight" if tile.reload_weight else "column-halves" if tile.column_halves else "-"
        segments = "+".join(map(str, tile.segments(n).widths))
        print(f"{n:>6} {segments:<18} {tile.rows:>4} {tile.num_warps:>5} {tile.programs_per_sm:>2} {tile.stages:>6} "
              f"{variant:<14} {r.registers:>5} {r.spill_stack_bytes:>8} {r.shared_bytes:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
