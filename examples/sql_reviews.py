"""Product reviews from a Kafka table defined in SQL, through an agent, into a SQL result table
(the job-spec twin: ``jobs/sql_reviews.yaml``; docs/pipelines.md, "Tables and SQL").

The agent asks the scripted model (no network) for each review's sentiment; its answers are a
table with a column per field of :class:`ReviewSentiment`, inserted by SQL into a Kafka table.
Reviews it cannot read are dead letters, printed apart. With the broker of ``scripts/kafka.sh``::

    python -m examples.sql_reviews --bootstrap 127.0.0.1:9092

reads topic ``reviews`` (JSON objects with review_id, product, stars, text) up to its end and
writes ``review-sentiments``.
"""

from __future__ import annotations

import argparse

from pydantic import BaseModel
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
    action,
)
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.providers import ScriptedChatModelConnection


class ReviewSentiment(BaseModel):
    """The agent's answer: one row of the result table."""

    review_id: str
    product: str
    sentiment: str


@action(InputEvent, sends=[ChatRequestEvent])
def ask_for_sentiment(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.short_term_memory.set("review", event.input)
    message = ChatMessage(role="user", content=f"{event.input['stars']} stars")
    ctx.send_event(ChatRequestEvent(model="model", messages=[message]))


@action(ChatResponseEvent, sends=[OutputEvent])
def sentiment_found(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    review = ctx.short_term_memory.get("review")
    sentiment = event.response.content
    if sentiment == "unreadable":
        raise ValueError(f"review {review['review_id']} has no stars")
    answer = ReviewSentiment(
        review_id=review["review_id"], product=review["product"], sentiment=sentiment
    )
    ctx.send_event(OutputEvent(output=answer))


def review_sentiment() -> Agent:
    """One run per review: 4-5 stars positive, 1-3 negative, 0 a failure (a dead letter)."""
    agent = Agent(name="review_sentiment", error_policy="emit", output_type=ReviewSentiment)
    agent.add_action(ask_for_sentiment)
    agent.add_action(sentiment_found)
    agent.add_resource(
        "conn",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name="review-sentiment",
        turns=[
            {"match": "^[45] stars", "content": "positive"},
            {"match": "^[123] stars", "content": "negative"},
            {"content": "unreadable"},
        ],
    )
    agent.add_resource("model", ResourceType.CHAT_MODEL, ChatModelSetup, connection="conn")
    return agent


REVIEW_SENTIMENT = review_sentiment()
"""The agent, as ``examples.sql_reviews:REVIEW_SENTIMENT`` for the job spec."""


def reviews_table(topic: str, bootstrap: str, *, bounded: bool) -> str:
    """The SQL of the input table: JSON reviews of a Kafka topic (to its end if ``bounded``)."""
    until_end = ", 'scan.bounded.mode' = 'latest-offset'" if bounded else ""
    return (
        "CREATE TABLE reviews (review_id STRING, product STRING, stars INT, text STRING) "
        f"WITH ('connector' = 'kafka', 'topic' = '{topic}', "
        f"'properties.bootstrap.servers' = '{bootstrap}', "
        "'properties.group.id' = 'sql-reviews', 'scan.startup.mode' = 'earliest-offset', "
        f"'format' = 'json'{until_end})"
    )


def sentiments_table(topic: str, bootstrap: str) -> str:
    """The SQL of the result table: one JSON record per answer in a Kafka topic."""
    return (
        "CREATE TABLE review_sentiments (review_id STRING, product STRING, sentiment STRING) "
        f"WITH ('connector' = 'kafka', 'topic' = '{topic}', "
        f"'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'json')"
    )


def build(
    env: StreamExecutionEnvironment,
    bootstrap: str,
    source_topic: str,
    sink_topic: str,
    *,
    bounded: bool = True,
) -> None:
    """Add the job to ``env``: SQL in, the agent, SQL out."""
    agents = AgentsExecutionEnvironment(env)
    agents.table_env.execute_sql(reviews_table(source_topic, bootstrap, bounded=bounded))
    agents.table_env.execute_sql(sentiments_table(sink_topic, bootstrap))
    reviews = agents.table_env.sql_query("SELECT review_id, product, stars, text FROM reviews")
    analysed = agents.from_table(reviews, key="review_id").apply(REVIEW_SENTIMENT)
    agents.insert_into("review_sentiments", analysed.to_table())
    analysed.dead_letters().print("dead letter")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--source-topic", default="reviews")
    parser.add_argument("--sink-topic", default="review-sentiments")
    args = parser.parse_args()
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args.bootstrap, args.source_topic, args.sink_topic)
    env.execute("sql-reviews")


if __name__ == "__main__":
    main()
