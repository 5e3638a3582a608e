#!/usr/bin/env bash
# The cost of metrics + event log at 200 ms with the Kafka store, alternating 3 configurations
# in each round: the tree before observability (d8799b5, `git archive` into $BASE: no metrics,
# no event log), this tree with metrics only, this tree with metrics + the JSON-lines event log.
base=${BASE:-/tmp/o2/base}; new=${NEW:-$(pwd)}; rounds=${ROUNDS:-3}  # CONFIGS: a subset
out=${OUT:-bench/results/observability-ab.jsonl}; : > "$out"
for round in $(seq "$rounds"); do
  for config in ${CONFIGS:-before metrics metrics+log}; do
    dir=$new; flags=""
    [ "$config" = before ] && dir=$base
    [ "$config" = metrics+log ] && flags="--event-log file"
    line=$(cd "$dir" && /work/main/.venv/bin/python -m bench.operator_throughput --inputs 10000 \
      --keys 1000 --latency 0.2 --store kafka $flags 2>/dev/null | tail -1)
    echo "{\"round\": $round, \"config\": \"$config\", \"load\": \"$(cut -d' ' -f1 /proc/loadavg)\", \"result\": $line}" >> "$out"
    echo "$round $config $line" | cut -c1-160
  done
done
