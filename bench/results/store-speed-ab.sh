#!/bin/bash
# Issue #20 side by side: the tree before (OLD, e.g. a git worktree of main before the change)
# and this tree (NEW, by default the repository holding this script), alternating which goes
# first per round; one JSON line per run on stdout, with the load average when it started.
#
#   git worktree add --detach /work/wt-speed-base <commit before the change>
#   OLD=/work/wt-speed-base bash bench/results/store-speed-ab.sh ROUNDS >> .cache/store-speed-ab.jsonl
#
# POINTS picks the workloads (default both): "200" = 200 ms, 100 keys, bound 100, 8,000 inputs;
# "0" = 0 ms, 1,000 keys, bound 1,000, 10,000 inputs. Per round and point: NEW without a store,
# then both trees with the Kafka store (broker on 127.0.0.1:9092).
set -u
ROUNDS=${1:-3}
OLD=${OLD:?set OLD to the tree before the change (a git worktree)}
NEW=${NEW:-$(cd "$(dirname "$0")/../.." && pwd)}
POINTS=${POINTS:-"200 0"}
PYTHON=${PYTHON:-/work/main/.venv/bin/python}
export FLINK_AGENTS_CACHE=${FLINK_AGENTS_CACHE:-/work/main/.cache}
export TMPDIR=${TMPDIR:-/work/main/.cache/tmp}

run() {  # round tree label args...
  local round=$1 tree=$2 label=$3 at load line
  shift 3
  at=$(date -u +%FT%H:%M:%S)
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  mkdir -p "$tree/.cache"  # the bench's work folders (a fresh worktree has none)
  # A failed run's error goes to stderr; its line says null.
  line=$(cd "$tree" && timeout 900 "$PYTHON" -m bench.operator_throughput "$@" | tail -1)
  echo "{\"round\": $round, \"tree\": \"$label\", \"at\": \"$at\", \"load\": \"$load\", \"result\": ${line:-null}}"
}

for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) -eq 1 ]; then
    first=$OLD; second=$NEW; fl=old; sl=new
  else
    first=$NEW; second=$OLD; fl=new; sl=old
  fi
  for point in $POINTS; do
    case $point in
      200) args="--inputs 8000 --keys 100 --latency 0.2 --max-in-flight 100" ;;
      0) args="--inputs 10000 --keys 1000 --latency 0 --max-in-flight 1000" ;;
      *) echo "unknown point $point (expected 200 or 0)" >&2; exit 2 ;;
    esac
    # shellcheck disable=SC2086  # $args is a list of options
    run "$round" "$NEW" new $args --store none
    # shellcheck disable=SC2086
    run "$round" "$first" "$fl" $args --store kafka
    # shellcheck disable=SC2086
    run "$round" "$second" "$sl" $args --store kafka
  done
done
