"""Restore a Kafka store from a marker in a fresh process; print what it sees as JSON.

Usage: python -m tests.durable.store.restore_child BOOTSTRAP TOPIC PARTITIONS MARKER_JSON
Loads the value types first, as a job does with its plan.
Prints {"loaded": n, "states": {<canonical key>: [[<value type name>, <value as JSON>]...]}}.
"""

from __future__ import annotations

import json
import sys

from pydantic_core import to_jsonable_python

from flink_agents.durable.store import RecoveryMarker
from flink_agents.durable.store.kafka import KafkaActionStateStore
from flink_agents.durable.store.store_config import StoreConfig

# The job's own code, loaded as its plan would load it: an unsigned record's type tag is
# resolved only among the modules the process loaded (docs/security.md).
from tests.durable.store import payload_types  # noqa: F401


def main(bootstrap: str, topic: str, partitions: str, marker_json: str) -> None:
    config = StoreConfig(
        kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=int(partitions)
    )
    store = KafkaActionStateStore(config)
    try:
        report = store.restore(RecoveryMarker.from_json(marker_json))
        states = {}
        for key in store.state_keys():
            state = store.get(key)
            assert state is not None
            states[key.canonical()] = [
                [type(value).__name__, to_jsonable_python(value)]
                for value in (call.value() for call in state.calls)
            ]
        print(json.dumps({"loaded": report.loaded, "states": states}))
    finally:
        store.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
