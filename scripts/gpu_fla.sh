#!/usr/bin/env bash
# Triton 3.7.1 + flash-linear-attention 0.6.0 (+ fla-core) onto a GPU machine that has torch 2.11 and
# Triton 3.6 but no package registry, through a channel that takes ~64 MiB per command. fla's gated
# backward refuses Triton < 3.7.1 on Hopper (wrong gradients there, fla #640); see docs/LEARNER.md.
#
#   here:  scripts/gpu_fla.sh prepare [PIECE_MIB]   # download, trim Triton, tar.xz, split: .fla1 .. .flaN
#   there: scripts/gpu_fla.sh stash .flaK           # one piece per command, kept under $FLA_DIR
#   there: scripts/gpu_fla.sh install               # join, sha256 check, unpack, pip install into $SITE
#          export PYTHONPATH=$SITE:$PYTHONPATH
#
# Triton's wheel is 189 MiB (deflate); without the pieces a Hopper learner never loads (the Blackwell
# ptxas, CUPTI and the proton profiler, an instrumentation test library, nvdisasm) and re-packed
# uncompressed inside one xz stream it travels as ~90 MiB: two pieces instead of five.
# A box with a registry needs none of this: `pip install triton==3.7.1 flash-linear-attention==0.6.0`.
set -euo pipefail
ORIG=$PWD
cd "$(dirname "$0")/.."
WORK=${GPU_FLA_WORK:-/tmp/treegrpo-gpu-fla}
FLA_DIR=${FLA_DIR:-/root/fla}
SITE=${SITE:-/root/site}
PY=${PYTHON:-python3}
WHEELS=(triton==3.7.1 flash-linear-attention==0.6.0 fla-core==0.6.0)

prepare() {
  local piece_mib=${1:-46}
  local start=$SECONDS
  rm -rf "$WORK" && mkdir -p "$WORK/dl" "$WORK/pack"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    -d "$WORK/dl" "${WHEELS[@]}"
  for w in "$WORK"/dl/*.whl; do
    "$PY" scripts/_gpu_wheels.py stored "$w" "$WORK/pack"
  done
  "$PY" scripts/_gpu_wheels.py check "$WORK/pack"
  tar -C "$WORK/pack" -cf - . | xz -T0 -6 > "$WORK/wheels.tar.xz"
  (cd "$WORK" && sha256sum wheels.tar.xz > SHA256SUMS)
  rm -rf .fla[0-9]*
  split -b "${piece_mib}M" -d -a 1 "$WORK/wheels.tar.xz" "$WORK/part."
  local k=1
  for part in "$WORK"/part.*; do
    mkdir -p ".fla$k" && mv "$part" ".fla$k/" && cp "$WORK/SHA256SUMS" ".fla$k/"
    k=$((k + 1))
  done
  local exclude
  exclude="$(git rev-parse --git-common-dir)/info/exclude"
  grep -qxF '/.fla*/' "$exclude" 2>/dev/null || echo '/.fla*/' >> "$exclude"
  du -sh .fla[0-9]* "$WORK/wheels.tar.xz"
  echo "prepared $((k - 1)) pieces in $((SECONDS - start)) s: send one per command (carry .flaK)"
}

stash() {
  local src
  src=$(cd "$ORIG" && cd "$1" && pwd)
  mkdir -p "$FLA_DIR"
  cp "$src"/part.* "$src"/SHA256SUMS "$FLA_DIR/"
  ls -l "$FLA_DIR"
}

install() {
  local start=$SECONDS
  cd "$FLA_DIR"
  cat part.* > wheels.tar.xz
  sha256sum -c SHA256SUMS
  rm -rf whl && mkdir whl && xz -dc wheels.tar.xz | tar -C whl -xf - && rm -f wheels.tar.xz
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" whl/*.whl
  echo "installed $(ls whl | wc -l) wheels into $SITE in $((SECONDS - start)) s"
  echo "export PYTHONPATH=$SITE:\$PYTHONPATH"
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  stash) stash "$2" ;;
  install) install ;;
  *) echo "usage: $0 prepare [PIECE_MIB] | stash DIR | install" >&2; exit 2 ;;
esac
