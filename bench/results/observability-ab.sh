#!/bin/bash
# Issue #16's "on vs off" in ONE tree: the operator at 200 ms with the Kafka store in three
# configurations, rotated per round so that none always runs first:
#   off          metrics off (`--metrics off`), no event log
#   metrics      the default: Flink metrics on, no event log
#   metrics+log  metrics on + the JSON-lines event log with payloads (`--event-log file`)
# One JSON line per run on stdout, with the load average when it started:
#
#   bash bench/results/observability-ab.sh ROUNDS >> .cache/observability-onoff.jsonl
#
# SHAPES picks the workloads (default both): "latency" = 100 keys, bound 100, 8,000 inputs
# (latency bound, issue #20's shape); "cpu" = 1,000 keys, bound 1,000, 10,000 inputs (CPU bound
# on 2 cores). STORE picks the action-state store (default kafka; "none" takes the store's own
# run-to-run spread out of the comparison). CONFIGS picks the configurations (default all
# three). OLD=/path/to/another/tree runs every configuration in that tree too, right after (or,
# every other round, right before) this one, for a before/after on one machine; each line
# names its tree. The broker must answer on 127.0.0.1:9092.
set -u
ROUNDS=${1:-3}
TREE=${TREE:-$(cd "$(dirname "$0")/../.." && pwd)}
SHAPES=${SHAPES:-"latency cpu"}
STORE=${STORE:-kafka}
PYTHON=${PYTHON:-/work/main/.venv/bin/python}
export FLINK_AGENTS_CACHE=${FLINK_AGENTS_CACHE:-/work/main/.cache}
export TMPDIR=${TMPDIR:-/work/main/.cache/tmp}
OLD=${OLD:-}
read -r -a CONFIGS <<< "${CONFIGS:-off metrics metrics+log}"

run() {  # tree round shape config args...
  local tree=$1 round=$2 shape=$3 config=$4 at load line flags
  shift 4
  case $config in
    off) flags="--metrics off" ;;
    metrics) flags="--metrics on" ;;
    metrics+log) flags="--metrics on --event-log file" ;;
  esac
  at=$(date -u +%FT%H:%M:%S)
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  mkdir -p "$tree/.cache"  # the bench's work folders (a fresh worktree has none)
  # A failed run's error goes to stderr; its line says null.
  # shellcheck disable=SC2086  # $flags is a list of options
  line=$(cd "$tree" && timeout 900 "$PYTHON" -m bench.operator_throughput "$@" --store "$STORE" \
    $flags | tail -1)
  echo "{\"tree\": \"$tree\", \"round\": $round, \"shape\": \"$shape\", \"config\": \"$config\", \"store\": \"$STORE\", \"at\": \"$at\", \"load\": \"$load\", \"result\": ${line:-null}}"
}

for round in $(seq 1 "$ROUNDS"); do
  for shape in $SHAPES; do
    case $shape in
      latency) args="--inputs 8000 --keys 100 --latency 0.2 --max-in-flight 100" ;;
      cpu) args="--inputs 10000 --keys 1000 --latency 0.2 --max-in-flight 1000" ;;
      *) echo "unknown shape $shape (expected latency or cpu)" >&2; exit 2 ;;
    esac
    count=${#CONFIGS[@]}
    for ((i = 0; i < count; i++)); do  # round 1 starts with the first config, round 2 the next...
      config=${CONFIGS[$(((round - 1 + i) % count))]}
      trees=("$TREE")
      if [ -n "$OLD" ]; then  # both trees, the first one alternating per round
        if ((round % 2)); then trees=("$TREE" "$OLD"); else trees=("$OLD" "$TREE"); fi
      fi
      for tree in "${trees[@]}"; do
        # shellcheck disable=SC2086  # $args is a list of options
        run "$tree" "$round" "$shape" "$config" $args
      done
    done
  done
done
