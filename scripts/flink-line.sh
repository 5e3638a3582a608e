#!/usr/bin/env bash
# Runs the mini-cluster suite against another Flink line than the one pinned in pyproject.toml.
#
#   scripts/flink-line.sh 2.3.0          # or 1.20.5; make flink-line FLINK_LINE=2.3.0
#
# The pinned line (apache-flink==2.2.1) is what `make install` and CI use. This script makes a
# second virtualenv under .cache/flink-lines/<version>/ with apache-flink==<version> and the
# project's other dependencies (installed in one pip command, so the line's own pins hold),
# the project itself without dependencies, and the Kafka connector jar that goes with the line;
# then runs `pytest -m "flink and not cluster"` with it against the project's broker (started
# here when none runs). Extra arguments go to pytest. Results are recorded by hand in
# docs/deployment.md ("Flink versions").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=scripts/versions.sh
source "$here/versions.sh"

version=${1:?usage: scripts/flink-line.sh VERSION [pytest args...]}
shift
case "$version" in
  2.*) connector=$FLINK_KAFKA_CONNECTOR_VERSION ;;
  1.20.*) connector=$FLINK_1_20_KAFKA_CONNECTOR_VERSION ;;
  *) echo "flink-line.sh: no Kafka connector known for Flink $version (2.x or 1.20.x)" >&2; exit 2 ;;
esac

cache=${FLINK_AGENTS_CACHE:-$repo/.cache}
base="$cache/flink-lines/$version"
venv="$base/venv"
stamp="$venv/.installed-$(sha256sum "$repo/pyproject.toml" | cut -c1-12)"
python=${PYTHON:-python3}

if [ ! -f "$stamp" ]; then
  echo "flink-line.sh: installing apache-flink==$version into $venv" >&2
  "$python" -m venv "$venv"
  # The project's dependencies and every extra (as `make install`), apache-flink swapped for
  # the line under test.
  mapfile -t requirements < <("$venv/bin/python" - "$repo/pyproject.toml" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
extras = project["optional-dependencies"]
# The extras `make install` takes: every optional dependency the test suite imports.
requirements = project["dependencies"] + [r for extra in extras.values() for r in extra]
for requirement in requirements:
    if not requirement.startswith("apache-flink"):
        print(requirement)
PY
  )
  "$venv/bin/pip" install -q "apache-flink==$version" "${requirements[@]}"
  "$venv/bin/pip" install -q --no-deps -e "$repo"
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi

jar="$cache/jars/flink-sql-connector-kafka-$connector.jar"
if [ ! -f "$jar" ]; then
  mkdir -p "$cache/jars"
  mvn -q -B dependency:copy \
    -Dartifact="org.apache.flink:flink-sql-connector-kafka:$connector" -DoutputDirectory="$cache/jars"
fi

export FLINK_AGENTS_KAFKA_JAR="$jar"
export TMPDIR="$base/tmp"
mkdir -p "$TMPDIR"
cd "$repo"
echo "flink-line.sh: apache-flink $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("apache-flink"))'), connector $connector" >&2
exec "$here/with-services.sh" --kafka-only "$venv/bin/python" -m pytest tests -m "flink and not cluster" "$@"
