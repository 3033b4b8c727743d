#!/usr/bin/env bash
# Train vs control at the seed's tree shape on one GPU machine: `treegrpo demo --config
# treegrpo/examples/learning-gpu.toml` (demo policy, SFT cached; train arm, paired control, verdict), with the
# GPU's utilisation sampled by nvidia-smi. Results land in $OUT: run.log, dmon.log, report.json,
# report.md and the curves of the train arm's report folder.
#   OUT=/tmp/out bash benchmarks/learning_gpu.sh [TIMEOUT_S]
# On the device machine (no registry) the project's pure dependencies travel as wheels in .whl/ and a
# demo policy trained here in .demo-home/demo/ (both carried, both ignored by git); elsewhere set
# NO_WHEELS=1 after `pip install -e '.[dev]'` and the demo builds its policy (cached) on the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
limit=${1:-560}
if [ -z "${NO_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD:$PWD/services/sampler:$PWD/services/executor:$PWD/services/grader:$PWD/services/learner PATH=/tmp/site/bin:$PATH
fi
export OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
# the services are found by their entry points: register the checkout's five distributions
bash scripts/install_local.sh python3 > "$OUT/install_local.log" 2>&1 || { tail -20 "$OUT/install_local.log"; exit 1; }
export TREEGRPO_HOME=${TREEGRPO_HOME:-/tmp/treegrpo-home}
if [ -d .demo-home/demo ] && [ ! -d "$TREEGRPO_HOME/demo" ]; then
  mkdir -p "$TREEGRPO_HOME" && cp -r .demo-home/demo "$TREEGRPO_HOME/demo"
fi
nvidia-smi dmon -s u -d 5 > "$OUT/dmon.log" 2>&1 &
dmon=$!
start=$SECONDS
timeout "$limit" python3 -m treegrpo.cli demo --config treegrpo/examples/learning-gpu.toml > "$OUT/run.log" 2>&1
echo "demo rc=$? in $((SECONDS - start)) s"
kill "$dmon" 2>/dev/null
grep -E "verdict|curves|[Ee]rror|took|nodes" "$OUT/run.log" | tail -12
rep=$(dirname "$(ls -t "$TREEGRPO_HOME"/runs/*/report/learning_vs_control.png 2>/dev/null | head -1)")
[ -d "$rep" ] || rep=$(ls -td "$TREEGRPO_HOME"/runs/*/report 2>/dev/null | head -1)
echo "report: $rep"; ls "$rep" 2>/dev/null
for f in report.json report.md learning_vs_control.png; do [ -f "$rep/$f" ] && cp "$rep/$f" "$OUT/"; done
