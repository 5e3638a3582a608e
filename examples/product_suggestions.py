"""Product suggestions from reviews: three agents chained in one Flink job.

1. ``review_analysis``, per review (keyed by product, so that each product's reviews are
   analysed in order): a score from 1 to 5 and the complaints the review raises;
2. ``product_summary``, per product, once every :data:`REVIEWS_PER_SUMMARY` analyses: their
   average score and complaints, summed up in a line;
3. ``product_suggestions``, per summary: what the product's team could improve.

Stage 2 aggregates: ``then(key="product", every=3)`` hands it a list of three
:class:`ReviewAnalysis` of one product per run (the last, shorter list of each product when the
input ends). Each stage's answers are typed; failed runs are dead letters, apart. The models are
scripted, so the example runs offline; give a builder another connection to ask a real model::

    python -m examples.product_suggestions_job               # from Python, on the mini-cluster
    flink-agents run jobs/product_suggestions.yaml           # the same job from a job spec

Both print each product's suggestions (docs/pipelines.md).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pydantic import BaseModel, TypeAdapter

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ResourceDeclaration,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.providers import ScriptedChatModelConnection

REVIEWS_PER_SUMMARY = 3


class Review(BaseModel):
    """An input record."""

    review_id: str
    product: str
    text: str


class ReviewAnalysis(BaseModel):
    """Stage 1's answer: one per review."""

    review_id: str
    product: str
    score: int
    complaints: list[str]


class ProductSummary(BaseModel):
    """Stage 2's answer: one per list of analyses of a product."""

    product: str
    review_ids: list[str]
    average_score: float
    complaints: list[str]
    """Most frequent first."""
    summary: str


class ProductSuggestions(BaseModel):
    """Stage 3's answer: one per summary."""

    product: str
    review_ids: list[str]
    suggestions: list[str]


# The scripted models read the user message (JSON) and answer JSON or a line, like a real model
# asked for it would; the first turn whose pattern is found in the message wins.
ANALYSIS_TURNS = [
    {
        "match": r"(?i)\b(broke|cracked|fell apart)\b",
        "content": '{"score": 1, "complaints": ["durability"]}',
    },
    {"match": r"(?i)\b(loud|noisy|rattles?)\b", "content": '{"score": 2, "complaints": ["noise"]}'},
    {"match": r"(?i)\b(slow|ages)\b", "content": '{"score": 3, "complaints": ["speed"]}'},
    {"content": '{"score": 5, "complaints": []}'},
]
SUMMARY_TURNS = [
    {"match": r'"complaints": \[\]', "content": "$input.product: every reviewer is happy"},
    {"content": "$input.product: reviewers mostly mention $input.complaints.0"},
]
SUGGESTION_TURNS = [
    {
        "match": r'"complaints": \["durability"',
        "content": '["choose sturdier materials", "offer a longer warranty"]',
    },
    {"match": r'"complaints": \["noise"', "content": '["find and quieten what makes the noise"]'},
    {"match": r'"complaints": \["speed"', "content": '["make it quicker to use"]'},
    {"content": '["keep it as it is"]'},
]


def _llm(name: str, turns: list[dict[str, str]]) -> ResourceDeclaration:
    return ResourceDeclaration.connection(
        "llm", ScriptedChatModelConnection, name=name, turns=turns
    )


def _with_model(agent: Agent, llm: ResourceDeclaration) -> Agent:
    agent.add_shared([llm])
    agent.add_resource("model", ResourceType.CHAT_MODEL, ChatModelSetup, connection=llm.name)
    return agent


def _ask(ctx: RunnerContext, question: dict[str, Any]) -> None:
    message = ChatMessage(role="user", content=json.dumps(question, sort_keys=True))
    ctx.send_event(ChatRequestEvent(model="model", messages=[message]))


# Stage 1: one review per run.


@action(InputEvent, sends=[ChatRequestEvent])
def ask_for_analysis(event: InputEvent, ctx: RunnerContext) -> None:
    review = Review.model_validate(event.input)
    ctx.short_term_memory.set("review", review.model_dump())
    _ask(ctx, review.model_dump())


@action(ChatResponseEvent, sends=[OutputEvent])
def analysed(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    review = Review.model_validate(ctx.short_term_memory.get("review"))
    answer = json.loads(event.response.content)
    analysis = ReviewAnalysis(review_id=review.review_id, product=review.product, **answer)
    ctx.send_event(OutputEvent(output=analysis))


# Stage 2: a list of analyses of one product per run.

ANALYSES = TypeAdapter(list[ReviewAnalysis])


def figures(analyses: list[ReviewAnalysis]) -> dict[str, Any]:
    """What stage 2 tells its model about a list of analyses: the product, the reviews, their
    average score and their complaints, most frequent first."""
    complaints = Counter(c for analysis in analyses for c in analysis.complaints)
    return {
        "product": analyses[0].product,
        "review_ids": [analysis.review_id for analysis in analyses],
        "average_score": round(sum(a.score for a in analyses) / len(analyses), 2),
        "complaints": [name for name, _ in sorted(complaints.items(), key=lambda c: (-c[1], c[0]))],
    }


@action(InputEvent, sends=[ChatRequestEvent])
def ask_for_summary(event: InputEvent, ctx: RunnerContext) -> None:
    found = figures(ANALYSES.validate_python(event.input))
    ctx.short_term_memory.set("figures", found)
    _ask(ctx, found)


@action(ChatResponseEvent, sends=[OutputEvent])
def summarized(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    found = ctx.short_term_memory.get("figures")
    ctx.send_event(OutputEvent(output=ProductSummary(**found, summary=event.response.content)))


# Stage 3: one summary per run.


@action(InputEvent, sends=[ChatRequestEvent])
def ask_for_suggestions(event: InputEvent, ctx: RunnerContext) -> None:
    summary = ProductSummary.model_validate(event.input)
    ctx.short_term_memory.set("summary", summary.model_dump())
    _ask(ctx, summary.model_dump())


@action(ChatResponseEvent, sends=[OutputEvent])
def suggested(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    summary = ProductSummary.model_validate(ctx.short_term_memory.get("summary"))
    suggestions = TypeAdapter(list[str]).validate_json(event.response.content)
    ctx.send_event(
        OutputEvent(
            output=ProductSuggestions(
                product=summary.product, review_ids=summary.review_ids, suggestions=suggestions
            )
        )
    )


def review_analysis_agent(llm: ResourceDeclaration | None = None) -> Agent:
    """Stage 1 (one review per run); ``llm``: its model's connection (default: scripted)."""
    agent = Agent(name="review_analysis", error_policy="emit", output_type=ReviewAnalysis)
    agent.add_action(ask_for_analysis).add_action(analysed)
    return _with_model(agent, llm or _llm("review-analysis", ANALYSIS_TURNS))


def product_summary_agent(llm: ResourceDeclaration | None = None) -> Agent:
    """Stage 2 (key: ``product``, ``every`` :data:`REVIEWS_PER_SUMMARY` analyses)."""
    agent = Agent(name="product_summary", error_policy="emit", output_type=ProductSummary)
    agent.add_action(ask_for_summary).add_action(summarized)
    return _with_model(agent, llm or _llm("product-summary", SUMMARY_TURNS))


def product_suggestions_agent(llm: ResourceDeclaration | None = None) -> Agent:
    """Stage 3 (key: ``product``, one summary per run)."""
    agent = Agent(name="product_suggestions", error_policy="emit", output_type=ProductSuggestions)
    agent.add_action(ask_for_suggestions).add_action(suggested)
    return _with_model(agent, llm or _llm("product-suggestions", SUGGESTION_TURNS))


REVIEW_ANALYSIS = review_analysis_agent()
PRODUCT_SUMMARY = product_summary_agent()
PRODUCT_SUGGESTIONS = product_suggestions_agent()
"""The three stages as ``module:attr`` references (jobs/product_suggestions.yaml)."""
