"""A hand-written agent: classify support tickets, count them per customer, route them.

Shows custom events, sync and async actions, action config and short-term (per key) memory.
"""

from __future__ import annotations

import asyncio

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action


class Classified(Event):
    """A ticket with its category."""

    ticket: str
    category: str


class TriageAgent(Agent):
    """Classifies by keyword, then routes to a queue; tickets are keyed by customer."""

    @action(InputEvent, config={"urgent_words": ["down", "outage", "broken"]})
    def classify(event: InputEvent, ctx: RunnerContext) -> None:
        text = str(event.input["text"]).lower()
        urgent = any(word in text for word in ctx.action_config["urgent_words"])
        ctx.send_event(
            Classified(ticket=event.input["text"], category="urgent" if urgent else "normal")
        )

    @action(Classified)
    async def route(event: Classified, ctx: RunnerContext) -> None:
        # stands in for a call to a ticketing service
        queue = await ctx.durable_execute_async(_pick_queue, event.category, ctx.config["team"])
        seen = ctx.short_term_memory.get("tickets", 0) + 1
        ctx.short_term_memory.set("tickets", seen)
        ctx.send_event(
            OutputEvent(output={"queue": queue, "category": event.category, "nth": seen})
        )


async def _pick_queue(category: str, team: str) -> str:
    await asyncio.sleep(0)
    return f"{team}-{category}"


def build_agent() -> TriageAgent:
    """The triage agent."""
    return TriageAgent(name="ticket_triage", config={"team": "support"}, error_policy="emit")
