#!/usr/bin/env bash
# Runs the Flink tests against another Flink line than the one pinned in pyproject.toml.
#
#   scripts/flink-line.sh 2.3.0          # or 1.20.5; make flink-line FLINK_LINE=1.20.5
#
# The pinned line (apache-flink==2.3.0) is what `make install` and CI use. This script makes a
# second virtualenv under .cache/flink-lines/<version>/ with apache-flink==<version> and the
# project's dependencies (installed in one pip command, so the line's own pins hold), the project
# itself without dependencies, and the Kafka connector jar that goes with the line. Then, against
# the project's broker (started here when none runs):
#   1. the mini-cluster suite, `pytest tests -m "flink and not cluster"` (extra arguments go to it);
#   2. e2e/test_standalone_failover.py on a standalone cluster started from the line's own bin/
#      (scripts/flink-cluster.sh with PYTHON set to the line's venv), on FLINK_REST_PORT and
#      FLINK_RPC_PORT (default 8081/6123; no cluster may already answer there), stopped after.
# FLINK_LINE_STEPS=minicluster or =standalone runs one step only; =install only installs. The
# exit code is the first failing step's. Results are recorded by hand in docs/deployment.md ("Flink versions").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/versions.sh
source "$here/versions.sh"

version=${1:?usage: scripts/flink-line.sh VERSION [pytest args...]}
shift
connector=$(kafka_connector_for "$version")
steps=${FLINK_LINE_STEPS:-minicluster standalone}

cache=${FLINK_AGENTS_CACHE:-$repo/.cache}
base="$cache/flink-lines/$version"
venv="$base/venv"
python=${PYTHON:-python3}

# The extras each line installs: on 1.20 (apache-beam 2.48, protobuf<4.24, numpy<1.25) pip does
# not settle otel (its OTLP exporter needs a newer protobuf) or retrieval (chromadb); the tests
# that need them are skipped there.
case "$version" in
  1.20.*) extras="test providers gemini bedrock mcp ledger console" ;;
  *) extras="" ;;  # all
esac
# A venv is installed again when the project's dependencies or the line's extras change.
stamp="$venv/.installed-$({ cat "$repo/pyproject.toml"; echo "$extras"; } | sha256sum | cut -c1-12)"

if [ ! -f "$stamp" ]; then
  echo "flink-line.sh: installing apache-flink==$version into $venv" >&2
  "$python" -m venv "$venv"
  mapfile -t requirements < <("$venv/bin/python" - "$repo/pyproject.toml" "$extras" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
extras = project["optional-dependencies"]
wanted = sys.argv[2].split() or list(extras)
requirements = project["dependencies"] + [r for name in wanted for r in extras[name]]
for requirement in requirements:
    if not requirement.startswith("apache-flink"):
        print(requirement)
PY
  )
  # Wheels only for the scientific stack: an older apache-beam is an sdist whose setup.py needs
  # the pkg_resources newer setuptools dropped; refusing it makes pip say what conflicts instead.
  "$venv/bin/pip" install -q --only-binary apache-beam,numpy,pyarrow,pandas \
    "apache-flink==$version" "${requirements[@]}"
  "$venv/bin/pip" install -q --no-deps -e "$repo"
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi

fetch_jar() {  # group:artifact:version into $cache/jars
  mkdir -p "$cache/jars"
  mvn -q -B dependency:copy -Dartifact="$1" -DoutputDirectory="$cache/jars"
}
case "$version" in
  1.20.*)
    # One jar for pipeline.jars and the cluster's lib/: the connector and its kafka-clients.
    jar="$cache/jars/flink-connector-kafka-$connector-with-clients-$FLINK_1_20_KAFKA_CLIENTS_VERSION.jar"
    if [ ! -f "$jar" ]; then
      parts=("$cache/jars/flink-connector-kafka-$connector.jar"
        "$cache/jars/kafka-clients-$FLINK_1_20_KAFKA_CLIENTS_VERSION.jar")
      [ -f "${parts[0]}" ] || fetch_jar "org.apache.flink:flink-connector-kafka:$connector"
      [ -f "${parts[1]}" ] || fetch_jar "org.apache.kafka:kafka-clients:$FLINK_1_20_KAFKA_CLIENTS_VERSION"
      "$venv/bin/python" - "$jar" "${parts[@]}" <<'PY'
import sys
import zipfile

# The first jar's entry wins (manifests, licence files); both jars' classes are disjoint.
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as joined:
    seen = set()
    for part in sys.argv[2:]:
        with zipfile.ZipFile(part) as source:
            for item in source.infolist():
                if item.filename not in seen:
                    seen.add(item.filename)
                    joined.writestr(item, source.read(item))
PY
    fi
    ;;
  *)
    jar="$cache/jars/flink-sql-connector-kafka-$connector.jar"
    [ -f "$jar" ] || fetch_jar "org.apache.flink:flink-sql-connector-kafka:$connector"
    ;;
esac

export FLINK_AGENTS_KAFKA_JAR="$jar"
export TMPDIR="$base/tmp"
mkdir -p "$TMPDIR"
cd "$repo"
echo "flink-line.sh: apache-flink $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("apache-flink"))'), connector $(basename "$jar")" >&2

status=0
run_step() {  # name command...: runs it, keeps the first failure's exit code
  local code=0
  echo "flink-line.sh: $1 on Flink $version" >&2
  shift
  "$@" || code=$?
  [ "$status" -ne 0 ] || status=$code
}
for step in $steps; do
  case "$step" in
    minicluster)
      run_step "mini-cluster suite" "$here/with-services.sh" --kafka-only \
        "$venv/bin/python" -m pytest tests -m "flink and not cluster" "$@" ;;
    standalone)
      if PYTHON="$venv/bin/python" bash "$here/flink-cluster.sh" status >/dev/null 2>&1; then
        echo "flink-line.sh: a Flink cluster already answers on port ${FLINK_REST_PORT:-8081}:" \
          "stop it or set FLINK_REST_PORT/FLINK_RPC_PORT" >&2
        exit 1
      fi
      # with-services.sh starts the cluster from the line's bin/ and stops it afterwards.
      run_step "standalone failover e2e" env PYTHON="$venv/bin/python" "$here/with-services.sh" \
        "$venv/bin/python" -m pytest e2e/test_standalone_failover.py -m cluster ;;
    install) ;;  # done above
    *) echo "flink-line.sh: unknown step $step (install, minicluster, standalone)" >&2; exit 2 ;;
  esac
done
exit "$status"
