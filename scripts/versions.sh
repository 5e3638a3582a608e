# Pinned versions of what the scripts fetch from Maven Central (sourced by scripts/*.sh).
KAFKA_VERSION=4.1.1
LOG4J_VERSION=2.24.3
# Matches apache-flink==2.2.1 in pyproject.toml.
FLINK_KAFKA_CONNECTOR_VERSION=5.0.0-2.2
