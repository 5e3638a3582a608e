"""The records waits put on a keyed host's output (JSON lines, next to the runs' outputs):
a paused run's ``waiting`` record (what a decider needs: the wait's id, what it asks, its
deadline) and a ``refused`` record for a decision or event that was not applied, with the
reason (docs/waits.md)."""

from __future__ import annotations

import json
from typing import Any

from flink_agents.durable.identity import canonical_json
from flink_agents.runtime.wait_book import OpenWait, Refused


def waiting_record(agent: str, key: Any, wait: OpenWait) -> str:
    """A run paused at ``wait``."""
    request = wait.request.model_dump(mode="json", exclude_none=True)
    if not request["match"]:  # an approval's, or an event wait's without one
        del request["match"]
    if wait.deadline_ms is not None:
        request["deadline_ms"] = wait.deadline_ms
    return canonical_json({"agent": agent, "key": key, "seq": wait.seq, "waiting": request})


def refused_record(agent: str, key: Any, refused: Refused) -> str:
    """A decision or event record that was not applied, and why."""
    record = refused.record.model_dump(mode="json", exclude_none=True)
    return canonical_json(
        {"agent": agent, "key": key, "refused": {"reason": refused.reason, "record": record}}
    )


def bad_resume_record(agent: str, key: Any, text: str, why: str) -> str:
    """A decision or event record that could not be read."""
    return canonical_json(
        {"agent": agent, "key": key, "refused": {"reason": why, "text": text[:200]}}
    )


def record_key(key: str) -> Any:
    """The key value of a host's key token (its canonical JSON)."""
    return json.loads(key)
