"""What ``flink-agents waits`` reads and writes: decision records for a job's decisions input
and the open waits among a job's output records, its event log's or its action-state store's
(docs/waits.md, "Deciding from the command line"). No Kafka here:
:mod:`~flink_agents.cli.json_topic` carries the lines, the store command reads the store."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from flink_agents.api.json_values import read_json
from flink_agents.durable.identity import CallIdentity, RunId, canonical_json, digest
from flink_agents.durable.store import ActionState
from flink_agents.observability import LogRecord, WaitNoted
from flink_agents.runtime.wait_book import Resume


def key_value(text: str) -> Any:
    """The key a user typed: a JSON value (``17``, ``"17"``), else the text as a string."""
    try:
        return read_json(text)
    except ValueError:  # not JSON, or JSON no key can be (nested too deeply, NaN)
        return text


def decision_record(
    key_field: str,
    key: Any,
    wait_id: str,
    verdict: str,
    *,
    by: str | None = None,
    message: str | None = None,
    arguments: dict[str, Any] | None = None,
    fingerprint: str | None = None,
) -> dict[str, Any]:
    """The decision record a job's decisions input reads, keyed like its inputs
    (``fingerprint``: the one of the ``waiting`` record decided on).

    Its ``record_id`` is a digest of the decision itself, so sending the same command again
    writes the same record, which the key's wait book drops as a duplicate; a different
    decision for the same wait is a different record (refused: the wait is already resolved).
    Raises ``ValueError`` if the job would refuse it as unreadable.
    """
    if key is None:  # the job keys a record with a null key as none: it would be refused
        raise ValueError("--key: a run's key is never null")
    record: dict[str, Any] = {key_field: key, "wait": wait_id, "verdict": verdict}
    extras = {"by": by, "message": message, "arguments": arguments, "fingerprint": fingerprint}
    record.update({name: value for name, value in extras.items() if value is not None})
    record["record_id"] = digest(["cli-decision", canonical_json(record)])
    Resume.parse(record)  # the job's own reading: refuse here what it would refuse there
    return record


@dataclass(frozen=True, slots=True)
class OpenWaitLine:
    """A run's ``waiting`` record with no later record of the same run in the outputs."""

    agent: str
    key: Any
    seq: int
    waiting: dict[str, Any]

    def render(self) -> str:
        """One line: key, wait id, request, deadline."""
        waiting = self.waiting
        deadline = waiting.get("deadline_ms")
        return "  ".join(
            [
                f"key={canonical_json(self.key)}",
                f"wait={waiting['wait_id']}",
                f"request={canonical_json(waiting.get('request'))}",
                f"deadline_ms={'none' if deadline is None else deadline}",
            ]
        )


def open_waits(lines: Iterable[str], key: Any | None = None) -> list[OpenWaitLine]:
    """The waits still open according to a job's output records (JSON lines, in order).

    A run's later record -- an output, an error, or a ``waiting`` record for its next wait --
    means the run went past its earlier wait: that wait is resolved. Lines that are not a
    run's record (refused decisions, blank or foreign lines) are skipped; ``key`` keeps only
    that key's waits.
    """
    latest: dict[tuple[str, str, int], OpenWaitLine | None] = {}
    for line in lines:
        record = _run_record(line)
        if record is None or (
            key is not None and canonical_json(record["key"]) != canonical_json(key)
        ):
            continue
        run = (record["agent"], canonical_json(record["key"]), record["seq"])
        waiting = record.get("waiting")
        latest.pop(run, None)  # keep the runs in the order of their latest record
        latest[run] = (
            OpenWaitLine(record["agent"], record["key"], record["seq"], waiting)
            if isinstance(waiting, dict) and "wait_id" in waiting
            else None
        )
    return [wait for wait in latest.values() if wait is not None]


def open_waits_in_event_log(
    records: Iterable[LogRecord], key: Any | None = None
) -> list[OpenWaitLine]:
    """The waits still open according to a job's event log: each wait whose latest ``wait``
    record says its run ``paused`` (a ``resumed`` one closes it), in the order they paused.
    ``key`` keeps only that key's waits."""
    latest: dict[tuple[str, str, int, str], OpenWaitLine | None] = {}
    for record in records:
        if not isinstance(record, WaitNoted) or (
            key is not None and canonical_json(record.key) != canonical_json(key)
        ):
            continue
        wait = (record.agent, canonical_json(record.key), record.seq, record.wait_id)
        if record.change == "resumed":
            latest[wait] = None
            continue
        waiting = {
            "wait_id": record.wait_id,
            "kind": record.wait_kind,
            "request": record.request,
            "deadline_ms": record.deadline_ms,
        }
        latest.setdefault(wait, OpenWaitLine(record.agent, record.key, record.seq, waiting))
    return [wait for wait in latest.values() if wait is not None]


def open_waits_in_store(
    states: Iterable[ActionState], key: Any | None = None
) -> list[OpenWaitLine]:
    """The waits still open according to an action-state store's latest states: each wait
    call whose record is ``pending`` (written when its run reaches the wait; the decision the
    run takes is the call's result, ``succeeded``), in the order the store holds them.

    The wait id is the call identity's digest, as the run derives it; the request is read from
    the call's recorded arguments (none when the store does not record arguments, or cut them);
    the deadline is the call's start plus its timeout (the key state's registered deadline is
    taken when the run's pause is handed over, a moment later). ``key`` keeps only that key's
    waits.
    """
    wanted = None if key is None else canonical_json(key)
    found: list[OpenWaitLine] = []
    for state in states:
        where = state.key
        if where.event_id is None or (wanted is not None and where.key != wanted):
            continue  # a wait is a call of an action on an event
        for call in state.calls:
            if not call.is_open_wait:
                continue
            run = RunId(where.agent, read_json(where.key), where.seq)
            asked = _wait_asked(call.arguments)
            timeout = asked.get("timeout_ms")
            started = call.started_at
            waiting = {
                "wait_id": CallIdentity(run, where.event_id, where.action, call.call_id).digest(),
                "kind": asked.get("kind"),
                "request": asked.get("request"),
                "deadline_ms": None
                if not isinstance(timeout, int) or started is None
                else round(started) + timeout,
            }
            found.append(OpenWaitLine(where.agent, run.key, where.seq, waiting))
    return found


def _wait_asked(arguments: str | None) -> dict[str, Any]:
    """What a wait call asked (its request, kind and timeout), from its recorded arguments
    text (``{"args": [asked], "kwargs": {}}``); empty if they were not recorded or were cut."""
    try:
        recorded = read_json(arguments or "")
    except ValueError:
        return {}
    args = recorded.get("args") if isinstance(recorded, dict) else None
    asked = args[0] if isinstance(args, list) and args else None
    return asked if isinstance(asked, dict) else {}


def _run_record(line: str) -> dict[str, Any] | None:
    try:
        record = read_json(line)
    except ValueError:  # not an output record: not JSON, or JSON no run writes
        return None
    if not isinstance(record, dict) or not isinstance(record.get("seq"), int):
        return None
    if not isinstance(record.get("agent"), str) or "key" not in record:
        return None
    return record
