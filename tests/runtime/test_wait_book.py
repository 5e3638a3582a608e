"""A key's waits in its state (runtime/wait_book.py): the rules, record by record."""

from __future__ import annotations

import pytest

from flink_agents.api.waits import WaitRequest
from flink_agents.runtime.wait_book import REMEMBERED, Apply, Refused, Resume, WaitBook


def approval(wait_id: str, timeout_ms: int | None = None) -> WaitRequest:
    return WaitRequest(wait_id=wait_id, kind="approval", timeout_ms=timeout_ms)


def decision(wait_id: str, verdict: str = "approve", **more: object) -> Resume:
    return Resume.parse({"wait": wait_id, "verdict": verdict, **more})


def test_a_registered_wait_takes_its_decision_once():
    book = WaitBook()
    assert book.register(approval("w"), seq=0, now_ms=0) == (True, None)
    offer = book.offer(decision("w", by="ann"), runs_pending=True, now_ms=5)
    assert isinstance(offer, Apply) and offer.decision.by == "ann" and offer.decision.at_ms == 5
    assert book.offer(decision("w", by="ann"), runs_pending=True, now_ms=6) == "duplicate"
    refused = book.offer(decision("w", "reject"), runs_pending=True, now_ms=7)
    assert isinstance(refused, Refused) and "already resolved (approved)" in refused.reason


def test_registering_again_keeps_the_deadline_and_hands_back_the_decision():
    book = WaitBook()
    book.register(approval("w", timeout_ms=100), seq=0, now_ms=1_000)
    assert book.register(approval("w", timeout_ms=100), seq=0, now_ms=5_000) == (False, None)
    assert book.next_deadline() == 1_100
    book.offer(decision("w"), runs_pending=True, now_ms=1_050)
    new, apply = book.register(approval("w", timeout_ms=100), seq=0, now_ms=6_000)
    assert not new and apply is not None and apply.decision.verdict == "approved"
    assert book.next_deadline() is None


def test_only_a_deadline_that_passed_times_a_wait_out():
    book = WaitBook()
    book.register(approval("w", timeout_ms=100), seq=0, now_ms=0)
    assert book.due(99) == []
    [fired] = book.due(100)
    assert fired.decision.verdict == "timed_out"
    assert book.due(200) == []


def test_an_event_resolves_the_first_wait_whose_match_it_fits():
    book = WaitBook()
    paid = WaitRequest(wait_id="w", kind="event", event_type="Paid", match={"order": "o1"})
    book.register(paid, seq=0, now_ms=0)
    other = Resume.parse({"event": "Paid", "data": {"order": "o2"}})
    assert book.offer(other, runs_pending=True, now_ms=1) == "kept"
    fits = Resume.parse({"event": "Paid", "data": {"order": "o1", "amount": 3}})
    offer = book.offer(fits, runs_pending=True, now_ms=2)
    assert isinstance(offer, Apply) and offer.decision.data == {"order": "o1", "amount": 3}


def test_a_key_forgets_its_oldest_resolved_waits():
    book = WaitBook()
    for n in range(REMEMBERED + 1):
        book.register(approval(f"w{n}"), seq=n, now_ms=0)
        book.offer(decision(f"w{n}"), runs_pending=True, now_ms=0)
        book.run_finished(n, runs_pending=False)
    assert "w0" not in book.resolved and f"w{REMEMBERED}" in book.resolved
    forgotten = book.offer(decision("w0", "reject"), runs_pending=False, now_ms=0)
    assert isinstance(forgotten, Refused) and "no wait" in forgotten.reason


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ({"verdict": "approve"}, "either a wait"),
        ({"wait": "w"}, "needs a verdict"),
        ({"wait": "w", "verdict": "edit"}, "new arguments"),
        ({"wait": "w", "verdict": "maybe"}, "not a decision or event record"),
        ([1], "JSON object"),
    ],
)
def test_a_record_that_is_no_decision_or_event_is_named(record, why):
    with pytest.raises(ValueError, match=why):
        Resume.parse(record)
