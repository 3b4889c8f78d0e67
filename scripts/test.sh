#!/usr/bin/env bash
# The test command: bootstrap, lint, type-check, then unit + integration tests. The
# integration tests start their own local Kafka broker (deploy/kafka/kafka.sh) and workers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
bash scripts/install_prometheus.sh >/dev/null
export HF_HUB_OFFLINE=1
echo "== ruff"; .venv/bin/ruff check streams tests bench && .venv/bin/ruff format --check streams tests bench
echo "== mypy"; .venv/bin/mypy
echo "== pytest"
t0=$(date +%s)
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 "$@"
echo "test suite took $(( $(date +%s) - t0 ))s"
