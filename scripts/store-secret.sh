#!/usr/bin/env bash
# Prints the development store secret, creating it on first use: 32 random bytes as hex in
# <cache>/store-secret (mode 600), where this checkout keeps its other local state.
#
# A Kafka store signs its records and refuses to start without a secret (docs/security.md);
# this repository's scripts (with-services.sh, flink-cluster.sh, .ci/run) and tests export
# FLINK_AGENTS_STORE_SECRET from here when it is not set, so the test client, the mini-cluster
# and the standalone cluster's TaskManagers agree. For development only: a real job's secret
# belongs in its deployment's secret store.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${FLINK_AGENTS_CACHE:-$(cd "$here/.." && pwd)/.cache}
file="$cache/store-secret"
if [ ! -s "$file" ]; then
  mkdir -p "$cache"
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$file.tmp" && mv "$file.tmp" "$file")
fi
cat "$file"
