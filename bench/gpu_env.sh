# The environment the device scripts share (sourced by bench/gpu_session.sh and bench/cuda_plugins.sh, from the
# repository root): what must outlive one device call lives under /var/tmp/rmsnorm (the repo's ignored paths are
# wiped between calls): the wheels installed by gpu_session.sh's install phases, Triton's, Inductor's, the native
# node's and the CUDA plug-in's caches, a tuned configuration table.
KEEP=/var/tmp/rmsnorm
SITE=$KEEP/site
OUT=${OUT:-/tmp/out}
mkdir -p "$KEEP" "$OUT"
export OUT PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=$KEEP/triton-cache TORCHINDUCTOR_CACHE_DIR=$KEEP/inductor-cache RMSNORM_NATIVE_DIR=$KEEP/native
export RMSNORM_CUDA_CACHE=$KEEP/cuda-cache
export PYTHONPATH="$PWD:$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
dsl_path() { for d in $(find "$SITE" -maxdepth 4 -type d -name cutlass_dsl -path "*cutlass/cutlass_dsl" 2>/dev/null); do export PYTHONPATH="$(dirname "$(dirname "$d")"):$PYTHONPATH"; done; }
dsl_path
# the copy's .git is the session's first commit, not the files' own: `git rev-parse HEAD > .git-commit` on the CPU
# machine before a call and name .git-commit in the call's carry (it is ignored), and the runs record that commit
[ -z "${GIT_COMMIT:-}" ] && [ -f .git-commit ] && export GIT_COMMIT=$(cat .git-commit)
dash() { python3 -m rmsnorm_dash "$@"; }
# a table tuned earlier in this machine's life (gpu_session.sh's phase tune) is the one every later phase runs with
[ -f "$KEEP/tuned.json" ] && export RMSNORM_CONFIG_TABLE=$KEEP/tuned.json
true
