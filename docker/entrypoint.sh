#!/usr/bin/env bash
# The image's entry point (/docker-entrypoint.sh):
#
#   jobmanager [-D key=value ...]    a standalone-session JobManager in the foreground
#   taskmanager [-D key=value ...]   a TaskManager in the foreground
#   help                             this text
#   anything else                    run as given (flink-agents submit ..., python -m ...,
#                                    the Flink Kubernetes Operator's kubernetes-*.sh commands)
#
# FLINK_PROPERTIES (lines of `key: value`, as the official Flink images read it) adds settings
# to jobmanager and taskmanager, ahead of the -D arguments given. Every command runs with jemalloc
# preloaded (it gives memory back that glibc's malloc keeps after job restarts: docs/deployment.md,
# "Memory"); DISABLE_JEMALLOC=true keeps glibc's.
set -euo pipefail

if [ "${DISABLE_JEMALLOC:-false}" != true ]; then
  jemalloc=$(echo /usr/lib/*-linux-gnu/libjemalloc.so.2)
  [ -f "$jemalloc" ] || { echo "entrypoint: no libjemalloc.so.2 in the image" >&2; exit 1; }
  export LD_PRELOAD="$jemalloc${LD_PRELOAD:+:$LD_PRELOAD}"
fi

properties=()
while IFS= read -r line; do
  if [[ "$line" =~ ^[[:space:]]*([^:#[:space:]]+):[[:space:]]*(.*[^[:space:]])[[:space:]]*$ ]]; then
    properties+=(-D "${BASH_REMATCH[1]}=${BASH_REMATCH[2]}")
  fi
done <<<"${FLINK_PROPERTIES:-}"

case "${1:-help}" in
  jobmanager) shift; exec "$FLINK_HOME/bin/jobmanager.sh" start-foreground "${properties[@]}" "$@" ;;
  taskmanager) shift; exec "$FLINK_HOME/bin/taskmanager.sh" start-foreground "${properties[@]}" "$@" ;;
  help) sed -n '2,13p' "$0" | cut -c3- ;;
  *) exec "$@" ;;
esac
