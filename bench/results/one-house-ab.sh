#!/usr/bin/env bash
# Old tree (828b698) against new (main), alternating, 3 rounds, 0 ms and 200 ms, Kafka store.
out=${OUT:-bench/results/one-house-ab.jsonl}; : > $out
for round in 1 2 3; do
  for lat in 0 0.2; do
    for tree in old new; do
      dir=/work/main; [ $tree = old ] && dir=/work/wt-old
      line=$(cd $dir && FLINK_AGENTS_CACHE=/work/main/.cache TMPDIR=/work/main/.cache/tmp /work/main/.venv/bin/python -m bench.operator_throughput --inputs 10000 --keys 1000 --latency $lat --store kafka 2>/dev/null | tail -1)
      echo "{\"round\": $round, \"tree\": \"$tree\", \"latency\": $lat, \"result\": $line}" >> $out
      echo "$round $tree $lat $line" | cut -c1-200
    done
  done
done
