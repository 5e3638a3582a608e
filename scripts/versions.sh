# Pinned versions of what the scripts fetch from Maven Central (sourced by scripts/*.sh).
KAFKA_VERSION=4.1.1
LOG4J_VERSION=2.24.3
# For apache-flink==2.3.0 in pyproject.toml: no 2.3 build is published; the 2.2 one runs on 2.3.
FLINK_KAFKA_CONNECTOR_VERSION=5.0.0-2.2
# The Flink Kubernetes Operator whose FlinkDeployment CRD the docker/k8s manifests are checked
# against: the newest release whose API jar (it carries the CRDs) Maven Central serves.
FLINK_K8S_OPERATOR_VERSION=1.10.0
# The Kafka connector for the Flink 1.20 line (scripts/flink-line.sh; docs/deployment.md). Maven
# Central serves no flink-sql-connector-kafka (the shaded jar) for it here, only
# flink-connector-kafka: flink-line.sh joins it with a kafka-clients into one jar. Not the 3.4.0
# its POM names: a record the broker refuses as too large sends that client (and 3.9.2) into an
# endless split-and-retry loop (KAFKA-8350) that ends in the delivery timeout or, when the loop
# overflows the sender thread's stack (KAFKA-8202), in a flush that returns with no error and the
# records gone (KAFKA-19479). 4.2.0, which the 2.x connector shades, fails such a record at once.
FLINK_1_20_KAFKA_CONNECTOR_VERSION=3.4.0-1.20
FLINK_1_20_KAFKA_CLIENTS_VERSION=4.2.0

# The flink-sql-connector-kafka build that goes with a Flink version (2.x or 1.20.x).
kafka_connector_for() {
  case "$1" in
    2.*) echo "$FLINK_KAFKA_CONNECTOR_VERSION" ;;
    1.20.*) echo "$FLINK_1_20_KAFKA_CONNECTOR_VERSION" ;;
    *) echo "versions.sh: no Kafka connector known for Flink $1 (2.x or 1.20.x)" >&2; return 2 ;;
  esac
}
