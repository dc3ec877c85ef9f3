#!/usr/bin/env bash
# The CUDA plug-ins (examples/cuda_rmsnorm: cuda-naive, cuda-persistent) on a GPU host, beside the Triton backwards
# and the peers, in phases; everything under $OUT. Each phase has its own time limit (SIGINT: a cut bench keeps the
# rows it measured), so one that hangs cannot take the others with it. One device command may last 10 minutes, so
# the whole is three calls on the same warm machine (about 7-12 minutes of GPU time in all, less with Triton's cache
# warm), after `git rev-parse HEAD > .git-commit` here and with .git-commit in each call's carry:
#
#   bash bench/cuda_plugins.sh env smoke check occupancy          # ≤ 4 min: built? correct? (read cuda_smoke.txt first)
#   bash bench/cuda_plugins.sh bench-bf16 bench-big               # ≤ 7 min
#   bash bench/cuda_plugins.sh bench-fp16 profile table           # ≤ 8 min
#
# With no phase named it runs them all in that order. QuACK and Liger are measured when installed: run after
# `bash bench/gpu_session.sh stash-a install` / `stash-b install-dsl` on the same warm machine (this script uses the
# same /var/tmp/rmsnorm/site); without them their rows are skipped, with the reason. The compiled cubin is cached in
# /var/tmp/rmsnorm/cuda-cache (RMSNORM_CUDA_CACHE) between calls. REPS (default 5) sets the timed repetitions.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh  # the same environment as gpu_session.sh: its installs, caches and tuned table
PLUGIN=examples.cuda_rmsnorm
PEERS=cuda-naive,cuda-persistent,triton-workspace,triton-persistent,quack,liger
REPS=${REPS:-5}
limit() { local s=$1; shift; timeout -s INT --kill-after=20 "$s" "$@"; local rc=$?; [ $rc -eq 124 ] && echo "!!! timed out after ${s}s: $*"; return $rc; }
# `timeout` runs programs, not shell functions: what runs under `limit` is spelled out as a command
DASH=(python3 -m rmsnorm_dash)
BENCH=("${DASH[@]}" bench --plugin $PLUGIN --impl "$PEERS" --pass bwd --reps "$REPS" --warmup 3 --rounds 1 --quiet)

phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(env smoke check occupancy bench-bf16 bench-fp16 bench-big profile table)
for phase in "${phases[@]}"; do
  echo "=== phase $phase ($(date -u +%H:%M:%S))"
  case "$phase" in
    env)
      nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
      python3 - <<'EOF' 2>&1 | tee "$OUT/cuda_env.txt"
import importlib, shutil, sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
for m in ("cupy", "cuda.bindings", "triton", "quack", "liger_kernel"):
    try:
        mod = importlib.import_module(m); print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "missing:", type(e).__name__, e)
from examples.cuda_rmsnorm import build
print("nvrtc", build.nvrtc_version(), "| nvcc", build.nvcc_path(), "| cuda_pipeline.h in", build.pipeline_include_dir())
EOF
      ;;
    smoke)  # compile, load, one small call of each against the fp64 reference, with the whole traceback on failure
      limit 240 python3 - <<'EOF' 2>&1 | tee "$OUT/cuda_smoke.txt"
import time, traceback, torch
from rmsnorm_kernels.registry import load_all, REGISTRY
from rmsnorm_kernels.reference import rmsnorm_reference, rmsnorm_backward_reference, relative_error, dx_scale
load_all(extra_paths=["examples.cuda_rmsnorm"])
from examples.cuda_rmsnorm import kernels
t0 = time.perf_counter()
try:
    mod = kernels.module(0)
    print(f"built in {time.perf_counter() - t0:.1f} s:", kernels.built(), "| loader:", type(mod).__name__)
except Exception:
    traceback.print_exc()
for name in ("cuda-naive", "cuda-persistent"):
    impl = REGISTRY.get(name)
    print(name, "available:", impl.unavailable_reason() or "yes", "| launch 16384x4096:", impl.launch(16384, 4096, 132))
    for dtype, (m, n) in ((torch.bfloat16, (1000, 4096)), (torch.float16, (77, 2880)), (torch.bfloat16, (4099, 16384))):
        try:
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(m, n, device="cuda", generator=g).to(dtype).requires_grad_(True)
            w = (1 + 0.5 * torch.randn(n, device="cuda", generator=g)).to(dtype).requires_grad_(True)
            dy = torch.randn(m, n, device="cuda", generator=g).to(dtype)
            y = impl.fn(x, w, 1e-6)
            dx, dw = torch.autograd.grad(y, (x, w), dy)
            torch.cuda.synchronize()
            y_ref, _ = rmsnorm_reference(x, w, 1e-6)
            dx_ref, dw_ref = rmsnorm_backward_reference(x, w, dy, 1e-6)
            print(f"  {str(dtype)[6:]:9} {m}x{n}: y {relative_error(y, y_ref):.2e}  "
                  f"dx {relative_error(dx, dx_ref, dx_scale(x, w, dy, 1e-6)):.2e}  dγ {relative_error(dw, dw_ref):.2e}")
        except Exception:
            traceback.print_exc()
EOF
      ;;
    check)  # the fp64 check: the models widths at M = 4099, odd widths, odd M; fp32 and N % 8 != 0 skipped
      limit 300 "${DASH[@]}" check --plugin $PLUGIN --impl cuda-naive --impl cuda-persistent --dtype bfloat16 --dtype float16 \
        --dtype float32 --preset-widths --shape 4x8 --shape 1000x1 --shape 257x8192 --shape 32x65536 \
        --shape 1023x5000 --shape 20011x4096 --shape 8195x16384 --shape 515x1032 --shape 70x6152 --shape 33x16376 --shape 9x24 2>&1 | tee "$OUT/cuda_check.txt" | tail -40
      ;;
    occupancy)  # blocks per SM of the persistent kernel here: commit as examples/cuda_rmsnorm/recorded_occupancy.json
      limit 120 python3 - <<'EOF' 2>&1 | tee "$OUT/cuda_occupancy.txt"
import datetime, json, os, torch
from engine.presets import MODEL_WIDTHS
from examples.cuda_rmsnorm import kernels
widths = sorted(set(MODEL_WIDTHS) | {512, 1024, 2048, 4096, 8192, 16384})
doc = {"device": torch.cuda.get_device_name(0), "sm_count": kernels.sm_count(0),
       "recorded": datetime.date.today().isoformat(), "built": kernels.built(), "blocks_per_sm": {}}
for dtype in ("bfloat16", "float16"):
    doc["blocks_per_sm"][dtype] = {str(n): kernels.blocks_per_sm(n, dtype, 0)[0] for n in widths}
    print(dtype, "measured", doc["blocks_per_sm"][dtype])
    print(dtype, "estimate", {n: kernels.estimate_blocks_per_sm(n, dtype)[0] for n in widths})
json.dump(doc, open(os.path.join(os.environ["OUT"], "cuda_occupancy.json"), "w"), indent=1)
EOF
      ;;
    bench-bf16) limit 300 "${BENCH[@]}" --dtype bf16 --preset models --out "$OUT/cuda-bwd-bf16.json" 2>&1 | tail -30 ;;
    bench-fp16) limit 300 "${BENCH[@]}" --dtype fp16 --preset models --out "$OUT/cuda-bwd-fp16.json" 2>&1 | tail -30 ;;
    bench-big) limit 120 "${BENCH[@]}" --dtype bf16,fp16 --m 8192 --n 16384 --out "$OUT/cuda-bwd-8192x16384.json" 2>&1 | tail -20 ;;
    profile)  # the kernel breakdown of the two persistent backwards and the naive chain at two widths
      limit 180 "${DASH[@]}" bench --plugin $PLUGIN --impl cuda-naive,cuda-persistent,triton-persistent --pass bwd --dtype bf16 \
        --m 16384,65536 --n 4096,8192 --reps "$REPS" --warmup 3 --profile --quiet --out "$OUT/cuda-profile.json" 2>&1 | tail -20
      ;;
    table) python3 bench/cuda_plugins_table.py "$OUT"/cuda-bwd-*.json --profile "$OUT/cuda-profile.json" | tee "$OUT/cuda_plugins_table.md" ;;
    *) echo "unknown phase $phase"; exit 2 ;;
  esac
done
ls -la "$OUT"
