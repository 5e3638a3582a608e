#!/usr/bin/env bash
# Development Kafka broker: Apache Kafka 4.x in KRaft mode, single node, on loopback.
#
#   scripts/kafka.sh fetch    resolve the broker jars (Maven Central, cached) and the Flink Kafka connector jar
#   scripts/kafka.sh start    format storage if needed, start the broker, wait until it accepts connections
#   scripts/kafka.sh stop     stop the broker started by this script (by PID)
#   scripts/kafka.sh status   exit 0 when the broker answers
#   scripts/kafka.sh foreground   the broker in the foreground, jars already fetched (a container's command)
#
# Environment: KAFKA_PORT (default 9092), KAFKA_HEAP (default 384m, at most 512m),
# FLINK_AGENTS_CACHE (default <repo>/.cache), KAFKA_DATA_DIR (default $FLINK_AGENTS_CACHE/kafka/data-$KAFKA_PORT),
# KAFKA_RETENTION_CHECK_MS (default 300000: how often the broker deletes segments past a topic's retention).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/versions.sh
source "$here/versions.sh"

port=${KAFKA_PORT:-9092}
controller_port=${KAFKA_CONTROLLER_PORT:-$((port + 1))}
heap=${KAFKA_HEAP:-384m}
cache=${FLINK_AGENTS_CACHE:-$repo/.cache}
lib="$cache/kafka/lib-$KAFKA_VERSION"
run_dir="$cache/kafka/run-$port"
data_dir=${KAFKA_DATA_DIR:-$cache/kafka/data-$port}
retention_check_ms=${KAFKA_RETENTION_CHECK_MS:-300000}
pid_file="$run_dir/kafka.pid"
log_file="$run_dir/kafka.out"

name=broker

log() { echo "kafka.sh: $*" >&2; }
# shellcheck source=scripts/service-lib.sh
source "$here/service-lib.sh"

fetch() {
  if [ ! -f "$lib/.complete" ]; then
    log "resolving kafka_2.13:$KAFKA_VERSION and its runtime dependencies into $lib"
    rm -rf "$lib"
    mvn -q -B -f "$here/maven/kafka-broker.pom.xml" \
      -Dkafka.version="$KAFKA_VERSION" -Dlog4j.version="$LOG4J_VERSION" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib"
    touch "$lib/.complete"
  fi
  local connector="$cache/jars/flink-sql-connector-kafka-$FLINK_KAFKA_CONNECTOR_VERSION.jar"
  if [ ! -f "$connector" ]; then
    log "fetching flink-sql-connector-kafka:$FLINK_KAFKA_CONNECTOR_VERSION into $cache/jars"
    mkdir -p "$cache/jars"
    mvn -q -B dependency:copy \
      -Dartifact="org.apache.flink:flink-sql-connector-kafka:$FLINK_KAFKA_CONNECTOR_VERSION" \
      -DoutputDirectory="$cache/jars"
  fi
}


write_config() {
  mkdir -p "$run_dir" "$data_dir"
  cat >"$run_dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$data_dir
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
background.threads=2
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=16777216
log.retention.check.interval.ms=$retention_check_ms
auto.create.topics.enable=true
PROPS
  cat >"$run_dir/log4j2.yaml" <<'LOG'
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
LOG
}

java_opts=(-Xms128m "-Xmx$heap" -XX:+UseSerialGC -XX:TieredStopAtLevel=1
  -Djava.awt.headless=true "-Dlog4j2.configurationFile=$run_dir/log4j2.yaml"
  "-Djava.io.tmpdir=$run_dir")

# The broker's configuration, and its KRaft storage formatted on first use.
prepare() {
  write_config
  if [ ! -f "$data_dir/meta.properties" ]; then
    log "formatting KRaft storage in $data_dir"
    java "${java_opts[@]}" -cp "$lib/*" kafka.tools.StorageTool format \
      -t "flinkagentsdevcluster0" -c "$run_dir/server.properties" >"$run_dir/format.out" 2>&1 \
      || { cat "$run_dir/format.out" >&2; exit 1; }
  fi
}

start() {
  already_running && return 0
  refuse_taken_ports "$port" "$controller_port"
  fetch
  prepare
  log "starting broker on 127.0.0.1:$port (heap $heap, log $log_file)"
  nohup java "${java_opts[@]}" -cp "$lib/*" kafka.Kafka "$run_dir/server.properties" \
    >"$log_file" 2>&1 </dev/null &
  await_started $!
}

ready() {
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || return 1
  grep -q "Kafka Server started" "$log_file" 2>/dev/null
}

# In the foreground, for a container (scripts/containers.sh): no Maven there, so no fetch.
foreground() {
  [ -f "$lib/.complete" ] || { log "no broker jars in $lib (scripts/kafka.sh fetch)"; exit 1; }
  prepare
  log "broker on 127.0.0.1:$port in the foreground (heap $heap)"
  exec java "${java_opts[@]}" -cp "$lib/*" kafka.Kafka "$run_dir/server.properties"
}

case "${1:-}" in
  fetch) fetch ;;
  foreground) foreground ;;
  start) start ;;
  stop) stop_service 30 ;;
  status) service_status ;;
  *) echo "usage: $0 fetch|start|stop|status|foreground" >&2; exit 2 ;;
esac
