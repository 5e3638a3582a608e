"""Two agents for pipeline tests: reviews analysed per review, then noted per product.

Both ask a scripted model (no network) and record each answer through a durable call to
:func:`witness`, which appends a line per invocation to ``$REVIEW_PIPELINE_WITNESS`` (when set):
a completed call that a replay made again shows up twice. With ``$REVIEW_PIPELINE_CRASH`` set
to ``<n>:<flag file>``, the ``n``-th witness call of the product stage crashes the job once (a
``KillPointReached``, like a process death) and writes the time into the flag file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from flink_agents.api import (
    Agent,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.api.chat import ChatMessage
from flink_agents.api.events import ChatRequestEvent, ChatResponseEvent
from flink_agents.durable.faults import KillPoint, KillPointReached
from flink_agents.providers.scripted import ScriptedChatModelConnection

SLOW = pytest.mark.skipif(
    os.environ.get("FLINK_AGENTS_SLOW_PIPELINES") != "1",
    reason="slow (minutes): runs from `make pipelines`",
)
"""Marks the pipeline scenarios that run only from `make pipelines`."""

WITNESS_ENV = "REVIEW_PIPELINE_WITNESS"
CRASH_ENV = "REVIEW_PIPELINE_CRASH"


class Review(BaseModel):
    review_id: str
    product: str
    stars: int
    text: str


class ReviewAnalysis(BaseModel):
    """Stage 1's output type."""

    review_id: str
    product: str
    sentiment: str


class ProductNote(BaseModel):
    """Stage 2's output type."""

    product: str
    review_id: str
    note: str


def witness(stage: str, key: str, call: str) -> str:
    """Append ``stage key call time`` to the witness file; crash once where asked to."""
    path = os.environ.get(WITNESS_ENV)
    if path:
        with open(path, "a") as file:
            file.write(json.dumps([stage, key, call, time.time()]) + "\n")
    crash = os.environ.get(CRASH_ENV)
    if crash and stage == "product_notes" and path:
        at, flag = crash.split(":", 1)
        calls = sum(1 for line in Path(path).read_text().splitlines() if '"product_notes"' in line)
        if calls >= int(at) and not Path(flag).exists():
            Path(flag).write_text(str(time.time()))
            raise KillPointReached(KillPoint.AFTER_REPLY_BEFORE_RECORD, calls)
    return call


@action(InputEvent, sends=[ChatRequestEvent])
def ask_about_review(event: InputEvent, ctx: RunnerContext) -> None:
    review = Review.model_validate(event.input)
    ctx.short_term_memory.set("review", review.model_dump())
    message = ChatMessage(role="user", content=review.model_dump_json())
    ctx.send_event(ChatRequestEvent(model="model", messages=[message]))


@action(ChatResponseEvent, sends=[OutputEvent])
def analysed(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    review = Review.model_validate(ctx.short_term_memory.get("review"))
    sentiment = event.response.content
    ctx.durable_execute(witness, "review_analysis", review.review_id, sentiment)
    if sentiment == "unreadable":
        raise ValueError(f"review {review.review_id} cannot be analysed")
    ctx.send_event(
        OutputEvent(
            output=ReviewAnalysis(
                review_id=review.review_id, product=review.product, sentiment=sentiment
            )
        )
    )


@action(InputEvent, sends=[ChatRequestEvent])
def ask_for_note(event: InputEvent, ctx: RunnerContext) -> None:
    analysis = ReviewAnalysis.model_validate(event.input)
    ctx.short_term_memory.set("analysis", analysis.model_dump())
    message = ChatMessage(role="user", content=analysis.model_dump_json())
    ctx.send_event(ChatRequestEvent(model="model", messages=[message]))


@action(ChatResponseEvent, sends=[OutputEvent])
def noted(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    analysis = ReviewAnalysis.model_validate(ctx.short_term_memory.get("analysis"))
    note = event.response.content
    ctx.durable_execute(witness, "product_notes", analysis.product, analysis.review_id)
    ctx.send_event(
        OutputEvent(
            output=ProductNote(product=analysis.product, review_id=analysis.review_id, note=note)
        )
    )


def _with_model(agent: Agent, name: str, turns: list[dict[str, str]]) -> Agent:
    agent.add_resource(
        "conn",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name=name,
        turns=turns,
        latency_seconds=0.02,
    )
    agent.add_resource("model", ResourceType.CHAT_MODEL, ChatModelSetup, connection="conn")
    return agent


def review_analysis() -> Agent:
    """Stage 1: one run per review; stars 4-5 positive, 1-2 negative, 0 unreadable (fails)."""
    agent = Agent(name="review_analysis", error_policy="emit", output_type=ReviewAnalysis)
    agent.add_action(ask_about_review)
    agent.add_action(analysed)
    return _with_model(
        agent,
        "review-analysis",
        [
            {"match": '"stars":\\s*[45]\\b', "content": "positive"},
            {"match": '"stars":\\s*[123]\\b', "content": "negative"},
            {"match": '"stars":\\s*0\\b', "content": "unreadable"},
        ],
    )


def product_notes() -> Agent:
    """Stage 2: one run per analysis, keyed by product."""
    agent = Agent(name="product_notes", error_policy="emit", output_type=ProductNote)
    agent.add_action(ask_for_note)
    agent.add_action(noted)
    return _with_model(
        agent,
        "product-notes",
        [{"content": "$input.sentiment review $input.review_id of $input.product"}],
    )


REVIEW_ANALYSIS = review_analysis()
PRODUCT_NOTES = product_notes()
"""The two stages as ``module:attr`` references for job specs."""


def reviews(count: int, products: int = 3) -> list[Review]:
    """``count`` reviews of ``products`` products; every seventh unreadable (0 stars)."""
    return [
        Review(
            review_id=f"r{i:03d}",
            product=f"p{i % products}",
            stars=0 if i % 7 == 6 else 1 + i % 5,
            text=f"review {i}",
        )
        for i in range(count)
    ]
