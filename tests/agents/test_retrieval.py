"""The retrieval step, in a ReAct agent and in a workflow agent, over ingested documents."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flink_agents.agents.retrieval import NO_PASSAGES, format_passages, query_text
from flink_agents.api.prompts import Prompt
from flink_agents.api.vector_stores import VectorMatch
from flink_agents.durable.store import StoreConfig
from flink_agents.plan import compile_agent
from flink_agents.plan.errors import PlanValidationError
from flink_agents.providers.memory_vector_store import InMemoryVectorStore
from flink_agents.runtime import ActionError, RuntimeSettings, run_local
from tests.agents.retrieval_samples import (
    DOCS,
    ProbedChatConnection,
    ingestion_agent,
    qa_agent,
    requesting_agent,
    workflow_agent,
)
from tests.durable.helpers import PROBE

COLLECTION = "retrieval-test"
ANSWER_FROM_KAFKA = [
    {"match": r"source: guide/kafka\.md", "content": "Partitions are shared by the group."},
    {"content": "The documents do not say."},
]


@pytest.fixture(autouse=True)
def _ingested() -> Iterator[None]:
    PROBE.reset()
    InMemoryVectorStore.reset(COLLECTION)
    run_local(ingestion_agent(COLLECTION), DOCS, key="id")
    PROBE.counts.clear()
    ProbedChatConnection.requests.clear()
    yield
    InMemoryVectorStore.reset(COLLECTION)


def test_react_prompt_gets_the_passages_in_its_context_placeholder() -> None:
    prompt = Prompt(text="Passages:\n{context}\n\nQuestion: {question}")
    agent = qa_agent(COLLECTION, ANSWER_FROM_KAFKA, prompt=prompt, query_field="question")

    [result] = run_local(
        agent, [{"id": 1, "question": "How does a consumer group share partitions?"}], key="id"
    )

    assert result.output_values == ["Partitions are shared by the group."]
    [request] = ProbedChatConnection.requests
    [user] = request.messages
    assert user.content.startswith("Passages:\n[1] (source: guide/kafka.md)\nA consumer group")
    assert user.content.endswith("Question: How does a consumer group share partitions?")
    assert (PROBE.counts["embed"], PROBE.counts["search"], PROBE.counts["chat"]) == (1, 1, 1)


def test_without_a_context_placeholder_the_passages_come_as_a_system_message() -> None:
    agent = qa_agent(COLLECTION, [{"content": "ok"}], top_k=1)

    run_local(agent, ["When does the job restart from a checkpoint?"], key=lambda _: "k")

    [request] = ProbedChatConnection.requests
    system, user = request.messages
    assert system.role == "system"
    assert "[1] (source: guide/flink.md)\nAfter a failure the job restarts" in system.content
    assert "[2]" not in system.content
    assert user.content == "When does the job restart from a checkpoint?"


def test_a_workflow_agent_retrieves_with_a_metadata_filter_and_top_k() -> None:
    question = "checkpoint partitions pasta"
    [everything] = run_local(workflow_agent(COLLECTION, top_k=5), [question], key=lambda _: "k")
    [filtered] = run_local(
        workflow_agent(COLLECTION, top_k=5, where={"lang": "en"}), [question], key=lambda _: "k"
    )

    assert len(everything.output_values[0]["sources"]) == 5
    assert filtered.output_values == [
        {"query": question, "sources": ["guide/flink.md", "guide/flink.md"]}
    ]


def test_min_score_drops_unrelated_passages() -> None:
    agent = workflow_agent(COLLECTION, top_k=5, min_score=0.3)

    [result] = run_local(agent, ["How long to boil the pasta?"], key=lambda _: "k")

    assert result.output_values[0]["sources"] == ["guide/cooking.md"]


@pytest.mark.parametrize("store", [None, "memory"], ids=["no store", "memory store"])
def test_retrieval_request_events_are_answered_by_the_added_retrieval_action(
    store: str | None,
) -> None:
    agent = requesting_agent(COLLECTION)
    assert [a.name for a in compile_agent(agent).actions] == [
        "ask_twice",
        "first_source",
        "retrieval_action",
    ]
    questions = ["How do consumer groups share partitions?", "How long to boil pasta?"]

    settings = RuntimeSettings(store=StoreConfig(kind=store)) if store else None
    [result] = run_local(agent, [{"id": 1, "questions": questions}], key="id", settings=settings)

    assert sorted(result.output_values, key=lambda o: o["query"]) == [
        {"query": questions[0], "source": "guide/kafka.md"},
        {"query": questions[1], "source": "guide/cooking.md"},
    ]
    assert (PROBE.counts["embed"], PROBE.counts["search"]) == (2, 2)


def test_a_missing_query_field_fails_the_run() -> None:
    agent = workflow_agent(COLLECTION, query_field="question")

    with pytest.raises(ActionError, match="question"):
        run_local(agent, [{"id": 1, "text": "no question"}], key="id")


def test_the_compiler_checks_the_resources_retrieval_names() -> None:
    agent = workflow_agent(COLLECTION, vector_store="nowhere")

    with pytest.raises(PlanValidationError, match="vector_store 'nowhere'"):
        compile_agent(agent)


def test_query_text_and_passage_formatting() -> None:
    assert query_text("plain", None) == "plain"
    assert query_text({"b": 1, "a": 2}, None) == '{"a": 2, "b": 1}'
    assert query_text({"q": "asked"}, "q") == "asked"
    assert format_passages([]) == NO_PASSAGES
    passage = VectorMatch(id="1", document=" text \n", metadata={}, score=0.5)
    assert format_passages([passage]) == "[1]\ntext"
