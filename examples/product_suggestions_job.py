"""The product-suggestion pipeline of examples/product_suggestions.py, built in Python and run
on the local mini-cluster (jobs/product_suggestions.yaml is the same job as a job spec)::

    python -m examples.product_suggestions_job [--reviews FILE] [--every N]

prints each product's suggestions with the reviews they come from, and any dead letter.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyflink.common import Configuration, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment

from examples.product_suggestions import (
    PRODUCT_SUGGESTIONS,
    PRODUCT_SUMMARY,
    REVIEW_ANALYSIS,
    REVIEWS_PER_SUMMARY,
)
from flink_agents.api import Agent
from flink_agents.flink import AgentInput, AgentsExecutionEnvironment

REVIEWS_KEY = "product"
"""Stage 1 runs one review per run, keyed by product rather than by review: a key's runs go one
at a time, so each product's analyses reach the summary in the file's order and its lists of
three are the same on every run and every replay (docs/pipelines.md, "Stages that aggregate")."""
REVIEWS_FILE = Path(__file__).resolve().parents[1] / "jobs" / "data" / "product_reviews.jsonl"


def pipeline(
    reviews: AgentInput,
    *,
    stages: tuple[Agent, Agent, Agent] | None = None,
    every: int = REVIEWS_PER_SUMMARY,
) -> tuple[AgentInput, DataStream]:
    """The three stages on ``reviews`` (an :class:`~flink_agents.flink.AgentInput` keyed by
    product, see :data:`REVIEWS_KEY`): the suggestions (an ``AgentInput``) and every stage's
    dead letters (a stream). ``stages``: the three agents, if not the module's."""
    analysis, summary, suggestions = stages or (
        REVIEW_ANALYSIS,
        PRODUCT_SUMMARY,
        PRODUCT_SUGGESTIONS,
    )
    analysed = reviews.apply(analysis)
    summarized = analysed.then(key="product", every=every).apply(summary)
    suggested = summarized.then(key="product").apply(suggestions)
    dead_letters = analysed.dead_letters().union(
        summarized.dead_letters(), suggested.dead_letters()
    )
    return suggested, dead_letters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.product_suggestions_job")
    parser.add_argument("--reviews", type=Path, default=REVIEWS_FILE, help="JSON lines")
    parser.add_argument("--every", type=int, default=REVIEWS_PER_SUMMARY)
    args = parser.parse_args(argv)

    config = Configuration()
    config.set_string("python.execution-mode", "thread")  # a job spec's default too
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(1)
    agents = AgentsExecutionEnvironment(env)
    reviews = agents.from_file(args.reviews, key=REVIEWS_KEY)
    suggested, dead_letters = pipeline(reviews, every=args.every)
    suggested.to_datastream().map(
        lambda s: f"{s.product} ({', '.join(s.review_ids)}): {'; '.join(s.suggestions)}",
        output_type=Types.STRING(),
    ).print()
    dead_letters.print("dead letter")
    env.execute("product-suggestions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
