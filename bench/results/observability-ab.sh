#!/bin/bash
# Issue #16's "on vs off" in ONE tree: the operator at 200 ms with the Kafka store in three
# configurations, rotated per round so that none always runs first:
#   off          metrics off (`--metrics off`), no event log
#   metrics      the default: Flink metrics on, no event log
#   metrics+log  metrics on + the JSON-lines event log with payloads (`--event-log file`)
# One JSON line per run on stdout, with the load average when it started:
#
#   bash bench/results/observability-ab.sh ROUNDS >> bench/results/observability-onoff.jsonl
#
# SHAPES picks the workloads (default both): "latency" = 100 keys, bound 100, 8,000 inputs
# (latency bound, issue #20's shape); "cpu" = 1,000 keys, bound 1,000, 10,000 inputs (CPU bound
# on 2 cores). STORE picks the action-state store (default kafka; "none" takes the store's own
# run-to-run spread out of the comparison). The broker must answer on 127.0.0.1:9092.
set -u
ROUNDS=${1:-3}
TREE=${TREE:-$(cd "$(dirname "$0")/../.." && pwd)}
SHAPES=${SHAPES:-"latency cpu"}
STORE=${STORE:-kafka}
PYTHON=${PYTHON:-/work/main/.venv/bin/python}
export FLINK_AGENTS_CACHE=${FLINK_AGENTS_CACHE:-/work/main/.cache}
export TMPDIR=${TMPDIR:-/work/main/.cache/tmp}
CONFIGS=(off metrics metrics+log)

run() {  # round shape config args...
  local round=$1 shape=$2 config=$3 at load line flags
  shift 3
  case $config in
    off) flags="--metrics off" ;;
    metrics) flags="--metrics on" ;;
    metrics+log) flags="--metrics on --event-log file" ;;
  esac
  at=$(date -u +%FT%H:%M:%S)
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  mkdir -p "$TREE/.cache"  # the bench's work folders (a fresh worktree has none)
  # A failed run's error goes to stderr; its line says null.
  # shellcheck disable=SC2086  # $flags is a list of options
  line=$(cd "$TREE" && timeout 900 "$PYTHON" -m bench.operator_throughput "$@" --store "$STORE" \
    $flags | tail -1)
  echo "{\"round\": $round, \"shape\": \"$shape\", \"config\": \"$config\", \"store\": \"$STORE\", \"at\": \"$at\", \"load\": \"$load\", \"result\": ${line:-null}}"
}

for round in $(seq 1 "$ROUNDS"); do
  for shape in $SHAPES; do
    case $shape in
      latency) args="--inputs 8000 --keys 100 --latency 0.2 --max-in-flight 100" ;;
      cpu) args="--inputs 10000 --keys 1000 --latency 0.2 --max-in-flight 1000" ;;
      *) echo "unknown shape $shape (expected latency or cpu)" >&2; exit 2 ;;
    esac
    for i in 0 1 2; do  # round 1 starts with off, round 2 with metrics, round 3 with +log...
      config=${CONFIGS[$(((round - 1 + i) % 3))]}
      # shellcheck disable=SC2086  # $args is a list of options
      run "$round" "$shape" "$config" $args
    done
  done
done
