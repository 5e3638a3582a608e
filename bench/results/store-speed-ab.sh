#!/bin/bash
# Issue #20 side by side: the tree before (main, in a git worktree at $BASE) and the store-speed
# tree (a snapshot worktree at $NEW), alternating per round; one JSON line per run on stdout.
#   bash bench/results/store-speed-ab.sh 3 > bench/results/store-speed-ab.jsonl
set -u
ROUNDS=${1:-3}
BASE=${BASE:-/work/wt-store-base}
NEW=${NEW:-/work/wt-store-snap}
run() {  # tree label args...
  local tree=$1 label=$2; shift 2
  local line
  line=$(cd "$tree" && FLINK_AGENTS_CACHE=/work/main/.cache TMPDIR=/work/main/.cache/tmp \
    timeout 600 /work/main/.venv/bin/python -m bench.operator_throughput "$@" 2>/dev/null | tail -1)
  echo "{\"round\": $round, \"tree\": \"$label\", \"at\": \"$(date -u +%H:%M:%S)\", \"result\": ${line:-null}}"
}
P200="--inputs 8000 --keys 100 --latency 0.2 --max-in-flight 100"
P0="--inputs 10000 --keys 1000 --latency 0 --max-in-flight 1000"
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) -eq 1 ]; then first=$BASE; second=$NEW; fl=old; sl=new; else first=$NEW; second=$BASE; fl=new; sl=old; fi
  run "$NEW" new $P200 --store none
  run "$first" $fl $P200 --store kafka
  run "$second" $sl $P200 --store kafka
  run "$NEW" new $P0 --store none
  run "$first" $fl $P0 --store kafka
  run "$second" $sl $P0 --store kafka
done
