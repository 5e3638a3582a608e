#!/bin/bash
# Issue #20, timer visits: runs of bench.operator_throughput in several trees, in the order given,
# one JSON line per run on stdout with its label, time and the 1-minute load when it started.
#
#   git worktree add --detach /work/wt-visits-base <main before the change>
#   git -C /work/wt-visits-base apply "$PWD/bench/results/visits-probe.patch"  # count its visits
#   cp bench/operator_throughput.py /work/wt-visits-base/bench/
#   bash bench/results/visits-ab.sh old=/work/wt-visits-base new=$PWD new=$PWD old=/work/wt-visits-base \
#     -- --inputs 8000 --keys 100 --latency 0.2 --max-in-flight 100 --store kafka \
#     >> bench/results/visits-ab-20261201.jsonl
#
# The probe counts main's visits and publishes them as the branch does (operator.visits,
# operator.visits_idle); without it the old tree's visits_per_run is null, the rest the same.
set -u
PYTHON=${PYTHON:-/work/main/.venv/bin/python}
export FLINK_AGENTS_CACHE=${FLINK_AGENTS_CACHE:-/work/main/.cache}
export TMPDIR=${TMPDIR:-/work/main/.cache/tmp}
runs=()
while [ "$1" != "--" ]; do runs+=("$1"); shift; done
shift
for run in "${runs[@]}"; do
  label=${run%%=*}
  dir=${run#*=}
  mkdir -p "$dir/.cache"
  load=$(cut -d' ' -f1 /proc/loadavg)
  line=$(cd "$dir" && timeout 900 "$PYTHON" -m bench.operator_throughput "$@" 2>/dev/null | tail -1)
  echo "{\"tree\": \"$label\", \"at\": \"$(date -u +%H:%M:%S)\", \"load_start\": $load, \"result\": ${line:-null}}"
done
