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

BACKWARD_SIGNATURE = {
    "X": "*bf16",
    "DY": "*bf16",
    "W": "*bf16",
    "RSTD": "*fp32",
    "DX": "*bf16",
    "PARTIAL": "*fp32",
    "M": "i32",
    "N": "i32",
    "stride_x": "i32",
    "stride_dy": "i32",
    "stride_dx": "i32",
}


@dataclass(frozen=True)
class Resources:
    registers: int
    spill_stack_bytes: int
    shared_bytes: int


def compiled_resources(
    kernel, signature: dict, constants: dict, num_warps: int, num_stages: int = 3, capability: int = 90
) -> Resources:
    """Compile ``kernel`` (a ``@triton.jit`` function) for ``sm_<capability>`` with every non-constexpr
    argument marked 16-divisible (as the launcher does for aligned tensors and sizes) and read the cubin's
    resource usage."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = kernel.arg_names
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k in signature}
    source = ASTSource(
        fn=kernel, signature={**signature, **{k: "constexpr" for k in constants}}, constexprs=constants, attrs=attrs
    )
    compiled = triton.compile(
        source, target=GPUTarget("cuda", capability, 32), options={"num_warps": num_warps, "num_stages": num_stages}
    )
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        usage = subprocess.run(
            [os.path.join(tools, "cuobjdump"), "--dump-resource-usage", cubin.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)", usage)
    if not found:
        raise RuntimeError(f"no resource usage in cuobjdump's output: {usage[:300]}")
    return Resources(int(found[1]), int(found[2]), int(found[3]) + compiled.metadata.shared)


def persistent_backward_resources(n: int, config=None, m: int = 16384) -> Resources:
    """The persistent backward kernel as `persistent_backward` launches it for [m, n] bf16 rows (the configuration
    in force, or ``config``)."""
    from rmsnorm_kernels.kernel_config import row_layout
    from rmsnorm_kernels.triton_backward.dx import backward_config, pipeline_stages
    from rmsnorm_kernels.triton_backward.persistent import rmsnorm_bwd_persistent_kernel

    config = config or backward_config("persistent", m, n)
    stages = pipeline_stages(config, n, 2)
    return compiled_resources(
        rmsnorm_bwd_persistent_kernel,
        BACKWARD_SIGNATURE,
        {
            "ROWS": config.rows,
            "NUM_STAGES": stages,
            "RELOAD_W": config.reload_weight,
            "USE_PDL": True,
            "ROW": row_layout(config, n).layout(),
            "VEC": 0,
        },
        config.num_warps,
        stages,
    )


def main() -> int:
    from engine.presets import get_preset
    from rmsnorm_kernels.kernel_config import row_layout
    from rmsnorm_kernels.triton_backward.dx import backward_config

    print(
        f"{'N':>6} {'segments':<18} {'rows':>4} {'warps':>5} {'k':>2} {'stages':>6} {'reload γ':<8} {'regs':>5} "
        f"{'spill B':>8} {'smem B':>8}"
    )
    for n in get_preset("models")["N"]:
        config = backward_config("persistent", 16384, n)
        r = persistent_backward_resources(n, config)
        segments = "+".join(map(str, row_layout(config, n).widths))
        print(
            f"{n:>6} {segments:<18} {config.rows:>4} {config.num_warps:>5} {config.programs_per_sm:>2} "
            f"{config.stages:>6} {str(config.reload_weight):<8} {r.registers:>5} {r.spill_stack_bytes:>8} "
            f"{r.shared_bytes:>8}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
