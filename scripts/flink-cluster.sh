#!/usr/bin/env bash
# Standalone Flink cluster (one JobManager, one TaskManager) from the apache-flink package's own bin/,
# on loopback, with small memory and its own conf/lib/log/pid folders under the project cache.
#
#   scripts/flink-cluster.sh start               JobManager + one TaskManager; waits until a slot is free
#   scripts/flink-cluster.sh stop                stop every process this script started (by PID)
#   scripts/flink-cluster.sh status              exit 0 when the REST API answers with a registered TaskManager
#   scripts/flink-cluster.sh start-taskmanager   add one TaskManager (e.g. after killing one); waits
#                                                for a free slot unless --no-wait (a restarting job
#                                                takes the slot at once)
#   scripts/flink-cluster.sh kill-taskmanager    kill -9 the TaskManagers (failover tests)
#   scripts/flink-cluster.sh env                 print FLINK_HOME/FLINK_CONF_DIR/... for `flink run`
#
# Environment: FLINK_REST_PORT (default 8081), FLINK_RPC_PORT (default 6123), PYTHON (default <repo>/.venv/bin/python),
# FLINK_AGENTS_CACHE (default <repo>/.cache), FLINK_TM_SLOTS (slots per TaskManager, default 2; with 1,
# parallel subtasks land in separate TaskManagers, so thread mode gives each its own interpreter),
# FLINK_HEARTBEAT_TIMEOUT_MS (default 10000: how long a silent TaskManager, e.g. a SIGSTOPped one, counts as alive),
# MALLOC_ARENA_MAX (default 2: glibc malloc arenas of the JobManager and TaskManagers),
# FLINK_MALLOC (glibc, the default, or jemalloc: the JobManager's and TaskManagers' allocator; jemalloc
# needs libjemalloc.so.2, Debian's libjemalloc2),
# FLINK_TM_JAVA_OPTS (extra JVM options of the TaskManagers, e.g. -XX:NativeMemoryTracking=summary).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/versions.sh
source "$here/versions.sh"

python=${PYTHON:-$repo/.venv/bin/python}
rest_port=${FLINK_REST_PORT:-8081}
rpc_port=${FLINK_RPC_PORT:-6123}
tm_slots=${FLINK_TM_SLOTS:-2}
tm_java_opts=${FLINK_TM_JAVA_OPTS:-}
heartbeat_timeout_ms=${FLINK_HEARTBEAT_TIMEOUT_MS:-10000}
cache=${FLINK_AGENTS_CACHE:-$repo/.cache}
base="$cache/flink/cluster-$rest_port"

log() { echo "flink-cluster.sh: $*" >&2; }
name="Flink cluster"
# shellcheck source=scripts/service-lib.sh
source "$here/service-lib.sh"

[ -x "$python" ] || { log "no Python at $python: run 'make install' first"; exit 1; }
flink_home=$("$python" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')
flink_version=$("$python" -c 'from pyflink.version import __version__; print(__version__)')
site_packages=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

export FLINK_HOME="$flink_home"
export FLINK_CONF_DIR="$base/conf"
export FLINK_LIB_DIR="$base/lib"
export FLINK_LOG_DIR="$base/log"
export FLINK_PID_DIR="$base/pid"
# The TaskManagers' Python workers open the jobs' Kafka stores: the development secret unless
# one is given (scripts/store-secret.sh).
FLINK_AGENTS_STORE_SECRET=${FLINK_AGENTS_STORE_SECRET:-$(bash "$here/store-secret.sh")}
export FLINK_AGENTS_STORE_SECRET
export JAVA_HOME=${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}
# glibc gives each new thread a malloc arena (up to 8 per core), which keeps freed memory: in
# thread mode each restart of the job runs Python on a new task thread (docs/deployment.md,
# "Memory": the RSS growth per restart the soak saw is not gone with it).
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
case ${FLINK_MALLOC:-glibc} in
  glibc) ;;
  jemalloc)
    jemalloc=
    for candidate in /usr/lib/*-linux-gnu/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2 \
      /usr/lib/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2; do
      [ -f "$candidate" ] && { jemalloc=$candidate; break; }
    done
    [ -n "$jemalloc" ] || { log "FLINK_MALLOC=jemalloc: no libjemalloc.so.2 (apt-get install libjemalloc2)"; exit 1; }
    export LD_PRELOAD="$jemalloc${LD_PRELOAD:+:$LD_PRELOAD}"
    ;;
  *) log "FLINK_MALLOC=$FLINK_MALLOC: expected glibc or jemalloc"; exit 2 ;;
esac

prepare() {
  mkdir -p "$FLINK_CONF_DIR" "$FLINK_LIB_DIR" "$FLINK_LOG_DIR" "$FLINK_PID_DIR" "$base/tmp" "$base/ckpt"
  cp "$flink_home"/conf/log4j*.properties "$FLINK_CONF_DIR/"
  # lib/: the package's jars, plus flink-python (thread mode needs it on the cluster classpath, not
  # only in the job jar) and the Kafka connector for jobs that read or write topics.
  find "$FLINK_LIB_DIR" -name '*.jar' -delete
  ln -s "$flink_home"/lib/*.jar "$FLINK_LIB_DIR/"
  ln -s "$flink_home"/opt/flink-python-*.jar "$FLINK_LIB_DIR/"
  # The connector of the package's Flink line (FLINK_AGENTS_KAFKA_JAR when given, as for jobs).
  local connector=${FLINK_AGENTS_KAFKA_JAR:-"$cache/jars/flink-sql-connector-kafka-$(kafka_connector_for "$flink_version").jar"}
  [ -f "$connector" ] || bash "$here/kafka.sh" fetch
  ln -s "$connector" "$FLINK_LIB_DIR/"
  "$python" - "$flink_home/conf/config.yaml" "$FLINK_CONF_DIR/config.yaml" <<PY
import sys, yaml
with open(sys.argv[1]) as f:
    conf = yaml.safe_load(f)
java_opts = conf["env"]["java"]["opts"]["all"]
overrides = {
    "env.java.opts.all": java_opts + " -Djava.io.tmpdir=$base/tmp",
    "env.pid.dir": "$FLINK_PID_DIR",
    "env.log.dir": "$FLINK_LOG_DIR",
    "io.tmp.dirs": "$base/tmp",
    "jobmanager.bind-host": "127.0.0.1",
    "jobmanager.rpc.address": "127.0.0.1",
    "jobmanager.rpc.port": $rpc_port,
    "jobmanager.memory.process.size": "768m",
    "jobmanager.execution.failover-strategy": "region",
    "taskmanager.bind-host": "127.0.0.1",
    "taskmanager.host": "127.0.0.1",
    "taskmanager.numberOfTaskSlots": $tm_slots,
    "taskmanager.memory.process.size": "1280m",
    "rest.address": "127.0.0.1",
    "rest.bind-address": "127.0.0.1",
    "rest.port": $rest_port,
    "parallelism.default": 1,
    "python.executable": "$python",
    "python.client.executable": "$python",
    "python.pythonpath": "$site_packages",
    # org.apache.kafka.: a connector jar in lib/ with kafka-clients unshaded (the 1.20 line's, see
    # flink-line.sh) is also shipped with the job; loading the clients child-first from the job's
    # copy would give the connector's coordinator classes of two loaders (ClassCastException).
    "classloader.parent-first-patterns.additional": "pemja.;org.apache.kafka.",
    "execution.checkpointing.dir": "file://$base/ckpt",
    "heartbeat.timeout": $heartbeat_timeout_ms,
    "heartbeat.interval": 2000,
}
if "$tm_java_opts":
    overrides["env.java.opts.taskmanager"] = "$tm_java_opts"
with open(sys.argv[2], "w") as f:
    yaml.safe_dump(overrides, f, sort_keys=True)
PY
}

rest() { "$python" -c "
import json, sys, urllib.request
with urllib.request.urlopen('http://127.0.0.1:$rest_port$1', timeout=2) as r:
    print(json.dumps(json.load(r)))
" 2>/dev/null; }

free_slots() {
  rest /overview | "$python" -c 'import json, sys; print(json.load(sys.stdin)["slots-available"])' 2>/dev/null || echo 0
}

pids() { cat "$FLINK_PID_DIR"/*.pid 2>/dev/null || true; }

wait_for_slots() {
  for _ in $(seq 1 120); do
    [ "$(free_slots)" -gt 0 ] 2>/dev/null && return 0
    sleep 1
  done
  log "no free TaskManager slot after 120 s; logs in $FLINK_LOG_DIR"
  return 1
}

start() {
  if [ -n "$(pids)" ] && rest /overview >/dev/null; then
    log "already running: REST on http://127.0.0.1:$rest_port"
    return 0
  fi
  refuse_taken_ports "$rest_port" "$rpc_port"
  prepare
  "$flink_home/bin/jobmanager.sh" start >"$FLINK_LOG_DIR/start.out" 2>&1
  "$flink_home/bin/taskmanager.sh" start >>"$FLINK_LOG_DIR/start.out" 2>&1
  wait_for_slots
  log "running: REST/Web UI on http://127.0.0.1:$rest_port, logs in $FLINK_LOG_DIR"
}

# Through this script, not Flink's taskmanager.sh alone: the allocator settings above
# (FLINK_MALLOC, MALLOC_ARENA_MAX) are made here, and a TaskManager started without them runs on
# another malloc than its peers.
start_taskmanager() {
  "$flink_home/bin/taskmanager.sh" start >>"$FLINK_LOG_DIR/start.out" 2>&1
  [ "${1:-}" = --no-wait ] || wait_for_slots
}

kill_taskmanager() {
  local pid_file
  for pid_file in "$FLINK_PID_DIR"/*taskexecutor*.pid; do
    [ -f "$pid_file" ] || continue
    while read -r pid; do
      [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && log "killed TaskManager pid $pid"
    done <"$pid_file"
    rm -f "$pid_file"
  done
}

stop() {
  local pid_file pid
  for pid_file in "$FLINK_PID_DIR"/*.pid; do
    [ -f "$pid_file" ] || continue
    while read -r pid; do
      [ -n "$pid" ] || continue
      kill "$pid" 2>/dev/null || continue
      for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -9 "$pid" 2>/dev/null || true
    done <"$pid_file"
    rm -f "$pid_file"
  done
  log "stopped"
}

status() {
  if rest /overview; then return 0; fi
  echo "not running (REST http://127.0.0.1:$rest_port does not answer)"
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  start-taskmanager)
    case "${2:-}" in
      "" | --no-wait) start_taskmanager "${2:-}" ;;
      *) echo "usage: $0 start-taskmanager [--no-wait]" >&2; exit 2 ;;
    esac ;;
  kill-taskmanager) kill_taskmanager ;;
  env) echo "export FLINK_HOME=$FLINK_HOME FLINK_CONF_DIR=$FLINK_CONF_DIR FLINK_LIB_DIR=$FLINK_LIB_DIR FLINK_LOG_DIR=$FLINK_LOG_DIR FLINK_PID_DIR=$FLINK_PID_DIR" ;;
  *) echo "usage: $0 start|stop|status|start-taskmanager|kill-taskmanager|env" >&2; exit 2 ;;
esac
