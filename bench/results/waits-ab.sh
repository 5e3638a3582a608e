#!/bin/bash
# Issue #32: does a run that never waits cost more with the waits machinery? The same
# operator workload on several trees (git worktrees: before waits landed, the merge that landed
# them, now), taking turns: each round starts with the next tree. One JSON line per run on
# stdout, with the tree's label and the load average when it started.
#
#   git worktree add --detach .cache/ab/before 4542f20^1   # main before the waits merge
#   git worktree add --detach .cache/ab/waits 4542f20      # the merge of the waits slice
#   git worktree add --detach .cache/ab/now HEAD
#   TREES="before=.cache/ab/before waits=.cache/ab/waits now=.cache/ab/now" \
#     bash bench/results/waits-ab.sh ROUNDS >> bench/results/waits-ab-20261203.jsonl
#
# The workload: 10,000 inputs on 1,000 keys, 0 ms model latency, 1,000 runs in flight, the
# in-memory store, metrics on (for the JVM's CPU per run), thread mode, parallelism 1.
set -u
ROUNDS=${1:-3}
TREES=${TREES:?set TREES to label=path pairs}
ARGS=${ARGS:-"--inputs 10000 --keys 1000 --latency 0 --max-in-flight 1000 --store memory"}
PYTHON=${PYTHON:-/work/main/.venv/bin/python}
export TMPDIR=${TMPDIR:-/tmp}

read -r -a pairs <<< "$TREES"
count=${#pairs[@]}
for round in $(seq 1 "$ROUNDS"); do
  for i in $(seq 0 $((count - 1))); do
    pair=${pairs[$(((round - 1 + i) % count))]}
    label=${pair%%=*}
    tree=$(cd "${pair#*=}" && pwd)
    at=$(date -u +%FT%H:%M:%S)
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    mkdir -p "$tree/.cache"
    # A failed run's error goes to stderr; its line says null.
    # shellcheck disable=SC2086  # $ARGS is a list of options
    line=$(cd "$tree" && timeout 900 "$PYTHON" -m bench.operator_throughput $ARGS | tail -1)
    echo "{\"round\": $round, \"tree\": \"$label\", \"at\": \"$at\", \"load\": \"$load\", \"result\": ${line:-null}}"
  done
done
