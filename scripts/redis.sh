#!/usr/bin/env bash
# Development Redis server: the ledger of cross-key budgets (docs/budgets.md), single node, on
# loopback, appending every write to its log (fsync once a second).
#
#   scripts/redis.sh start    start the server, wait until it answers PING
#   scripts/redis.sh stop     stop the server started by this script (by PID)
#   scripts/redis.sh status   exit 0 when the server answers
#
# The server is Debian's `redis-server` (apt-get install redis-server; .ci/run installs it).
# Environment: REDIS_PORT (default 6379), FLINK_AGENTS_CACHE (default <repo>/.cache),
# REDIS_DATA_DIR (default $FLINK_AGENTS_CACHE/redis/data-$REDIS_PORT).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

port=${REDIS_PORT:-6379}
cache=${FLINK_AGENTS_CACHE:-$repo/.cache}
run_dir="$cache/redis/run-$port"
data_dir=${REDIS_DATA_DIR:-$cache/redis/data-$port}
pid_file="$run_dir/redis.pid"
log_file="$run_dir/redis.out"

name=server

log() { echo "redis.sh: $*" >&2; }
# shellcheck source=scripts/service-lib.sh
source "$here/service-lib.sh"

ready() {
  [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ]
}

start() {
  already_running && return 0
  if ! command -v redis-server >/dev/null; then
    log "no redis-server: install Debian's package (apt-get install redis-server)"
    exit 1
  fi
  refuse_taken_ports "$port"
  mkdir -p "$run_dir" "$data_dir"
  log "starting server on 127.0.0.1:$port (data $data_dir, log $log_file)"
  nohup redis-server --bind 127.0.0.1 --port "$port" --dir "$data_dir" --save "" \
    --appendonly yes --appendfsync everysec --daemonize no \
    >"$log_file" 2>&1 </dev/null &
  await_started $!
}

case "${1:-}" in
  start) start ;;
  stop) stop_service 10 ;;
  status) service_status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
