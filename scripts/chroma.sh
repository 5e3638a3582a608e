#!/usr/bin/env bash
# Development Chroma server (the vector store of docs/retrieval.md), single node, on loopback.
#
#   scripts/chroma.sh start    start the server, wait until its heartbeat answers
#   scripts/chroma.sh stop     stop the server started by this script (by PID)
#   scripts/chroma.sh status   exit 0 when the server answers
#
# The server is the `chroma` command of the `chromadb` package (the `retrieval` extra): a small
# native process. Environment: CHROMA_PORT (default 8000), CHROMA_BIN (default: chroma next to
# the project's Python, else on PATH), FLINK_AGENTS_CACHE (default <repo>/.cache),
# CHROMA_DATA_DIR (default $FLINK_AGENTS_CACHE/chroma/data-$CHROMA_PORT).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

port=${CHROMA_PORT:-8000}
cache=${FLINK_AGENTS_CACHE:-$repo/.cache}
run_dir="$cache/chroma/run-$port"
data_dir=${CHROMA_DATA_DIR:-$cache/chroma/data-$port}
pid_file="$run_dir/chroma.pid"
log_file="$run_dir/chroma.out"

name=server

log() { echo "chroma.sh: $*" >&2; }
# shellcheck source=scripts/service-lib.sh
source "$here/service-lib.sh"

chroma_bin() {
  if [ -n "${CHROMA_BIN:-}" ]; then
    echo "$CHROMA_BIN"
  elif [ -x "$repo/.venv/bin/chroma" ]; then
    echo "$repo/.venv/bin/chroma"
  elif command -v chroma >/dev/null; then
    command -v chroma
  else
    log "no chroma command: install the extra (pip install -e '.[retrieval]') or set CHROMA_BIN"
    exit 1
  fi
}

ready() {
  curl -sf -o /dev/null "http://127.0.0.1:$port/api/v2/heartbeat"
}

start() {
  already_running && return 0
  refuse_taken_ports "$port"
  local bin
  bin=$(chroma_bin)
  mkdir -p "$run_dir" "$data_dir"
  log "starting server on 127.0.0.1:$port (data $data_dir, log $log_file)"
  # Telemetry off: nothing leaves the machine.
  ANONYMIZED_TELEMETRY=False nohup "$bin" run --path "$data_dir" --host 127.0.0.1 --port "$port" \
    >"$log_file" 2>&1 </dev/null &
  await_started $!
}

case "${1:-}" in
  start) start ;;
  stop) stop_service 10 ;;
  status) service_status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
