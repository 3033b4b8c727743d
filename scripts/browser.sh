#!/usr/bin/env bash
# Debian's Chromium (+ chromedriver) for the report explorer's browser test and benchmark
# (tests/e2e/test_report_explorer_browser.py, benchmarks/report_html.py). Playwright drives it
# through its Python wheel's own driver (the dev extra); `playwright install` is never run: the
# browser comes from the distribution, like every other system package here. Idempotent: nothing
# happens when /usr/bin/chromium is there.
# Usage: scripts/browser.sh [--strict]   (--strict: fail when it cannot install; `make test-slow`)
set -euo pipefail
[ -x /usr/bin/chromium ] && { echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present)"; exit 0; }
SUDO=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    echo "chromium is missing and installing it needs root: apt-get install chromium chromium-driver" >&2
    [ "${1:-}" = --strict ] && exit 1
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends chromium chromium-driver
/usr/bin/chromium --version
