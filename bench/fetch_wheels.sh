#!/usr/bin/env bash
# Fetch, on this machine (PyPI reachable), the wheels a lent H200 needs and cannot download itself (see
# bench/gpu_session.sh): .whl/ holds the web stack and Liger (7 MB), .whlq/ QuACK with its small CuTe-DSL parts
# (10 MB), .whlx/ the 92 MB CuTe-DSL cu13 library wheel's files as one tar.xz (66 MB) in two parts
# (cu13.tar.xz.part.aa / .ab), carried in two calls and extracted there. A call's carry is at most 64 MiB with the
# working tree (~14 MB): call 1 takes .whl and the first part, call 2 .whl, .whlq and the second. Python 3.12, manylinux x86_64 (the device image). Versions: the web
# stack's from constraints.txt (what the suite passed with), the peers' pinned below (the versions the
# committed results name). The three folders are ignored by git (.git/info/exclude). Prints the carry sizes.
#   bash bench/fetch_wheels.sh        # then: bash bench/gpu_session.sh's phases, carrying .whl and one half
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WEB="fastapi starlette pydantic pydantic_core pydantic-settings python-dotenv typing-inspection annotated-types typing_extensions anyio
     opentelemetry-api uvicorn httptools websockets watchfiles python-multipart fastapi_offline"
# plotly (9.7 MB) only for the CLI's HTML report: the carry limit is 64 MiB with the working tree (~6 MB) and a
# 46 MiB half of the cu13 wheel, so it comes only when asked for (WITH_PLOTLY=1)
[ -n "${WITH_PLOTLY:-}" ] && WEB="$WEB plotly"
PEERS="liger-kernel==0.8.5"
QUACK="quack-kernels==0.6.5 apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5
       nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1"
CU13="nvidia-cutlass-dsl-libs-cu13==4.8.1"
pin() {  # NAME -> NAME==VERSION from constraints.txt (names compared as pip does: case, - _ .)
  local want; want=$(echo "$1" | tr 'A-Z_.' 'a-z--')
  awk -F'==' -v w="$want" '!/^#/ { n = tolower($1); gsub(/[_.]/, "-", n); if (n == w) { print $1 "==" $2; exit } }' constraints.txt
}
platforms=()
for n in 39 35 34 31 28 27 24 17; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
download() {  # DIR SPEC...
  local dir=$1; shift
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$dir" "$@"
}
mkdir -p .whl .whlq .whlx
for d in .whl .whlq .whlx; do grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude; done
specs=()
for name in $WEB; do
  spec=$(pin "$name"); [ -n "$spec" ] || { echo "no pin for $name in constraints.txt"; exit 1; }
  specs+=("$spec")
done
download .whl "${specs[@]}" $PEERS
download .whlq $QUACK
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
download "$tmp" $CU13
rm -f .whlx/cu13.tar.xz.part.*
mkdir "$tmp/cu13" && (cd "$tmp/cu13" && unzip -q "$tmp"/nvidia_cutlass_dsl_libs_cu13-*.whl)
tar -C "$tmp/cu13" -cf - . | xz -T2 -6 | split -b 36m - .whlx/cu13.tar.xz.part.
ls .whl .whlq; du -sh .whl .whlq .whlx/cu13.tar.xz.part.*
# WITH_RAY=1 (issue 37, bench/ray_gpu.sh): .whlr/deps/ Ray's small dependencies (3 MB) and the ~79 MB ray wheel in
# two halves, .whlr/ray.part.aa / .ab, carried in two calls and joined there (.whlr/ is in .gitignore)
if [ -n "${WITH_RAY:-}" ]; then
  mkdir -p .whlr/deps
  specs=()
  for name in click filelock jsonschema jsonschema-specifications referencing rpds-py attrs msgpack protobuf PyYAML \
              requests idna urllib3 certifi charset-normalizer packaging; do
    spec=$(pin "$name"); [ -n "$spec" ] || { echo "no pin for $name in constraints.txt"; exit 1; }
    specs+=("$spec")
  done
  download .whlr/deps "${specs[@]}"
  rm -f "$tmp"/*.whl .whlr/ray.part.*
  download "$tmp" "$(pin ray)"
  basename "$tmp"/ray-*.whl > .whlr/ray.name
  split -b 42m "$tmp"/ray-*.whl .whlr/ray.part.
  du -sh .whlr/deps .whlr/ray.part.*
fi
