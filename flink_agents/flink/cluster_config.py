"""What the Flink cluster's own configuration says, read where the operator runs.

A TaskManager started by Flink's scripts (``bin/taskmanager.sh``, ``scripts/flink-cluster.sh``)
has ``FLINK_CONF_DIR`` in its environment, and in thread mode the operator's Python runs inside
that process (in process mode the Python worker inherits it). So the operator can read the
cluster's ``config.yaml`` (Flink 2; flat ``a.b: v`` keys or nested maps) or the legacy
``flink-conf.yaml`` itself instead of asking every job to repeat it. Only what the engine needs
is read: the heartbeat, which sets the freeze fence (flink_agents/durable/freeze_fence.py).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger(__name__)

#: Flink option -> OperatorOptions field, both in milliseconds.
HEARTBEAT_OPTIONS = {
    "heartbeat.timeout": "heartbeat_timeout_ms",
    "heartbeat.interval": "heartbeat_interval_ms",
}

_UNITS_MS = {
    "": 1,
    "ms": 1,
    "milli": 1,
    "millis": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "min": 60_000,
    "m": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
}
_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")


def duration_ms(value: Any) -> int:
    """A Flink duration in ms: a plain number is ms (as Flink reads it), else ``<n> <unit>``."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int):
        return value
    match = _DURATION.match(str(value).lower())
    if match is None or match.group(2) not in _UNITS_MS:
        raise ValueError(f"not a duration: {value!r} (expected e.g. 50000, '50 s', '1 min')")
    return int(match.group(1)) * _UNITS_MS[match.group(2)]


def cluster_heartbeat(environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """``heartbeat_timeout_ms`` / ``heartbeat_interval_ms`` as set in the cluster's configuration
    file, for the options found (none without ``FLINK_CONF_DIR`` or a file; an unreadable value
    is logged and skipped: the operator then keeps Flink's defaults)."""
    conf_dir = (os.environ if environ is None else environ).get("FLINK_CONF_DIR")
    if not conf_dir:
        return {}
    for name in ("config.yaml", "flink-conf.yaml"):
        path = Path(conf_dir) / name
        if path.is_file():
            return _heartbeat_in(path)
    return {}


def _heartbeat_in(path: Path) -> dict[str, int]:
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        logger.warning("cannot read the cluster configuration %s: %s", path, exc)
        return {}
    if not isinstance(document, dict):
        return {}
    found: dict[str, int] = {}
    for option, field in HEARTBEAT_OPTIONS.items():
        value = _lookup(document, option)
        if value is None:
            continue
        try:
            found[field] = duration_ms(value)
        except ValueError as exc:
            logger.warning("%s in %s: %s; Flink's default is assumed", option, path, exc)
    return found


def _lookup(document: dict[str, Any], option: str) -> Any:
    """``option`` as a flat key (``heartbeat.timeout: 10000``) or nested maps."""
    if option in document:
        return document[option]
    node: Any = document
    for part in option.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
