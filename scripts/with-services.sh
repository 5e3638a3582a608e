#!/usr/bin/env bash
# Runs a command with the Kafka broker (and, unless --kafka-only, the standalone Flink cluster) up.
# Services that were already running are reused and left running; the ones started here are
# stopped when the command ends, whatever its outcome. The command's exit code is returned.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

with_flink=1
if [ "${1:-}" = "--kafka-only" ]; then with_flink=0; shift; fi

# Kafka stores refuse to start unsigned: the development secret unless one is given.
FLINK_AGENTS_STORE_SECRET=${FLINK_AGENTS_STORE_SECRET:-$(bash "$here/store-secret.sh")}
export FLINK_AGENTS_STORE_SECRET

started=()
cleanup() {
  local service
  for service in "${started[@]}"; do bash "$here/$service" stop || true; done
}
trap cleanup EXIT INT TERM

if ! bash "$here/kafka.sh" status >/dev/null 2>&1; then
  bash "$here/kafka.sh" start || exit 1
  started+=(kafka.sh)
fi
if [ "$with_flink" = 1 ] && ! bash "$here/flink-cluster.sh" status >/dev/null 2>&1; then
  bash "$here/flink-cluster.sh" start || exit 1
  started+=(flink-cluster.sh)
fi

"$@"
