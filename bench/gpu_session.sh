#!/usr/bin/env bash
# The lent-H200 session, in phases (each `run` call of the device tool runs one or more of them).
# The wheels: `bash bench/fetch_wheels.sh` on the CPU machine (PyPI reachable) fills .whl/, .whlq/ and .whlx/.
# Wheels travel in the ignored folders .whl/ (web stack incl. opentelemetry-api for fastapi >= 0.165, pydantic,
# liger), .whlq/ (quack with apache-tvm-ffi and torch-c-dlpack-ext, and the CuTe-DSL parts: nvidia-cutlass-dsl,
# -libs-base and -libs-core, the last holding the cutlass Python sources) and
# .whlx/ (the 92 MB CuTe-DSL cu13 library wheel's files as a 66 MB tar.xz, split in two halves that arrive in two
# calls). Everything that must
# outlive one call lives under /var/tmp/rmsnorm (the repo's ignored paths are wiped between calls).
#
#   bash bench/gpu_session.sh stash-a install check serve-demo    # call 1: carry .whl and .whlx/cu13.tar.xz.part.aa
#   bash bench/gpu_session.sh stash-b install install-dsl sweep-start sweep-wait
#                                                   # call 2: carry .whl, .whlq and .whlx/cu13.tar.xz.part.ab
#   bash bench/gpu_session.sh sweep-wait                           # call 3 if the sweep outlived call 2
# Issue 15's models preset, every peer, both dtypes (about 17 minutes at 20 repetitions on an H100):
#   bash bench/gpu_session.sh stash-a install native smi-start     # call 1: carry .whl, .whlx/cu13.tar.xz.part.aa, .git-commit
#   SWEEP_SPLIT=1 SWEEP_DTYPES=bf16,fp16 SWEEP_REPS=20 SWEEP_S=1150 WAIT_S=480 KEEP_RUNNING=1 \
#     bash bench/gpu_session.sh stash-b install-dsl models-start models-wait   # call 2 at once: .whl, .whlq, .whlx/cu13.tar.xz.part.ab
#   WAIT_S=560 bash bench/gpu_session.sh models-wait smi-stop      # call 3 at once (a machine idle for 30 s is gone)
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh  # KEEP, SITE, OUT, the caches, PYTHONPATH (dsl_path), GIT_COMMIT, dash, the tuned table

for phase in "$@"; do
  echo "=== phase $phase ($(date -u +%H:%M:%S))"
  case "$phase" in
    stash-a) cp .whlx/cu13.tar.xz.part.aa "$KEEP/" && ls -la "$KEEP" ;;
    stash-b) cp .whlx/cu13.tar.xz.part.ab "$KEEP/" && ls -la "$KEEP" ;;
    install)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        || { echo "wheel install failed"; exit 1; }
      python3 -c 'import fastapi, uvicorn, pydantic, liger_kernel; print("web stack + liger OK", fastapi.__version__, pydantic.__version__)'
      ;;
    install-dsl)
      # the small CuTe-DSL wheels and QuACK in one pip call (`pip --target --upgrade` replaces a shared top-level
      # folder wholesale), then the cu13 library wheel's files, carried unpacked as tar.xz (66 MB where the wheel's
      # zip is 92: the two halves and the repository fit two calls' 64 MiB), extracted over them
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whlq/*.whl \
        || { echo "cutlass dsl install failed"; exit 1; }
      cat "$KEEP/cu13.tar.xz.part.aa" "$KEEP/cu13.tar.xz.part.ab" | python3 -c 'import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode="r|xz").extractall(sys.argv[1], filter="data")' "$SITE" \
        || { echo "cu13 library install failed"; exit 1; }
      dsl_path  # the cutlass_dsl folder exists only now: later phases of this call need it on the path
      python3 -c 'import quack, cutlass; print("quack OK", getattr(quack, "__version__", "?"))' 2>&1 | tail -3
      ;;
    tune)
      # issue 33: rmsnorm-dash tune on this GPU (the table goes to $KEEP and $OUT; later phases use it)
      nvidia-smi --query-gpu=name,uuid,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
      timeout -s INT ${TUNE_S:-560} python3 -m rmsnorm_dash tune ${TUNE_ARGS:-} --out "$KEEP/tuned.json" 2>&1 | tee "$OUT/tune.log" | tail -c 6000
      cp "$KEEP/tuned.json" "$OUT/" 2>/dev/null && export RMSNORM_CONFIG_TABLE=$KEEP/tuned.json
      ;;
    warm-scan)
      # issue 33: compile the configurations in force at the scan's widths in parallel before the sweep does
      widths=$(python3 -c 'from engine.presets import get_preset, random_widths; print(",".join(map(str, get_preset("widths")["N"] + random_widths(8, int("'"${WIDTH_SEED:-2026}"'")))))')
      for dt in ${WARM_DTYPES:-bfloat16 float16}; do
        timeout ${WARM_S:-240} python3 -m rmsnorm_dash tune --warm --dtype $dt --widths "$widths" 2>&1 | tail -8
      done
      ;;
    probe-band)
      # issue 33 (twentieth session): every candidate at the widths where we still trail vs the one in force, each
      # checked against fp64 first; through -c so that the tuner's spawned compile workers do not re-run it
      timeout ${PROBE_S:-300} python3 -u -c 'exec(open("bench/probe_band.py").read())' 2>&1 | tee "$OUT/probe_band.log" | grep -v "^ *compiled" | tail -100
      ;;
    cliff-mini)
      # issue 33 on little device time: ours (the table in force) against CLIFF_PEERS (torch-native and Liger) at widths
      # the tune grid does not hold (every other held-out multiple of 256) and 8 random ones, or CLIFF_WIDTHS; M 16384,
      # one file per pass
      widths=${CLIFF_WIDTHS:-$(python3 -c 'from engine.presets import get_preset, random_widths; from engine.tune import TUNE_WIDTHS; held = [n for n in get_preset("widths")["N"] if n not in TUNE_WIDTHS][::2]; print(",".join(map(str, sorted(set(held + random_widths(8, '"${WIDTH_SEED:-2026}"'))))))')}
      echo "widths $widths"
      timeout ${WARM_S:-60} python3 -m rmsnorm_dash tune --warm --dtype bfloat16 --m 16384 --widths "$widths" 2>&1 | tail -3
      for pass in fwd bwd; do
        ours=triton; [ $pass = bwd ] && ours=triton-persistent
        timeout -s INT ${CLIFF_S:-120} python3 -m rmsnorm_dash bench --pass $pass --impl ${CLIFF_PEERS:-torch-native,liger},$ours \
          --dtype bf16 --m 16384 --n "$widths" --reps ${CLIFF_REPS:-20} --out "$OUT/cliff-$pass.json" --quiet 2>&1 | tail -4
      done
      python3 bench/width_targets.py "$OUT"/cliff-*.json 2>&1 | tail -25
      ;;
    fwd-spread)
      # issue 33 (H200, 2026-12-07): ours ran 88-92 % at 8192 / 12288 / 14336 with a min 8-12 % below its median,
      # torch.compile 97 % with a tight spread. Interleaved rounds, each rotating input set's median apart (set_medians_us):
      # one slow set (where the tensors lie) or every set (the kernel)?
      timeout -s INT ${SPREAD_S:-150} python3 -m rmsnorm_dash bench --pass fwd --impl torch-compile,triton --dtype bf16 \
        --m 16384,65536 --n ${SPREAD_WIDTHS:-7168,8192,12288,14336,16384} --reps 40 --rounds 3 --quiet \
        --out "$OUT/fwd-spread.json" 2>&1 | tail -4
      python3 - "$OUT/fwd-spread.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    if r["status"] == "ok":
        print(f"{r['impl']:14} {r['M']:6} {r['N']:6} {r['pct_of_ceiling']:5.1f} %  median {r['median_us']:7.1f}  "
              f"min {r['min_us']:7.1f}  sets {[round(v, 1) for v in r.get('set_medians_us') or []]}  "
              f"rounds {[round(v, 1) for v in r.get('round_medians_us') or []]}")
PY
      ;;
    check-widths)
      # issue 33: our kernels against fp64 at every width of the scan and 8 random widths (M 1027)
      timeout ${CHECK_S:-300} python3 -u -m rmsnorm_dash check --impl triton --impl triton-persistent --impl triton-workspace \
        --impl triton-atomic --dtype bfloat16 --dtype float16 --widths --random-widths 8 --width-seed ${WIDTH_SEED:-2026} > "$OUT/check-widths.txt" 2>&1
      echo "check exit code $?"; head -3 "$OUT/check-widths.txt"; grep -v " ok$" "$OUT/check-widths.txt" | tail -20
      ;;
    check)
      nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
      python3 -c 'import torch, triton, sys; print("torch", torch.__version__, "triton", triton.__version__, "python", sys.version.split()[0])'
      dash list 2>&1 | tee "$OUT/list.txt"
      dash check 2>&1 | tee "$OUT/check.txt"
      ;;
    serve-demo)
      # issue 4: the service on the GPU host, a GPU sweep streamed through it with curl -N
      port=8765
      RMSNORM_DATA_DIR=$KEEP/data setsid python3 -c 'from app.main import serve; serve(host="127.0.0.1", port=8765)' \
        > "$OUT/serve.log" 2>&1 &
      for _ in $(seq 60); do curl -sf "127.0.0.1:$port/api/health" > "$OUT/health.json" && break; sleep 1; done
      cat "$OUT/health.json"; echo
      curl -sN -X POST "127.0.0.1:$port/benchmark" -H 'Content-Type: application/json' \
        -d '{"implementations":["torch-native","triton","triton-persistent","triton-atomic"],"passes":["fwd","bwd"],"dtypes":["bf16"],"M":[16384],"N":[1024,4096],"repetitions":50}' \
        | while IFS= read -r line; do printf '%s %s\n' "$(date -u +%H:%M:%S.%N | cut -c1-12)" "$line"; done | tee "$OUT/stream.ndjson" | cut -c1-240
      curl -s "127.0.0.1:$port/api/runs" | cut -c1-400; echo
      pkill -f 'app.main import serve' || true
      ;;
    quack-sweep)
      dash bench --impl quack,liger,torch-native,triton,triton-persistent --dtype bf16 \
        --m 16384,65536 --n 1024,4096,8192 --reps 100 --quiet --out "$OUT/quack.json" 2>&1 | tail -c 6000
      ;;
    sweep-start)
      rm -f "$KEEP/sweep.done" "$KEEP/sweep.log"
      (setsid bash -c "timeout -s INT 1500 python3 -m rmsnorm_dash \
          bench --dtype bf16,fp16 --m 4096,16384,65536 --n 512,1024,2048,4096,8192,16384 --reps 100 \
          --out $KEEP/results.json --quiet > $KEEP/sweep.log 2>&1; echo \$? > $KEEP/sweep.done" &)
      sleep 2; echo started
      ;;
    smi-start)
      # the GPU's clocks, power and throttle reasons every 500 ms in the background (a slow-mode row is then matched
      # to the card's state at its started_at / ended_at); smi-stop, models-wait and sweep-wait bring the log back
      pkill -f "nvidia-smi --query-gpu=timestamp" 2>/dev/null
      (setsid nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_throttle_reasons.active \
          --format=csv,nounits -lms 500 > "$KEEP/smi.csv" 2>&1 &)
      sleep 1; head -3 "$KEEP/smi.csv"
      ;;
    smi-stop)
      pkill -f "nvidia-smi --query-gpu=timestamp" 2>/dev/null; gzip -c "$KEEP/smi.csv" > "$OUT/smi.csv.gz"; wc -l "$KEEP/smi.csv"
      ;;
    models-start)
      # issue 15: the models preset, every peer. SWEEP_DTYPES "bf16 fp16" runs one file per dtype (an interrupted
      # run keeps whole dtypes); "bf16,fp16" one run of both (one header, one ceiling). The CLI rewrites its file
      # with the rows so far every 30 s, so models-wait can bring a running sweep's rows back.
      rm -f "$KEEP/sweep.done" "$KEEP/sweep.log" "$KEEP"/models-*.json
      preset=${SWEEP_PRESET:-models}; extra=${SWEEP_EXTRA:-}
      # SWEEP_SPLIT=1: the forward pass (ours: triton) then the backward pass (ours: triton-persistent;
      # SWEEP_PASSES="bwd fwd" turns the order round), both dtypes in each, two files (models-fwd.json,
      # models-bwd.json) within one SWEEP_S: the rows nobody reads (the same forward kernel under a second name, the
      # non-persistent backward) are not measured
      impls=${SWEEP_IMPLS:-torch-native,torch-compile,liger,quack,triton,triton-persistent}
      peers=${SWEEP_PEERS:-torch-native,torch-compile,liger,quack}
      if [ -n "${SWEEP_SPLIT:-}" ]; then
        (setsid bash -c "end=\$(( \$(date +%s) + ${SWEEP_S:-1500} ));
          for pass in ${SWEEP_PASSES:-fwd bwd}; do
            ours=${SWEEP_OURS_FWD:-triton}; [ \$pass = bwd ] && ours=${SWEEP_OURS_BWD:-triton-persistent};
            left=\$(( end - \$(date +%s) )); [ \$left -gt 10 ] || break;
            timeout -s INT \$left python3 -m rmsnorm_dash bench --preset $preset $extra --pass \$pass --impl $peers,\$ours \
              --dtype ${SWEEP_DTYPES:-bf16,fp16} --reps ${SWEEP_REPS:-30} --out $KEEP/models-\$pass.json --quiet; rc=\$?;
          done > $KEEP/sweep.log 2>&1; echo \$rc > $KEEP/sweep.done" &)
      else
        (setsid bash -c "for dt in ${SWEEP_DTYPES:-bf16 fp16}; do timeout -s INT ${SWEEP_S:-1500} python3 -m rmsnorm_dash bench --preset models \
            --impl $impls --dtype \$dt --reps ${SWEEP_REPS:-40} --out $KEEP/models-\${dt//,/-}.json --quiet; done \
            > $KEEP/sweep.log 2>&1; echo \$? > $KEEP/sweep.done" &)
      fi
      sleep 2; echo started
      ;;
    models-wait)
      # wait up to WAIT_S, then interrupt (the CLI keeps the rows measured so far) unless KEEP_RUNNING is set, and
      # bring back what exists (a running sweep's file holds its rows as of its last rewrite)
      for _ in $(seq $(( ${WAIT_S:-500} / 5 ))); do [ -f "$KEEP/sweep.done" ] && break; sleep 5; done
      if [ ! -f "$KEEP/sweep.done" ] && [ -z "${KEEP_RUNNING:-}" ]; then
        pkill -INT -f "rmsnorm_dash bench --preset"; for _ in $(seq 12); do [ -f "$KEEP/sweep.done" ] && break; sleep 5; done
      fi
      cp "$KEEP"/models-*.json "$OUT/" 2>/dev/null; tail -c 30000 "$KEEP/sweep.log" > "$OUT/sweep.log"
      [ -f "$KEEP/smi.csv" ] && gzip -c "$KEEP/smi.csv" > "$OUT/smi.csv.gz"
      for f in "$KEEP"/models-*.json; do [ -f "$f" ] && python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); r = d["rows"]; print(sys.argv[1], len(r), "rows, complete:", d["summary"]["complete"], "last:", r and (r[-1]["impl"], r[-1]["pass"], r[-1]["dtype"], r[-1]["M"], r[-1]["N"]))' "$f"; done
      ls -la "$OUT"; tail -c 4000 "$KEEP/sweep.log"
      ;;
    pow2)
      # issue 15: the power-of-two widths the models preset lacks (512, 1024), ours + the best peers, for the
      # side-by-side against the committed default sweep
      timeout ${POW2_S:-150} python3 -m rmsnorm_dash bench --impl ${POW2_IMPLS:-triton,triton-persistent,triton-workspace,triton-atomic,liger,torch-native} \
        --dtype bf16,fp16 --m 4096,16384,65536 --n 512,1024 --reps 40 --quiet --out "$OUT/pow2.json" 2>&1 | tail -c 3000
      ;;
    models-fg)
      # the models preset in the foreground, bounded by FG_S (SIGINT keeps the rows measured so far)
      timeout -s INT ${FG_S:-300} python3 -m rmsnorm_dash bench --preset models --impl ${SWEEP_IMPLS:-quack,triton,triton-persistent} \
        --dtype ${SWEEP_DTYPES:-bf16} --reps ${SWEEP_REPS:-25} --quiet --out "$OUT/models-fg.json" > "$OUT/models-fg.log" 2>&1
      echo "exit $?"; tail -c 2500 "$OUT/models-fg.log"
      ;;
    check-ours)
      # issue 15: correctness of our kernels at every model width and the odd ones (1000, 5000, 12345; M 4099)
      impl_args=$(for i in ${CHECK_IMPLS:-triton triton-persistent triton-workspace triton-atomic}; do printf -- '--impl %s ' "$i"; done)
      timeout ${CHECK_S:-240} python3 -m rmsnorm_dash check --preset-widths --dtype ${CHECK_DTYPE:-bfloat16} \
        $impl_args > "$OUT/check.txt" 2>&1
      echo "check exit code $?"; tail -c 5000 "$OUT/check.txt"
      ;;
    profile)
      # issue 14: profiled kernel times add up to each row's median
      timeout ${PROFILE_S:-120} python3 bench/profile_check.py --m 16384 --n 4096,8192 --dtype bfloat16 \
        --out "$OUT/profile-check.json" 2>&1 | tail -40
      ;;
    host)
      # issue 16: where one call's host time goes (launch plans replayed), beside F.rms_norm's
      timeout ${HOST_S:-120} python3 bench/host_profile.py --m 4096 --n 4096 --out "$OUT" 2>&1 | head -12
      ;;
    native)
      # issue 16: the native node (rmsnorm_kernels/native) built and loaded on this host, and its compiler
      for c in c++ g++ gcc cc clang++; do printf '%s: %s\n' "$c" "$(command -v $c || echo -)"; done
      (c++ --version || g++ --version) 2>&1 | head -1
      RMSNORM_NATIVE_DIR=$KEEP/native python3 -c 'import time; t = time.perf_counter(); from rmsnorm_kernels import native; m = native.ensure(); print("native:", "loaded" if m else native.STATE["error"], native.STATE["path"], f"{time.perf_counter() - t:.1f} s"); print("cuda build:", getattr(m, "cuda", None))' 2>&1 | tail -30
      ;;
    breakdown)
      # issue 16: one backward's host time taken apart (autograd node, allocations, each launcher)
      timeout ${BREAKDOWN_S:-120} python3 bench/host_breakdown.py --m 4096 --n 4096 --out "$OUT" 2>&1 | tail -30
      ;;
    atomic-stress)
      # issue 16: the atomic backward on its kept accumulator (the drain kernel leaves it zero), call after call
      timeout ${STRESS_S:-150} python3 bench/atomic_stress.py --out "$OUT" 2>&1 | tail -20
      ;;
    hostsweep)
      # issue 16: host_us of ours beside torch-native's (F.rms_norm) at every default shape, one run; each shape's
      # implementations in HOSTSWEEP_ROUNDS interleaved rounds (a row's host_us: the median of its rounds')
      timeout -s INT ${HOSTSWEEP_S:-180} python3 -m rmsnorm_dash bench --impl torch-native,triton,triton-persistent,triton-workspace,triton-atomic \
        --dtype bf16 --m 4096,16384,65536 --n 512,1024,2048,4096,8192,16384 --reps ${HOSTSWEEP_REPS:-20} \
        --rounds ${HOSTSWEEP_ROUNDS:-1} --quiet \
        --out "$OUT/hostsweep.json" > "$OUT/hostsweep.log" 2>&1
      echo "exit $?"; tail -c 2000 "$OUT/hostsweep.log"; python3 bench/check_targets.py --host "$OUT/hostsweep.json"
      ;;
    hostpaired)
      # issue 16: ours vs F.rms_norm host time, every implementation once per round in a shuffled order (drift cancels)
      timeout -s INT ${HOSTPAIRED_S:-300} python3 bench/host_paired.py --rounds ${HOSTPAIRED_ROUNDS:-60} --out "$OUT" 2>&1 | tail -45
      ;;
    fwdsweep)
      # issue 15: the models preset's forward, ours beside every peer but QuACK (its wheel takes two calls), one run
      timeout -s INT ${FWDSWEEP_S:-270} python3 -m rmsnorm_dash bench --preset models --pass fwd \
        --impl ${SWEEP_IMPLS:-torch-native,torch-compile,liger,triton} --dtype ${SWEEP_DTYPES:-bf16} --reps ${SWEEP_REPS:-30} \
        --quiet --out "$OUT/models-fwd.json" > "$OUT/models-fwd.log" 2>&1
      echo "exit $?"; tail -c 1500 "$OUT/models-fwd.log"
      ;;
    dropin)
      # issue 16: host µs vs F.rms_norm at a few shapes, torch.compile fullgraph, torch.export, CUDA graphs
      timeout ${DROPIN_S:-240} python3 bench/dropin_check.py --out "$OUT" 2>&1 | tail -30
      ;;
    train)
      timeout ${TRAIN_S:-200} python3 -m rmsnorm_dash train-bench ${TRAIN_ARGS:-} --out "$OUT/train-bench.json" 2>&1 | tail -40
      ;;
    sweep-wait)
      for _ in $(seq 110); do [ -f "$KEEP/sweep.done" ] && break; sleep 5; done
      tail -c 20000 "$KEEP/sweep.log" > "$OUT/sweep.log"
      if [ -f "$KEEP/sweep.done" ]; then
        echo "sweep exit code $(cat "$KEEP/sweep.done")"
        cp "$KEEP/results.json" "$OUT/" 2>/dev/null; cp "$KEEP/results.html" "$OUT/" 2>/dev/null
        tail -c 9000 "$KEEP/sweep.log"
      else
        echo "sweep still running"; tail -c 1500 "$KEEP/sweep.log"
      fi
      ;;
    *) echo "unknown phase $phase"; exit 2 ;;
  esac
done
