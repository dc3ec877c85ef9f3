"""ptxas's verdict on the rule's backward configurations (what a GPU with no tuned table runs), read without a GPU
(sm_90 cubins compiled here): they must not spill registers — the 16384-wide tile did (72 B of stack) until γ was
reloaded per row. (A tuned table's winner may spill a few bytes and still be the fastest measured.)"""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json
from engine.compiler_report import persistent_backward_resources
from rmsnorm_kernels.kernel_config import rule_backward
print(json.dumps({n: persistent_backward_resources(n, rule_backward("persistent", n)).__dict__
                  for n in (512, 1024, 2048, 4096, 5376, 8192, 11008, 16384)}))
"""


@pytest.fixture(scope="module")
def resources():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile, do not interpret
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    if out.returncode != 0 and "cuobjdump" in out.stderr and "No such file" in out.stderr:
        pytest.skip("this Triton wheel carries no cuobjdump")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_rule_backward_tiles_do_not_spill(resources):
    spilled = {n: r for n, r in resources.items() if r["spill_stack_bytes"]}
    assert not spilled, f"ptxas spilled registers in the rule's persistent backward: {spilled}"


def test_wide_row_tile_fits_the_register_file(resources):
    wide = resources["16384"]
    assert wide["registers"] <= 128  # 16 warps × 32 threads × 128 = the SM's 64K registers
    assert 0 < wide["shared_bytes"] <= 227 * 1024
