"""The crash matrix's oracle on made-up runs: a call is completed when its record is on the store's
topic, not when its service answered; in flight are the crashed attempt's calls not completed at
the crash. Fast: no JVM, no broker."""

from __future__ import annotations

import json
from pathlib import Path

from bench.crash_matrix import HAND_WRITTEN, write_doc
from bench.crash_oracle import ModelCalls, Request, judge, witness_keys
from examples.services import ExampleServices, _digest, _messages
from flink_agents.durable.store import CallResult, CallStatus, arguments_text, canonical_arguments

CRASH = 100.0
ARMED = [90.0, 101.0]  # the first attempt, and the one after the crash


def _sent(key: str, *starts: float, service: str = "model") -> list[Request]:
    return [Request(service, key, start, start + 0.1) for start in starts]


def test_a_call_answered_but_not_recorded_at_the_crash_is_in_flight_not_reinvoked() -> None:
    # Answered 0.9 s before the crash (a reply-time oracle called it completed), its record
    # never written before the crash: the kill point fell between reply and record.
    verdict = judge(_sent("cut", 99.0, 102.0), {"cut": 102.2}, [CRASH], ARMED)
    assert (verdict.reinvoked, verdict.sent_again, verdict.in_flight) == (0, 1, 1)


def test_a_call_recorded_before_the_crash_and_sent_after_it_is_reinvoked() -> None:
    # Answered just before the crash and recorded just before it: sending it again is a defect.
    verdict = judge(_sent("done", 99.8, 102.0), {"done": 99.95}, [CRASH], ARMED)
    assert (verdict.reinvoked, verdict.in_flight) == (1, 0)
    assert verdict.resent == ["model done: sent -0.200, +2.000, recorded -0.050"]


def test_calls_the_crashed_attempt_sent_after_the_crash_are_in_flight() -> None:
    # A run the crash did not stop sent this one after it, before the next attempt started.
    late = judge(_sent("late", 100.5, 102.0), {"late": 102.2}, [CRASH], ARMED)
    assert (late.reinvoked, late.in_flight) == (0, 1)
    # One the next attempt sends first is not: sending it twice is more than was in flight.
    fresh = judge(_sent("fresh", 101.5, 102.0), {"fresh": 102.2}, [CRASH], ARMED)
    assert (fresh.sent_again, fresh.in_flight) == (1, 0)


def test_each_crash_has_its_own_calls_in_flight() -> None:
    # Sent by the first attempt, cut by its crash; sent again by the second, cut by the second
    # crash (while replaying); completed by the third.
    crashes, armed = [100.0, 102.0], [90.0, 101.0, 103.0]
    verdict = judge(_sent("twice", 99.0, 101.5, 104.0), {"twice": 104.2}, crashes, armed)
    assert (verdict.reinvoked, verdict.sent_again, verdict.in_flight) == (0, 2, 2)


def test_a_call_without_any_record_is_unmatched() -> None:
    verdict = judge(_sent("nowhere", 95.0), {}, [CRASH], ARMED)
    assert verdict.unmatched == 1


def test_a_run_without_a_crash_has_nothing_in_flight() -> None:
    verdict = judge(_sent("once", 95.0), {"once": 95.2}, [], ARMED[:1])
    assert (verdict.sent_again, verdict.in_flight, verdict.unmatched) == (0, 0, 0)


def _recorded(call_id: str, *args: object, payload: object = None) -> CallResult:
    return CallResult(
        call_id=call_id,
        status=CallStatus.SUCCEEDED,
        payload=payload,
        arguments=arguments_text(canonical_arguments(args, {})),
    )


def test_a_record_names_the_key_its_service_counted() -> None:
    delegation = _recorded("sub", {"name": "billing", "delegation_key": "k-1"})
    tool = _recorded("tool:call_0_0", {"topic": "T-1"}, "idempotency")
    with ExampleServices() as services:
        models = ModelCalls(services)
    assert witness_keys(delegation, models) == ["k-1"]
    assert witness_keys(tool, models) == [_digest(["lookup_fact", {"topic": "T-1"}])]


def test_a_model_record_is_joined_to_its_request_through_conversation_and_reply() -> None:
    # The desk and the researcher are sent the same first message; only the model's name (in
    # the request, not in the record) and so the reply tell them apart.
    messages = [{"role": "user", "content": "help (customer acme-1, ticket T-1)"}]
    with ExampleServices() as services:
        for model in ("desk", "researcher"):
            services.conversations.add(json.dumps({"model": model, "messages": messages}), 1.0)
        # A request its sender cut off (a crashed attempt's) was answered 400/404, not counted.
        services.conversations.add('{"model": "desk", "mess', 1.0)
        services.conversations.add("", 1.0)
        models = ModelCalls(services)
    for model in ("desk", "researcher"):
        body = {"model": model, "messages": messages}
        reply = services.models[model].reply(_messages(body)).model_dump(mode="json")
        record = _recorded("chat", [{**messages[0], "tool_calls": []}], payload=reply)
        assert witness_keys(record, models) == [_digest(body)]


def test_the_hand_written_part_of_the_doc_is_kept(tmp_path: Path) -> None:
    doc = tmp_path / "reliability.md"
    doc.write_text(f"# old table\n\n{HAND_WRITTEN}\n\n## Someone's notes\n\nkept\n")
    write_doc(doc, "# new table\n")
    assert doc.read_text() == f"# new table\n\n{HAND_WRITTEN}\n\n## Someone's notes\n\nkept\n"


def test_a_doc_without_the_line_gets_it_at_the_end(tmp_path: Path) -> None:
    doc = tmp_path / "reliability.md"
    write_doc(doc, "# table\n")
    assert doc.read_text() == f"# table\n\n{HAND_WRITTEN}\n"
    write_doc(doc, "# table again\n")
    assert doc.read_text() == f"# table again\n\n{HAND_WRITTEN}\n"
