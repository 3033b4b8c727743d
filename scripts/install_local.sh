#!/usr/bin/env bash
# Install the five distributions of this checkout (the core and services/<name>/) editable into the
# current Python, with no index and no dependency resolution: for a machine that already has the
# dependencies (the GPU image: torch, transformers, peft) but no package registry. The services are
# found through their entry points, so a plain PYTHONPATH=$PWD is not enough any more.
#   bash scripts/install_local.sh [PYTHON]      (needs setuptools >= 68 in that Python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-python3}}
"$PY" -m pip install -q --no-deps --no-index --no-build-isolation \
  -e . -e services/sampler -e services/executor -e services/grader -e services/learner
"$PY" -c "from treegrpo.plugins import installed_services as s; print('treegrpo services:', *s())"
