#!/usr/bin/env bash
# A cluster of containers from the project image (scripts/image.sh) on the host network: a Kafka
# broker, a Flink JobManager and TaskManagers of one slot each (two, or CLUSTER_TASKMANAGERS).
#
#   scripts/containers.sh up                   start the containers; waits until every slot is free
#   scripts/containers.sh down                 remove every container of the cluster and its folder
#   scripts/containers.sh status               exit 0 when the REST API answers with all TaskManagers
#   scripts/containers.sh kill-taskmanager N   kill -9 TaskManager N (1, 2, ...): the container stops
#   scripts/containers.sh start-taskmanager N  start TaskManager N's container again
#   scripts/containers.sh pid N                the host PID of TaskManager N's JVM (the container's init)
#   scripts/containers.sh submit SPEC [ARGS]   `flink-agents submit SPEC --jobmanager ... ARGS` in a
#                                              container of the image (SPEC's folder mounted at its path)
#
# The ports are not the defaults, so the cluster runs beside a broker on 9092 and a standalone
# Flink cluster on 8081/6123. Environment: CLUSTER_KAFKA_PORT (19092; its controller one above),
# CLUSTER_REST_PORT (18081), CLUSTER_RPC_PORT (16123; the JobManager's blob server one above,
# TaskManager N's RPC and data ports at +2N, +2N+1), CLUSTER_TASKMANAGERS (2; each of one slot),
# IMAGE (flink-agents:0.1.0), CONTAINER_ENGINE. Give the same CLUSTER_* to every command of a cluster.
# Checkpoints are on a folder every container mounts at /flink-data; logs in its log/.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/container-engine.sh
source "$here/container-engine.sh"
# shellcheck source=scripts/versions.sh
source "$here/versions.sh"

image=${IMAGE:-flink-agents:0.1.0}
kafka_port=${CLUSTER_KAFKA_PORT:-19092}
rest_port=${CLUSTER_REST_PORT:-18081}
rpc_port=${CLUSTER_RPC_PORT:-16123}
taskmanagers=${CLUSTER_TASKMANAGERS:-2}
case "$taskmanagers" in
  [1-9] | [1-9][0-9]) ;;
  *) echo "containers.sh: CLUSTER_TASKMANAGERS is a number from 1 to 99, not '$taskmanagers'" >&2; exit 2 ;;
esac
cache=${FLINK_AGENTS_CACHE:-$repo/.cache}
base="$cache/containers/cluster-$rest_port"
name="flink-agents-$rest_port"   # container names: $name-broker, -jobmanager, -taskmanager-N
label="flink-agents.cluster=$rest_port"

log() { echo "containers.sh: $*" >&2; }

# The TaskManagers open the jobs' Kafka stores, which sign their records: the development secret
# unless one is given (scripts/store-secret.sh). Containers get it by name (-e NAME), so its value
# is on no command line.
FLINK_AGENTS_STORE_SECRET=${FLINK_AGENTS_STORE_SECRET:-$(bash "$here/store-secret.sh")}
export FLINK_AGENTS_STORE_SECRET

container_engine_pick "$repo"

run() {  # run -d a container of the cluster: NAME, then engine run options and arguments
  local container=$1
  shift
  "${engine[@]}" run -d --name "$name-$container" --label "$label" --network host \
    -v "$base/data:/flink-data" -v "$base/log:/flink-logs" -e FLINK_LOG_DIR=/flink-logs \
    -e "FLINK_IDENT_STRING=$container" -e FLINK_AGENTS_STORE_SECRET "$@" >/dev/null
}

# pekko.startup-timeout: the RPC system's start may take longer than its default 10 s on a busy
# machine (seen at a load average of 21 on 2 cores: the JobManager exited, "Could not create actor
# system").
flink_settings=(
  -D jobmanager.rpc.address=127.0.0.1 -D "jobmanager.rpc.port=$rpc_port"
  -D heartbeat.timeout=10000 -D heartbeat.interval=2000 -D pekko.startup-timeout=60s
)

start_broker() {
  local lib="$cache/kafka/lib-$KAFKA_VERSION"
  [ -f "$lib/.complete" ] || bash "$here/kafka.sh" fetch
  # scripts/kafka.sh in the container, its cache on the cluster's folder, the jars read-only.
  run broker -v "$here:/opt/flink-agents-scripts:ro" -v "$base/kafka:/kafka-cache/kafka" \
    -v "$lib:/kafka-cache/kafka/lib-$KAFKA_VERSION:ro" -e FLINK_AGENTS_CACHE=/kafka-cache \
    -e "KAFKA_PORT=$kafka_port" "$image" bash /opt/flink-agents-scripts/kafka.sh foreground
}

start_jobmanager() {
  run jobmanager "$image" jobmanager "${flink_settings[@]}" \
    -D jobmanager.bind-host=127.0.0.1 -D "blob.server.port=$((rpc_port + 1))" \
    -D rest.address=127.0.0.1 -D rest.bind-address=127.0.0.1 -D "rest.port=$rest_port" \
    -D jobmanager.memory.process.size=768m
}

start_new_taskmanager() {
  local n=$1
  run "taskmanager-$n" "$image" taskmanager "${flink_settings[@]}" \
    -D taskmanager.host=127.0.0.1 -D taskmanager.bind-host=127.0.0.1 \
    -D "taskmanager.rpc.port=$((rpc_port + 2 * n))" -D "taskmanager.data.port=$((rpc_port + 2 * n + 1))" \
    -D taskmanager.numberOfTaskSlots=1 -D taskmanager.memory.process.size=1280m
}

overview() {  # the REST /overview field $1, or nothing
  python3 -c "
import json, sys, urllib.request
with urllib.request.urlopen('http://127.0.0.1:$rest_port/overview', timeout=2) as r:
    print(json.load(r)['$1'])
" 2>/dev/null || true
}

broker_ready() { (exec 3<>"/dev/tcp/127.0.0.1/$kafka_port") 2>/dev/null; }

wait_until() {  # wait_until WHAT SECONDS COMMAND...: poll the command every half second
  local what=$1 seconds=$2
  shift 2
  for _ in $(seq 1 $((seconds * 2))); do
    "$@" && return 0
    sleep 0.5
  done
  log "$what not within $seconds s; containers:"
  "${engine[@]}" ps -a --filter "label=$label" >&2
  log "logs in $base/log, and: ${engine[*]} logs $name-<container>"
  return 1
}

slots_free() { [ "$(overview slots-available)" = "${1:-2}" ]; }

refuse_taken_ports() {
  local port
  for port in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      log "127.0.0.1:$port is in use: another service holds it (see CLUSTER_*_PORT in $0)"
      exit 1
    fi
  done
}

up() {
  if [ -n "$("${engine[@]}" ps -q --filter "label=$label")" ]; then
    log "already up (containers labelled $label); scripts/containers.sh down first"
    return 0
  fi
  "${engine[@]}" image inspect "$image" >/dev/null 2>&1 \
    || { log "no image $image: run 'make image' first"; exit 1; }
  refuse_taken_ports "$kafka_port" "$((kafka_port + 1))" "$rest_port" "$rpc_port"
  local started=$SECONDS
  rm -rf "$base"
  mkdir -p "$base/data/checkpoints" "$base/log" "$base/kafka"
  chmod -R a+rwx "$base"   # the image's user (uid 9999) writes there
  start_broker
  start_jobmanager
  local n
  for n in $(seq 1 "$taskmanagers"); do start_new_taskmanager "$n"; done
  wait_until "the broker on 127.0.0.1:$kafka_port" 120 broker_ready
  wait_until "$taskmanagers free TaskManager slots on http://127.0.0.1:$rest_port" 180 \
    slots_free "$taskmanagers"
  log "up in $((SECONDS - started)) s: broker 127.0.0.1:$kafka_port, REST/Web UI" \
    "http://127.0.0.1:$rest_port, $taskmanagers TaskManagers (1 slot each); logs in $base/log"
}

down() {
  local ids attempt
  # Twice: podman refuses to remove a container that exited while it was being killed
  # ("container state improper: stopped") and removes it the second time.
  for attempt in 1 2; do
    ids=$("${engine[@]}" ps -aq --filter "label=$label")
    [ -n "$ids" ] || break
    # shellcheck disable=SC2086  # one id per word
    "${engine[@]}" rm -f -t 5 $ids >/dev/null && break
    [ "$attempt" = 1 ] || exit 1
  done
  rm -rf "$base"
  log "down: no container labelled $label left"
}

status() {
  local registered
  registered=$(overview taskmanagers)
  "${engine[@]}" ps -a --filter "label=$label" --format '{{.Names}} {{.Status}}'
  [ "$registered" = "$taskmanagers" ] && broker_ready \
    && { echo "up: $taskmanagers TaskManagers"; return 0; }
  echo "not up (TaskManagers registered: ${registered:-none} of $taskmanagers)"
  return 1
}

taskmanager_number() {
  if [[ "${1:-}" =~ ^[1-9][0-9]?$ ]] && [ "$1" -le "$taskmanagers" ]; then
    echo "$1"
  else
    log "which TaskManager: 1 to $taskmanagers"
    exit 2
  fi
}

submit() {
  local spec folder
  spec=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  folder=$(dirname "$spec")
  shift
  "${engine[@]}" run --rm --network host --label "$label" -v "$folder:$folder:ro" \
    -v "$base/data:/flink-data" -e FLINK_AGENTS_STORE_SECRET "$image" \
    flink-agents submit "$spec" --jobmanager "127.0.0.1:$rest_port" "$@"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  kill-taskmanager)
    n=$(taskmanager_number "${2:-}")
    "${engine[@]}" kill -s KILL "$name-taskmanager-$n" >/dev/null
    ;;
  start-taskmanager)
    n=$(taskmanager_number "${2:-}")
    "${engine[@]}" start "$name-taskmanager-$n" >/dev/null
    ;;
  pid)
    n=$(taskmanager_number "${2:-}")
    "${engine[@]}" inspect -f '{{.State.Pid}}' "$name-taskmanager-$n"
    ;;
  submit) shift; submit "$@" ;;
  *) echo "usage: $0 up|down|status|kill-taskmanager N|start-taskmanager N|pid N|submit SPEC [ARGS]" >&2; exit 2 ;;
esac
