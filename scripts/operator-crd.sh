#!/usr/bin/env bash
# The Flink Kubernetes Operator's API jar from Maven Central (cached), which carries the CRDs the
# operator installs (META-INF/fabric8/*.yml): tests/test_k8s_manifests.py checks docker/k8s/
# against its FlinkDeployment schema.
#
#   scripts/operator-crd.sh fetch    fetch the jar if missing; prints its path
#
# Environment: FLINK_AGENTS_CACHE (default <repo>/.cache). Version: scripts/versions.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/versions.sh
source "$here/versions.sh"
cache=${FLINK_AGENTS_CACHE:-$repo/.cache}
jar="$cache/jars/flink-kubernetes-operator-api-$FLINK_K8S_OPERATOR_VERSION.jar"

case "${1:-}" in
  fetch)
    if [ ! -f "$jar" ]; then
      echo "operator-crd.sh: fetching flink-kubernetes-operator-api:$FLINK_K8S_OPERATOR_VERSION into $cache/jars" >&2
      mkdir -p "$cache/jars"
      mvn -q -B dependency:copy \
        -Dartifact="org.apache.flink:flink-kubernetes-operator-api:$FLINK_K8S_OPERATOR_VERSION" \
        -DoutputDirectory="$cache/jars" >&2
    fi
    echo "$jar"
    ;;
  *) echo "usage: $0 fetch" >&2; exit 2 ;;
esac
