#!/usr/bin/env bash
# On the GPU machine, after the pieces are stashed (scripts/gpu_vllm.sh stash .vstK): install the
# wheels, run benchmarks/sampler_vllm_gpu.py, then the gpu-marked vLLM service test. Everything
# lands in $OUT (install.log, bench.log, vllm_gpu.json, vllm_gpu.png, dmon.log, gpu_test.log).
#   OUT=/tmp/out benchmarks/run_vllm_gpu.sh [BENCH_TIMEOUT_S] [TEST_TIMEOUT_S] [-- bench args]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
bench_s=${1:-420}
test_s=${2:-120}
shift $(( $# >= 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
SITE=${SITE:-/root/site}
if [ ! -f "$SITE/.installed" ]; then
  scripts/gpu_vllm.sh install > "$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
  touch "$SITE/.installed"
fi
tail -2 "$OUT/install.log" 2>/dev/null
export PYTHONPATH=$SITE:$PWD:$PWD/services/sampler:$PWD/services/executor:$PWD/services/grader:$PWD/services/learner PATH=$SITE/bin:$PATH VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 \
       HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 TOKENIZERS_PARALLELISM=false
nvidia-smi dmon -s um -d 2 > "$OUT/dmon.log" 2>&1 &
dmon=$!
start=$SECONDS
timeout "$bench_s" python3 benchmarks/sampler_vllm_gpu.py --out "$OUT" "$@" > "$OUT/bench.log" 2>&1
echo "bench rc=$? in $((SECONDS - start)) s"
grep '^==' "$OUT/bench.log" | cut -c1-700
start=$SECONDS
timeout "$test_s" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_sampler_vllm_gpu.py \
  > "$OUT/gpu_test.log" 2>&1
echo "gpu test rc=$? in $((SECONDS - start)) s"
tail -4 "$OUT/gpu_test.log"
kill "$dmon" 2>/dev/null
