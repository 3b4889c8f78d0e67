#!/usr/bin/env bash
# Steering in a real tracing backend (Arize Phoenix), end to end, and the docs' screenshots:
# docs/img/run-page.png (the worker's /runs/{id}/view) and docs/img/trace-steering.png (the
# run's trace in Phoenix, a steered call's evaluation event open). See scripts/trace_screenshots.py.
#
#   bash scripts/trace_screenshots.sh [--port 9092] [--out docs/img]
#
# Not part of the test suite: Phoenix and its dependencies take ~850 MB and ~80 s to install,
# and ~30 s to start the first time. They go into their own environment, .local/phoenix-venv
# (with the agent side of rb-streams, which the session there runs), so the project's .venv
# stays as it is. Idempotent: the environment is made once (again when PHOENIX_VERSION or
# pyproject.toml changes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { echo "[trace_screenshots] $*" >&2; }

PHOENIX_VERSION="20.26.1"
venv=".local/phoenix-venv"
stamp="$venv/.rb-installed"
want="$PHOENIX_VERSION $(sha256sum pyproject.toml | cut -c1-16)"

[ -x .venv/bin/python ] || bash scripts/bootstrap.sh
bash scripts/install_chromium.sh
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  py=python3
  [ -x "$venv/bin/python" ] || { log "creating $venv"; "$py" -m venv "$venv"; }
  log "installing arize-phoenix $PHOENIX_VERSION and the agent side of rb-streams into $venv (~80 s)"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q "arize-phoenix==$PHOENIX_VERSION" -e .
  echo "$want" > "$stamp"
fi
HF_HUB_OFFLINE=1 exec .venv/bin/python scripts/trace_screenshots.py "$@"
