#!/usr/bin/env bash
# The test command: bootstrap, lint, type-check, then unit + integration tests. The
# integration tests use a local Kafka broker (deploy/kafka/kafka.sh) and start their workers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
bash scripts/install_prometheus.sh >/dev/null
export HF_HUB_OFFLINE=1

# Chromium for the browser tests (integration tier): installed, when missing, in the background
# while lint and the unit tier run (apt-get is done with: bootstrap and Prometheus came first).
chromium_log="$PWD/.local/install_chromium.log"
mkdir -p .local
bash scripts/install_chromium.sh >"$chromium_log" 2>&1 &
chromium_pid=$!
wait_chromium() {
  [ -n "$chromium_pid" ] || return 0
  if ! wait "$chromium_pid"; then echo "installing chromium failed:"; cat "$chromium_log"; exit 1; fi
  cat "$chromium_log"
  chromium_pid=""
}

# The tests' broker (tests/integration/helpers.py: port RB_TEST_KAFKA_PORT, data in
# .local/test-kafka-<port>) starts in the background while ruff and mypy run, instead of after
# them (a JVM start: ~10 s); the tests find it listening, and this script stops it at the end.
port="${RB_TEST_KAFKA_PORT:-19092}"
kdir="$PWD/.local/test-kafka-$port"
klog="$PWD/.local/test-kafka-$port.start.log"
broker_pid="" started_broker=""
stop_broker() {
  [ -n "$started_broker" ] || return 0
  [ -z "$broker_pid" ] || wait "$broker_pid" 2>/dev/null || true
  [ -n "${RB_TEST_KEEP_BROKER:-}" ] || RB_KAFKA_PORT="$port" RB_KAFKA_DIR="$kdir" bash deploy/kafka/kafka.sh stop || true
}
if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  rm -rf "$kdir"
  mkdir -p "$(dirname "$klog")"
  RB_KAFKA_PORT="$port" RB_KAFKA_DIR="$kdir" bash deploy/kafka/kafka.sh start >"$klog" 2>&1 &
  broker_pid=$! started_broker=1
  trap stop_broker EXIT
fi

wait_broker() {
  [ -n "$broker_pid" ] || return 0
  if ! wait "$broker_pid"; then echo "the tests' broker did not start:"; cat "$klog"; exit 1; fi
  cat "$klog"
  broker_pid=""
}

t0=$(date +%s)
if [ "$#" -gt 0 ]; then
  echo "== ruff"; .venv/bin/ruff check streams tests bench && .venv/bin/ruff format --check streams tests bench
  echo "== mypy"; .venv/bin/mypy
  wait_broker
  wait_chromium
  echo "== pytest"
  .venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 "$@"
  echo "test suite took $(( $(date +%s) - t0 ))s"
  exit 0
fi

# ruff and mypy (one core, ~1 min) run niced beside the unit tier instead of before it; their
# output is shown, and a failure stops the script, before the integration tier.
lint_log="$PWD/.local/lint.log"
mkdir -p .local
( nice -n 10 .venv/bin/ruff check streams tests bench && nice -n 10 .venv/bin/ruff format --check streams tests bench \
  && nice -n 10 .venv/bin/mypy ) >"$lint_log" 2>&1 &
lint_pid=$!

# Two tiers, one after the other. The unit tier is CPU-bound and shares nothing: two processes
# (pytest-xdist), one per core. The integration tier shares one broker and session workers,
# and its rebalance and latency bounds want the cores: one process. (Two processes took as
# long, since its workers keep both cores busy, and a worker slowed that much lost a step in a
# rebalance: see docs/development.md.) Both tiers run whatever the first gives; the script
# fails if either did.
unit_rc=0 integration_rc=0
echo "== unit tier"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 -n 2 tests/unit || unit_rc=$?
echo "unit tier took $(( $(date +%s) - t0 ))s"
lint_rc=0
wait "$lint_pid" || lint_rc=$?
echo "== ruff, mypy"; cat "$lint_log"
if [ "$lint_rc" -ne 0 ]; then echo "lint failed (exit $lint_rc)"; exit 1; fi
wait_broker
wait_chromium
echo "== integration tier"
t1=$(date +%s)
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 tests/integration || integration_rc=$?
echo "integration tier took $(( $(date +%s) - t1 ))s"
echo "test suite took $(( $(date +%s) - t0 ))s"
if [ "$unit_rc" -ne 0 ] || [ "$integration_rc" -ne 0 ]; then exit 1; fi
exit 0
