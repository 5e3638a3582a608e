"""The waits crash matrix's oracle on made-up runs of the refunds job: a refund made again after
its outcome was recorded, a refund the person did not approve, a wait recorded with two
decisions and a decision that never took effect are each counted. Fast: no JVM, no broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.crash_waits import BEGIN, END, judge_waits, write_section
from examples.refunds_job import ASKED, EDITED, RefundRequest
from flink_agents.durable.store import CallResult, CallStatus

CRASH = 100.0
ARMED = [90.0, 101.0]
ORDERS = ["o-1", "o-2", "o-3"]
DECIDED: dict[str, dict[str, Any]] = {
    "o-1": {"verdict": "approve", "by": "ann"},
    "o-2": {"verdict": "edit", "by": "ann", "arguments": {"order": "o-2", "amount": EDITED}},
}  # o-3: left to time out


def _recorded(call_id: str, args: list[Any], payload: Any) -> CallResult:
    return CallResult(
        call_id=call_id,
        status=CallStatus.SUCCEEDED,
        payload=payload,
        arguments=json.dumps({"args": args}),
    )


def _refund(order: str, amount: int, key: str) -> CallResult:
    return _recorded(f"tool:{order}", [{"order": order, "amount": amount}, key], "refunded")


def _wait(order: str, verdict: str) -> CallResult:
    asked = {"kind": "approval", "request": {"tool": "issue_refund", "arguments": {"order": order}}}
    return _recorded(f"approval:{order}", [asked], {"verdict": verdict})


def _output(order: str, text: str) -> dict[str, Any]:
    return {"agent": "refunds", "key": order, "seq": 0, "output": text}


GOOD_OUTCOMES = [
    (95.0, _wait("o-1", "approved")),
    (96.0, _refund("o-1", ASKED, "k1")),
    (97.0, _wait("o-2", "edited")),
    (98.0, _refund("o-2", EDITED, "k2")),
    (120.0, _wait("o-3", "timed_out")),
]
GOOD_OUTPUTS = [
    _output("o-1", f"refunded {ASKED} on o-1"),
    _output("o-2", f"refunded {EDITED} on o-2"),
    _output("o-3", "the call was not run: its approval timed out"),
]
GOOD_REQUESTS = [RefundRequest("k1", "o-1", ASKED, 95.5), RefundRequest("k2", "o-2", EDITED, 97.5)]


def _judge(
    requests: list[RefundRequest] = GOOD_REQUESTS,
    outcomes: list[tuple[float, CallResult]] = GOOD_OUTCOMES,
    outputs: list[dict[str, Any]] = GOOD_OUTPUTS,
) -> dict[str, int]:
    verdict = judge_waits(requests, outcomes, outputs, DECIDED, ORDERS, [CRASH], ARMED)
    assert verdict.ok(undecided=1) == (verdict.__dict__ == _CLEAN)
    return dict(verdict.__dict__)


_CLEAN = {
    "reinvoked": 0,
    "sent_again": 0,
    "in_flight": 0,
    "unmatched": 0,
    "gated_twice": 0,
    "unapproved": 0,
    "resolved_twice": 0,
    "unresolved": 0,
    "decisions_lost": 0,
    "timed_out": 1,
}


def test_a_run_that_kept_every_promise_counts_nothing_broken() -> None:
    assert _judge() == _CLEAN


def test_a_refund_recorded_before_the_crash_and_sent_after_it_is_reinvoked() -> None:
    found = _judge(requests=[*GOOD_REQUESTS, RefundRequest("k1", "o-1", ASKED, 102.0)])
    assert (found["reinvoked"], found["sent_again"]) == (1, 1)


def test_a_refund_under_a_second_key_or_without_approval_is_counted() -> None:
    found = _judge(
        requests=[
            *GOOD_REQUESTS,
            RefundRequest("k1-again", "o-1", ASKED, 103.0),  # the gated tool run twice
            RefundRequest("k3", "o-3", ASKED, 104.0),  # never approved
            RefundRequest("k2", "o-2", ASKED, 99.0),  # not the edited amount
        ]
    )
    assert (found["gated_twice"], found["unapproved"]) == (1, 2)
    assert found["unmatched"] == 2  # never recorded: k1-again, k3


def test_a_wait_recorded_with_two_decisions_or_answered_twice_differently_resolved_twice() -> None:
    found = _judge(
        outcomes=[*GOOD_OUTCOMES, (130.0, _wait("o-3", "approved"))],
        outputs=[*GOOD_OUTPUTS, _output("o-1", "the call was not run: it was rejected")],
    )
    assert found["resolved_twice"] == 2


def test_a_decided_order_that_timed_out_or_never_answered_lost_its_decision() -> None:
    found = _judge(
        outcomes=GOOD_OUTCOMES[:3] + GOOD_OUTCOMES[4:],
        outputs=[GOOD_OUTPUTS[0], _output("o-2", "the call was not run: its approval timed out")],
        requests=GOOD_REQUESTS[:1],
    )
    assert (found["decisions_lost"], found["unresolved"], found["timed_out"]) == (1, 1, 0)


def test_the_waits_section_is_replaced_in_place_and_added_when_missing(tmp_path: Path) -> None:
    doc = tmp_path / "reliability.md"
    doc.write_text("# Reliability\n\nbefore\n")
    write_section(doc, f"{BEGIN}\nfirst\n{END}")
    doc.write_text(doc.read_text() + "\nafter\n")
    write_section(doc, f"{BEGIN}\nsecond\n{END}")
    assert doc.read_text() == f"# Reliability\n\nbefore\n\n{BEGIN}\nsecond\n{END}\n\nafter\n"
