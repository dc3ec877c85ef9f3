#!/usr/bin/env bash
# Issue 37 on a lent GPU machine (one card is enough): a Ray head with that GPU, the service pointed at it
# (serve --ray), a GPU sweep streamed through `curl -N`, then the overhead per case of Ray against the local worker
# (bench/fleet_overhead.py; target ≤ +5 % wall time per case). Output under $OUT.
# The wheels: on the CPU machine `WITH_RAY=1 bash bench/fetch_wheels.sh` (the ray wheel is
# ~79 MB, so it comes in two halves over two calls; the machine keeps /var/tmp between calls while it is warm):
#
#   bash bench/ray_gpu.sh stash-a               # call 1, carry: .whlr/ray.part.aa .whlr/ray.name .git-commit
#   bash bench/ray_gpu.sh stash-b install run   # call 2 at once, carry: .whl .whlr/deps .whlr/ray.part.ab .git-commit
# (the tree is ~19 MB: call 1 carries ~63 MB, call 2 ~65 MB, each under the 64 MiB limit)
#
# A machine that already has ray (python3 -c 'import ray') needs neither: `bash bench/ray_gpu.sh run`.
set -uo pipefail
cd "$(dirname "$0")/.."
KEEP=/var/tmp/rmsnorm
SITE=$KEEP/site            # the web stack (bench/gpu_session.sh install)
SITE_RAY=$KEEP/site-ray    # ray and its dependencies, apart: `pip --target --upgrade` replaces shared folders
OUT=${OUT:-/tmp/out}
RAY_PORT=${RAY_PORT:-6391}
PORT=${PORT:-8766}
mkdir -p "$KEEP/ray" "$OUT"
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=$KEEP/triton-cache TORCHINDUCTOR_CACHE_DIR=$KEEP/inductor-cache RMSNORM_NATIVE_DIR=$KEEP/native
export PYTHONPATH="$PWD:$SITE:$SITE_RAY${PYTHONPATH:+:$PYTHONPATH}"   # the actors inherit it from `ray start`
export RAY_USAGE_STATS_ENABLED=0
ray_cli() { python3 -c 'import sys; from ray.scripts.scripts import main; sys.argv[0] = "ray"; main()' "$@"; }
SWEEP='{"implementations":["triton","triton-persistent","torch-native"],"passes":["fwd","bwd"],"dtypes":["bfloat16"],
        "M":[4096,16384],"N":[1024,4096],"repetitions":50}'

for phase in "$@"; do
  echo "=== phase $phase ($(date -u +%H:%M:%S))"
  case "$phase" in
    stash-a)
      cp .whlr/ray.part.aa .whlr/ray.name "$KEEP/ray/" && ls -la "$KEEP/ray"
      ;;
    stash-b)
      cp .whlr/ray.part.ab "$KEEP/ray/" && cp -r .whlr/deps "$KEEP/ray/" && ls -la "$KEEP/ray"
      python3 -c 'import fastapi' 2>/dev/null || bash bench/gpu_session.sh install   # the web stack, from .whl
      ;;
    install)
      wheel="$KEEP/ray/$(cat "$KEEP/ray/ray.name")"
      cat "$KEEP/ray/ray.part.aa" "$KEEP/ray/ray.part.ab" > "$wheel"
      # only what the image lacks: its own requests, yaml, packaging … stay
      missing=()
      for w in "$KEEP"/ray/deps/*.whl; do
        mod=$(basename "$w" | cut -d- -f1 | tr 'A-Z' 'a-z')
        case "$mod" in pyyaml) mod=yaml ;; rpds_py) mod=rpds ;; protobuf) mod=google.protobuf ;; esac
        python3 -c "import $mod" 2>/dev/null || missing+=("$w")
      done
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE_RAY" \
        "$wheel" "${missing[@]}" || { echo "ray install failed"; exit 1; }
      python3 -c 'import ray, fastapi; print("ray", ray.__version__, "fastapi", fastapi.__version__)' || exit 1
      ;;
    run)
      nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv | tee "$OUT/nvidia-smi.csv"
      ray_cli start --head --port="$RAY_PORT" --num-gpus=1 --include-dashboard=false --disable-usage-stats \
        > "$OUT/ray-start.log" 2>&1 || { cat "$OUT/ray-start.log"; exit 1; }
      tail -5 "$OUT/ray-start.log"
      RMSNORM_DATA_DIR=$KEEP/data-ray RMSNORM_RESULTS_DIR= setsid python3 -c \
        "from app.main import serve; serve(host='127.0.0.1', port=$PORT, ray_address='127.0.0.1:$RAY_PORT')" \
        > "$OUT/serve-ray.log" 2>&1 &
      server=$!
      for _ in $(seq 1 300); do
        curl -sf "localhost:$PORT/api/health" -o "$OUT/health-ray.json" \
          && python3 -c "import json,sys; d=json.load(open('$OUT/health-ray.json')); sys.exit(0 if all(g['ready'] for g in d['gpus']) else 1)" \
          && break
        sleep 1
      done
      python3 -m json.tool "$OUT/health-ray.json" | head -60
      # the sweep, streamed: one line per case as the actor measures it (RAY_SKIP_SWEEP=1: seen before, skipped)
      [ -n "${RAY_SKIP_SWEEP:-}" ] || time curl -sN -X POST "localhost:$PORT/benchmark" -H 'content-type: application/json' -d "$SWEEP" \
        | tee "$OUT/stream-ray.ndjson" | cut -c1-200
      kill -INT "$server"; wait "$server"
      tail -5 "$OUT/serve-ray.log"
      # the engine alone in a spawned process vs a Ray actor, profiled: at Ray's nice 15, then as our actor runs
      for nice in ${PROBE_NICE:-keep undo}; do
        python3 bench/ray_engine_probe.py --ray "127.0.0.1:$RAY_PORT" --device cuda:0 --rounds 4 \
          $([ $nice = keep ] && echo --keep-nice) --out "$OUT/ray-engine-probe-$nice.json" > "$OUT/ray-engine-probe-$nice.log" 2>&1
        grep -v "^\s*$" "$OUT/ray-engine-probe-$nice.log" | head -40 | cut -c1-220
      done
      # the same sweep through the local worker and through Ray, interleaved rounds
      python3 bench/fleet_overhead.py --ray "127.0.0.1:$RAY_PORT" --device cuda:0 \
        --impls triton,triton-persistent,torch-native --dtypes bfloat16 --m 4096,16384 --n 1024,4096 --reps 50 \
        --rounds "${ROUNDS:-5}" --out "$OUT/fleet-overhead-gpu.json" 2>&1 | grep -v "^\s*$" | tail -25
      ray_cli stop > /dev/null 2>&1
      ;;
    *) echo "unknown phase $phase"; exit 2 ;;
  esac
done
