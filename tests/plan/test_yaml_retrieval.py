"""YAML blocks of retrieval: embedding connections and models, vector stores, react.retrieval."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_agents.api.resources import ResourceType
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.yaml.loader import YamlAgentError, load_yaml_agent

AGENT = """\
agents:
  - name: qa
    react:
      chat_model: chat_model
      retrieval: {embedding_model: embedder, vector_store: STORE, top_k: 2}
    connections:
      llm: {class: scripted, arguments: {turns: [{content: ok}]}}
    chat_models:
      chat_model: {connection: llm}
    embedding_connections:
      local: {class: hashing, arguments: {dimensions: 64}}
    embedding_models:
      embedder: {connection: local, dimensions: 64, batch_size: 8}
    vector_stores:
      docs: {class: memory, arguments: {collection: yaml-test}}
"""


def test_aliases_expand_and_the_resources_have_their_kinds(tmp_path: Path) -> None:
    path = tmp_path / "qa.yaml"
    path.write_text(AGENT.replace("STORE", "docs"))

    plan = compile_agent(load_yaml_agent(path))

    local, embedder, docs = (plan.resources[n] for n in ("local", "embedder", "docs"))
    assert (local.type, local.class_path) == (
        ResourceType.EMBEDDING_MODEL_CONNECTION,
        "flink_agents.providers.hashing_embeddings:HashingEmbeddingModelConnection",
    )
    assert (embedder.type, embedder.arguments) == (
        ResourceType.EMBEDDING_MODEL,
        {"connection": "local", "dimensions": 64, "batch_size": 8},
    )
    assert docs.class_path == "flink_agents.providers.memory_vector_store:InMemoryVectorStore"
    [retrieve] = [a for a in plan.actions if a.name == "retrieve_input"]
    assert retrieve.config == {"embedding_model": "embedder", "vector_store": "docs", "top_k": 2}


def test_a_retrieval_naming_a_missing_store_is_reported_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "qa.yaml"
    path.write_text(AGENT.replace("STORE", "nowhere"))

    with pytest.raises(YamlAgentError) as info:
        load_yaml_agent(path)

    [issue] = info.value.issues
    assert (issue.line, issue.field) == (5, "agents[0].react.retrieval.vector_store")
    assert "vector_store 'nowhere'" in issue.message


def test_an_embedding_model_needs_no_dimensions_and_runs(tmp_path: Path) -> None:
    from flink_agents.providers.memory_vector_store import InMemoryVectorStore
    from flink_agents.runtime import run_local

    path = tmp_path / "qa.yaml"
    path.write_text(
        AGENT.replace("STORE", "docs").replace("dimensions: 64, batch_size", "batch_size")
    )
    agent = load_yaml_agent(path)
    assert compile_agent(agent).resources["embedder"].arguments == {
        "connection": "local",
        "batch_size": 8,
    }
    InMemoryVectorStore.reset("yaml-test")
    [result] = run_local(agent, ["What is Flink?"], key=lambda question: question)
    assert result.output_values == ["ok"]  # embedded (64 long, from the reply) and searched
