"""examples/refunds.py: every refund waits for approval; approved, edited and rejected."""

from __future__ import annotations

from examples.refunds import build_agent, decide
from flink_agents.durable.store import StoreConfig
from flink_agents.runtime import RuntimeSettings, run_local


def test_the_refunds_example_pauses_every_refund_and_follows_the_decisions():
    settings = RuntimeSettings(store=StoreConfig(kind="memory"))
    orders = [{"order": f"o-{n}"} for n in (1, 2, 3)]
    paused = run_local(build_agent(), orders, key="order", settings=settings)
    assert [r.paused and r.paused.request["arguments"]["amount"] for r in paused] == [2500] * 3
    answers = run_local(
        build_agent(), orders, key="order", settings=settings, decisions=decide(paused)
    )
    assert [r.output_values for r in answers] == [
        ["refunded 2500 on o-1"],
        ["refunded 1250 on o-2"],
        ["the call was not run: it was rejected: no"],
    ]
