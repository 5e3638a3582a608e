"""A key's waits in its state (runtime/wait_book.py): the rules, record by record."""

from __future__ import annotations

import pytest

from flink_agents.api.waits import WaitRequest
from flink_agents.runtime.wait_book import REMEMBERED, Apply, Refused, Registered, Resume, WaitBook


def approval(wait_id: str, timeout_ms: int | None = None, **more: object) -> WaitRequest:
    return WaitRequest(wait_id=wait_id, kind="approval", timeout_ms=timeout_ms, **more)


def decision(wait_id: str, verdict: str = "approve", **more: object) -> Resume:
    return Resume.parse({"wait": wait_id, "verdict": verdict, **more})


def test_a_registered_wait_takes_its_decision_once():
    book = WaitBook()
    assert book.register(approval("w"), seq=0, now_ms=0) == Registered(True)
    offer = book.offer(decision("w", by="ann"), runs_pending=True, now_ms=5)
    assert isinstance(offer, Apply) and offer.decision.by == "ann" and offer.decision.at_ms == 5
    assert book.offer(decision("w", by="ann"), runs_pending=True, now_ms=6) == "duplicate"
    refused = book.offer(decision("w", "reject"), runs_pending=True, now_ms=7)
    assert isinstance(refused, Refused) and "already resolved (approved)" in refused.reason


def test_registering_again_keeps_the_deadline_and_hands_back_the_decision():
    book = WaitBook()
    book.register(approval("w", timeout_ms=100), seq=0, now_ms=1_000)
    assert book.register(approval("w", timeout_ms=100), seq=0, now_ms=5_000) == Registered(False)
    assert book.next_deadline() == 1_100
    book.offer(decision("w"), runs_pending=True, now_ms=1_050)
    again = book.register(approval("w", timeout_ms=100), seq=0, now_ms=6_000)
    assert not again.new and again.apply is not None
    assert again.apply.decision.verdict == "approved"
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


# --- who may decide, and a plan that changed since the wait began ---------------------------------


def test_a_decision_by_someone_the_wait_does_not_name_is_refused_and_the_wait_stays_open():
    book = WaitBook()
    book.register(approval("w", deciders=["ann", "bo"]), seq=0, now_ms=0)
    refused = book.offer(decision("w", by="cy"), runs_pending=True, now_ms=1)
    unnamed = book.offer(decision("w"), runs_pending=True, now_ms=2)
    assert isinstance(refused, Refused) and isinstance(unnamed, Refused)
    assert refused.reason == "'cy' may not decide this wait (its deciders: ann, bo)"
    assert (
        unnamed.reason == "a decision without 'by' may not decide this wait (its deciders: ann, bo)"
    )
    applied = book.offer(decision("w", by="bo"), runs_pending=True, now_ms=3)
    assert isinstance(applied, Apply) and applied.decision.by == "bo"


def test_a_decision_kept_early_from_someone_not_named_is_refused_when_the_wait_registers():
    book = WaitBook()
    assert book.offer(decision("w", by="cy"), runs_pending=True, now_ms=0) == "kept"
    registered = book.register(approval("w", deciders=["ann"]), seq=0, now_ms=1)
    assert registered.new and registered.apply is None
    assert [r.reason for r in registered.refused] == [
        "'cy' may not decide this wait (its deciders: ann)"
    ]
    assert book.paused(0)


def test_a_decision_naming_another_fingerprint_is_refused():
    book = WaitBook()
    book.register(approval("w", fingerprint="f2"), seq=0, now_ms=0)
    refused = book.offer(decision("w", fingerprint="f1"), runs_pending=True, now_ms=1)
    assert isinstance(refused, Refused) and "another version of the request" in refused.reason
    applied = book.offer(decision("w", fingerprint="f2"), runs_pending=True, now_ms=2)
    assert isinstance(applied, Apply) and applied.decision.fingerprint == "f2"


def test_a_replay_under_a_changed_plan_refuses_the_decision_not_taken_and_asks_again():
    book = WaitBook()
    book.register(approval("w", timeout_ms=100, fingerprint="f1"), seq=0, now_ms=0)
    book.offer(decision("w", by="ann"), runs_pending=True, now_ms=10)
    # The job restored under a plan whose gated tool changed: the replayed run waits with f2.
    registered = book.register(approval("w", timeout_ms=100, fingerprint="f2"), seq=0, now_ms=20)
    assert registered.new and registered.apply is None  # a new `waiting` record; not applied
    [refused] = registered.refused
    assert refused.reason.startswith("the plan changed incompatibly since the wait began")
    assert (refused.record.wait, refused.record.verdict, refused.record.by) == (
        "w",
        "approve",
        "ann",
    )
    assert book.paused(0) and book.next_deadline() == 100  # open again, its deadline kept
    # The same decision record again (a rewound source) is dropped; a new one applies.
    assert book.offer(decision("w", by="ann"), runs_pending=True, now_ms=30) == "duplicate"
    again = book.offer(decision("w", by="ann", fingerprint="f2"), runs_pending=True, now_ms=40)
    assert isinstance(again, Apply) and again.decision.fingerprint == "f2"


def test_a_timeout_stands_under_a_changed_plan():
    book = WaitBook()
    book.register(approval("w", timeout_ms=100, fingerprint="f1"), seq=0, now_ms=0)
    book.due(200)
    registered = book.register(approval("w", timeout_ms=100, fingerprint="f2"), seq=0, now_ms=300)
    assert not registered.new and not registered.refused
    assert registered.apply is not None and registered.apply.decision.verdict == "timed_out"


def test_a_wait_registered_without_a_fingerprint_stands_under_any_plan():
    """A wait an earlier version registered (no fingerprint): nothing to compare, it stands."""
    book = WaitBook()
    book.register(approval("w"), seq=0, now_ms=0)
    book.offer(decision("w", by="ann"), runs_pending=True, now_ms=1)
    registered = book.register(approval("w", fingerprint="f2"), seq=0, now_ms=2)
    assert not registered.new and registered.apply is not None and not registered.refused
