# Pinned versions of what the scripts fetch from Maven Central (sourced by scripts/*.sh).
KAFKA_VERSION=4.1.1
LOG4J_VERSION=2.24.3
# Matches apache-flink==2.2.1 in pyproject.toml.
FLINK_KAFKA_CONNECTOR_VERSION=5.0.0-2.2
# The Flink Kubernetes Operator whose FlinkDeployment CRD the docker/k8s manifests are checked
# against: the newest release whose API jar (it carries the CRDs) Maven Central serves.
FLINK_K8S_OPERATOR_VERSION=1.10.0
# The Kafka connector for the Flink 1.20 line (scripts/flink-line.sh): the newest 1.x build Maven
# Central serves here (3.3.0-1.20 and 3.4.0-1.20 are refused); it runs on 1.20 (docs/deployment.md).
FLINK_1_20_KAFKA_CONNECTOR_VERSION=3.2.0-1.19
