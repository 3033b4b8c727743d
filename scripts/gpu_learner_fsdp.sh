#!/usr/bin/env bash
# The sharded learner's GPU measurements in one command, from the checkout root on the GPU machine:
#   bash scripts/gpu_learner_fsdp.sh              # results in $OUT (or out/learner_fsdp)
# One GPU: the 8B one-device baseline, the 8B step sharded over one rank, the 27B-class plan on one
# rank (about 5 minutes on an H200). N GPUs: the same phases with N ranks, then the 2-GPU tests.
# Needs only what the GPU image has (torch, transformers, peft); NVLink multicast stays off.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD:$PWD/services/sampler:$PWD/services/executor:$PWD/services/grader:$PWD/services/learner${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-out/learner_fsdp}"
mkdir -p "$OUT"
python3 -c 'import torch; print("gpus:", torch.cuda.device_count(), torch.__version__)'
python3 benchmarks/learner_fsdp.py --out "$OUT" "$@" 2>&1 | grep -v "Loading weights" | tee "$OUT/learner_fsdp.log"
if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_learner_fsdp_gpu.py 2>&1 | tee "$OUT/gpu_tests.log" || true
fi
