#!/usr/bin/env bash
# Issue 23's GPU measurements, in four commands on one warm device machine (each < 10 minutes; the
# staged wheels live in /root/fla and /root/site only while the machine stays warm between them).
# Run from a copy of the checkout holding `today/` = the learner before this change
# (`git archive 01d1c07 treegrpo benchmarks/learner_gpu.py | tar -x -C today`), with the pieces of
# `scripts/gpu_fla.sh prepare` beside it (../.fla1, ../.fla2):
#   bash benchmarks/learner_hybrid_gpu.sh stage1   # piece 1; Qwen3.5-9B 16x2048: today's path, ours (torch)
#   bash benchmarks/learner_hybrid_gpu.sh stage2   # piece 2, install; gpu tests; 9B on fla: MFU, shared, head
#   bash benchmarks/learner_hybrid_gpu.sh stage3   # Qwen3.6-27B shape on fla, one device: 8x8192, 4x16384
#   bash benchmarks/learner_hybrid_gpu.sh stage4   # the same model through FSDP2 over one rank
#   bash benchmarks/learner_hybrid_gpu.sh repeat   # gpu tests again; 9B rows again (a second run), more shapes
# Results (JSON, logs) in $OUT.
set -uo pipefail
OUT=${OUT:-out/hybrid}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OURS="$PWD:$PWD/services/learner"
SITE=${SITE:-/root/site}
T0=$SECONDS
left() { echo $((${LIMIT:-590} - (SECONDS - T0))); }

with_fla() {
  [ -f "$SITE/triton/__init__.py" ] || { echo "fla not installed in $SITE (machine went cold?)"; exit 3; }
  export PYTHONPATH="$SITE:$OURS"
}

gpu_tests() {  # --noconftest: tests/conftest.py imports the core's pydantic modules, not on the image
  TG_GPU_REPORT="$OUT/gdn_exactness.json" timeout 330 python3 -m pytest -q -s -p no:cacheprovider --noconftest \
    -m gpu tests/gpu/test_learner_gdn_gpu.py tests/gpu/test_learner_gpu.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -25
}

stage1() {
  bash scripts/gpu_fla.sh stash ../.fla1
  nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv
  (cd today && PYTHONPATH=$PWD python3 benchmarks/learner_gpu.py --part qwen35 --tag today_9b --out "$OUT" \
    --steps 2 --budgets 8192 --batches 16x2048 --skip-naive 2>&1 | grep -v "falling back")
  PYTHONPATH=$OURS python3 benchmarks/learner_hybrid_gpu.py --shape qwen35-9b --backend torch --phases mfu \
    --budgets 8192 --steps 2 --tag 9b_torch --out "$OUT" --deadline "$(left)" 2>&1 | grep -v "falling back"
}

stage2() {
  bash scripts/gpu_fla.sh stash ../.fla2 && bash scripts/gpu_fla.sh install || exit 3
  with_fla
  python3 -c 'import torch, triton, fla, transformers; print(torch.__version__, triton.__version__, fla.__version__, transformers.__version__)'
  gpu_tests
  python3 benchmarks/learner_hybrid_gpu.py --shape qwen35-9b --backend fla --phases mfu shared head \
    --budgets 8192 16384 --shared 4096x1024 --steps 2 --today today --tag 9b_fla --out "$OUT" \
    --deadline "$(($(left) - 25))" --reserve 40
  tar -C ~/.triton -cf - cache | xz -T0 -3 > "$OUT/triton_cache.tar.xz"  # fla's compiled kernels, for the record
}

stage3() {
  with_fla
  python3 benchmarks/learner_hybrid_gpu.py --shape qwen36-27b --backend fla --phases fit --ckpt-budgets 16384 \
    --budgets 4096 --steps 2 --tag 27b_fla --out "$OUT" --deadline "$(($(left) - 10))" --reserve 90
}

stage4() {
  with_fla
  # shellcheck disable=SC2086  # SIZES is a list
  timeout "$(($(left) - 10))" python3 benchmarks/learner_fsdp.py --parts 27b-hybrid --sizes-27b ${SIZES:-8x8192 4x16384} \
    --steps-27b 1 --out "$OUT/fsdp" 2>&1 | grep -v "Loading weights"
}

repeat() {  # a second run of the 9B rows (today's path and ours), more shared-prompt shapes
  with_fla
  gpu_tests
  (cd today && PYTHONPATH=$PWD python3 benchmarks/learner_gpu.py --part qwen35 --tag today_9b_run2 --out "$OUT" \
    --steps 2 --budgets 8192 --batches 16x2048 --skip-naive 2>&1 | grep -v "falling back")
  python3 benchmarks/learner_hybrid_gpu.py --shape qwen35-9b --backend fla --phases mfu shared --budgets 8192 \
    --shared 4096x1024 2048x512 2048x2048 --steps 2 --tag 9b_fla_run2 --out "$OUT" --deadline "$(left)" --reserve 30
}

"$@"
