#!/usr/bin/env bash
# Make headless Chromium available: the browser tests (tests/integration/test_run_page_browser.py)
# load run pages in it, and scripts/trace_screenshots.sh takes the docs' screenshots with it.
# Idempotent: does nothing when `chromium` is on PATH. Otherwise installs Debian's `chromium`
# package with apt-get (~30 s on a fresh machine).
set -euo pipefail

log() { echo "[install_chromium] $*" >&2; }
command -v chromium >/dev/null && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { log "not root and no sudo: install the 'chromium' package yourself"; exit 2; }
  SUDO="sudo"
fi
command -v apt-get >/dev/null || { log "chromium missing and no apt-get: install Chromium with your package manager"; exit 2; }
log "installing Debian package 'chromium' with apt-get"
$SUDO apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null || { log "apt-get installed no 'chromium' command"; exit 2; }
log "$(chromium --version 2>/dev/null | head -1)"
