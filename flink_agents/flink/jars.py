"""Where the Flink Kafka connector jar is (fetched by `scripts/kafka.sh fetch`)."""

from __future__ import annotations

import os
from pathlib import Path

CONNECTOR_VERSION = "5.0.0-2.2"
"""flink-sql-connector-kafka for the pinned Flink 2.3 line (the 2.2 build: none for 2.3 is
published; also in scripts/versions.sh)."""

_REPO = Path(__file__).resolve().parents[2]


def kafka_connector_jar() -> Path:
    """The connector jar: ``FLINK_AGENTS_KAFKA_JAR``, else the project cache."""
    configured = os.environ.get("FLINK_AGENTS_KAFKA_JAR")
    cache = Path(os.environ.get("FLINK_AGENTS_CACHE", _REPO / ".cache"))
    jar = (
        Path(configured)
        if configured
        else cache / "jars" / f"flink-sql-connector-kafka-{CONNECTOR_VERSION}.jar"
    )
    if not jar.is_file():
        raise FileNotFoundError(
            f"Flink Kafka connector jar not found at {jar}: run `scripts/kafka.sh fetch` "
            "or set FLINK_AGENTS_KAFKA_JAR to its path"
        )
    return jar
