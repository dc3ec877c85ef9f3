#!/usr/bin/env bash
# Fetch, on this machine (PyPI reachable), what bench/ray_gpu.sh needs on a lent GPU machine that cannot download:
# .whlr/deps/ holds Ray's small dependencies (a few MB) and the ray wheel (~79 MB, over one call's 64 MiB carry) split
# in two halves, .whlr/ray.part.aa and .whlr/ray.part.ab, carried in two calls and joined there (as
# bench/fetch_wheels.sh does for the CuTe-DSL wheel). Python 3.12, manylinux x86_64 (the device image); versions
# from constraints.txt. The web stack comes from bench/fetch_wheels.sh's .whl/. The folder is in .gitignore.
# Prints the carry sizes.
#   bash bench/fetch_wheels.sh && bash bench/fetch_ray_wheels.sh    # then bench/ray_gpu.sh's phases
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEPS="click filelock jsonschema jsonschema-specifications referencing rpds-py attrs msgpack protobuf PyYAML requests
      idna urllib3 certifi charset-normalizer packaging"
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
mkdir -p .whlr/deps
specs=()
for name in $DEPS; do
  spec=$(pin "$name"); [ -n "$spec" ] || { echo "no pin for $name in constraints.txt"; exit 1; }
  specs+=("$spec")
done
download .whlr/deps "${specs[@]}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
download "$tmp" "$(pin ray)"
rm -f .whlr/ray.part.* .whlr/ray-*.whl
basename "$tmp"/ray-*.whl > .whlr/ray.name
split -b 42m "$tmp"/ray-*.whl .whlr/ray.part.
ls .whlr .whlr/deps; du -sh .whlr/deps .whlr/ray.part.*
