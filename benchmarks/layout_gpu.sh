#!/usr/bin/env bash
# Issue 14, item 5: the sampler on vLLM and the learner on the GPU in one `treegrpo run` at the seed's
# tree shape (E4 x G16, four tasks, treegrpo/examples/learning-gpu.toml with the demo policy), synchronous vs
# --max-staleness 1. Each arm: the run's log, its timing.jsonl (the learner's per-step phases) and
# nvidia-smi dmon; benchmarks/layout_summary.py turns them into $OUT/layout.json (step period,
# rollout and train time, the learner's gen share, GPU utilisation).
#   OUT=/tmp/out [ARMS="sync async"] [ROUNDS=3] bash benchmarks/layout_gpu.sh [ARM_TIMEOUT_S]
# Arms may run in separate commands on one machine (ARMS=sync, then ARMS=async): each arm's records
# stay under $TREEGRPO_HOME/layout and the summary covers every arm run so far.
# vLLM runs eager here: the demo policy is 2.75M parameters, so CUDA graphs save nothing, while
# compiling and capturing them costs ~2 minutes of engine start per arm.
# Needs vLLM importable: after scripts/gpu_vllm.sh stash (4 pieces) on the device machine, or
# SITE=<a venv's site-packages with vllm==0.26.0> elsewhere. One GPU: both services on cuda:0 (the
# two-GPU form is treegrpo/examples/gpu-h200.toml). The demo policy (.demo-home/demo, carried) skips the SFT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
limit=${1:-270}
SITE=${SITE:-/root/site}
if [ -d "$HOME/vst" ] && [ ! -f "$SITE/.installed" ]; then
  scripts/gpu_vllm.sh install > "$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
  touch "$SITE/.installed"
fi
if [ -d .whl ]; then   # treegrpo's own pure dependencies the image lacks (typer, rich, ...)
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/whl.log" 2>&1 || { tail -20 "$OUT/whl.log"; exit 1; }
fi
export PYTHONPATH=$SITE:/tmp/site:$PWD:$PWD/services/sampler:$PWD/services/executor:$PWD/services/grader:$PWD/services/learner PATH=$SITE/bin:/tmp/site/bin:$PATH VLLM_USE_FLASHINFER_SAMPLER=0 \
       VLLM_WORKER_MULTIPROC_METHOD=spawn VLLM_NO_USAGE_STATS=1 OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1 \
       TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
# the services are found by their entry points: register the checkout's five distributions
bash scripts/install_local.sh python3 > "$OUT/install_local.log" 2>&1 || { tail -20 "$OUT/install_local.log"; exit 1; }
export TREEGRPO_HOME=${TREEGRPO_HOME:-/tmp/layout-home}
if [ -d .demo-home/demo ] && [ ! -d "$TREEGRPO_HOME/demo" ]; then
  mkdir -p "$TREEGRPO_HOME" && cp -r .demo-home/demo "$TREEGRPO_HOME/demo"
fi
VLLM=(--set sampler.backend='"vllm"' --set sampler.vllm.dtype='"bfloat16"'
      --set sampler.vllm.gpu_memory_utilization=0.35 --set sampler.vllm.max_model_len=8192
      --set sampler.vllm.max_lora_rank=32 --set sampler.max_concurrent_groups=4
      --set sampler.vllm.enforce_eager=true --set run.rounds=${ROUNDS:-3})
STATE=$TREEGRPO_HOME/layout
mkdir -p "$STATE"
for arm in ${ARMS:-sync async}; do
  stale=0; [ "$arm" = async ] && stale=1
  nvidia-smi dmon -s um -d 1 > "$STATE/dmon_$arm.log" 2>&1 &
  dmon=$!
  start=$SECONDS
  timeout "$limit" python3 -m treegrpo.cli demo --config treegrpo/examples/learning-gpu.toml --no-control \
    "${VLLM[@]}" --set run.max_staleness=$stale > "$OUT/run_$arm.log" 2>&1
  echo "$arm rc=$? in $((SECONDS - start)) s"
  kill "$dmon" 2>/dev/null
  run=$(ls -td "$TREEGRPO_HOME"/runs/*/ 2>/dev/null | head -1)
  echo "$run" > "$STATE/run_$arm.dir"
  tail -3 "$OUT/run_$arm.log"
  mkdir -p "$OUT/logs_$arm" && for f in "$run"logs/*; do tail -c 200000 "$f" > "$OUT/logs_$arm/$(basename "$f")"; done
done
python3 benchmarks/layout_summary.py "$STATE" && cp "$STATE"/* "$OUT/"
