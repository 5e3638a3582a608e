"""YAML ``memory_sets:``: long-term memory sets (docs/memory.md) as LONG_TERM_MEMORY resources."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flink_agents.api import ResourceType
from flink_agents.plan import YamlAgentError, compile_yaml, load_yaml_agents

AGENT = """\
agents:
  - name: remembering
    embedding_connections:
      embedding_connection: {class: hashing, arguments: {dimensions: 32}}
    embedding_models:
      embedding_model: {connection: embedding_connection, dimensions: 32}
    memory_sets:
      facts: %s
    actions:
      - function: tests.memory_samples:remember
"""


def _write(tmp_path: Path, memory_set: str) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(textwrap.dedent(AGENT % memory_set))
    return path


def test_a_memory_set_is_a_long_term_memory_resource_with_its_settings(tmp_path: Path) -> None:
    plan = compile_yaml(_write(tmp_path, "{embedding_model: embedding_model, max_items: 50}"))
    facts = plan.resources["facts"]
    assert facts.type == ResourceType.LONG_TERM_MEMORY
    assert facts.class_path == "flink_agents.api.long_term_memory:LongTermMemorySetup"
    assert facts.arguments == {"embedding_model": "embedding_model", "max_items": 50}


@pytest.mark.parametrize(
    ("memory_set", "named"),
    [("{max_items: 5}", "embedding_model"), ("{embedding_model: e, backend: chroma}", "backend")],
)
def test_a_bad_memory_set_is_named_with_file_and_line(
    tmp_path: Path, memory_set: str, named: str
) -> None:
    path = _write(tmp_path, memory_set)
    with pytest.raises(YamlAgentError) as error:
        load_yaml_agents(path)
    assert f"{path}:8:" in str(error.value)
    assert named in str(error.value)


def test_a_memory_set_naming_no_embedding_model_is_refused_at_compile(tmp_path: Path) -> None:
    path = _write(tmp_path, "{embedding_model: embedder}")
    with pytest.raises(YamlAgentError) as error:
        compile_yaml(path)
    assert f"{path}:8:" in str(error.value)
    assert "no resource named 'embedder'" in str(error.value)


ON_CHROMA = """\
agents:
  - name: remembering
    embedding_connections:
      embedding_connection: {class: hashing, arguments: {dimensions: 32}}
    embedding_models:
      embedding_model: {connection: embedding_connection, dimensions: 32}
    vector_stores:
      memory_store: {class: chroma, arguments: {collection: memory, url: "http://127.0.0.1:8000"}}
    memory_sets:
      facts: {embedding_model: embedding_model, backend: vector_store, vector_store: %s}
    actions:
      - function: tests.memory_samples:remember
"""


def test_a_memory_set_on_a_vector_store_names_it(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(ON_CHROMA % "memory_store")
    plan = compile_yaml(path)
    assert plan.resources["facts"].arguments == {
        "embedding_model": "embedding_model",
        "backend": "vector_store",
        "vector_store": "memory_store",
    }
    assert plan.resources["memory_store"].type == ResourceType.VECTOR_STORE


def test_a_memory_set_naming_no_vector_store_is_refused_at_compile(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(ON_CHROMA % "elsewhere")
    with pytest.raises(YamlAgentError) as error:
        compile_yaml(path)
    assert "no resource named 'elsewhere'" in str(error.value)


BY_DEFAULT = ON_CHROMA.replace(
    "  - name: remembering\n",
    "  - name: remembering\n"
    "    config: {long_term_memory_backend: %s, long_term_memory_vector_store: memory_store}\n",
).replace("backend: vector_store, vector_store: %s}", "}")
"""The agent on Chroma, its memory set naming no backend: the agent's config names it."""


def test_an_agents_default_backend_is_its_config(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(BY_DEFAULT % "vector_store")
    plan = compile_yaml(path)
    assert plan.config["long_term_memory_backend"] == "vector_store"
    assert plan.resources["facts"].arguments == {"embedding_model": "embedding_model"}


def test_an_unknown_default_backend_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(BY_DEFAULT % "redis")
    with pytest.raises(YamlAgentError) as error:
        compile_yaml(path)
    assert f"{path}:3:" in str(error.value)
    assert "unknown long-term memory backend 'redis'" in str(error.value)


def test_a_memory_sets_compaction_is_checked_at_its_line(tmp_path: Path) -> None:
    good = "{embedding_model: embedding_model, compaction: {chat_model: m, max_items: 100}}"
    with pytest.raises(YamlAgentError) as error:  # `m` is no chat model
        compile_yaml(_write(tmp_path, good))
    assert f"{tmp_path / 'agents.yaml'}:8:" in str(error.value)
    assert "no resource named 'm'" in str(error.value)
    bad = "{embedding_model: embedding_model, compaction: {chat_model: m, max_items: 1}}"
    with pytest.raises(YamlAgentError) as error:
        load_yaml_agents(_write(tmp_path, bad))
    assert "max_items" in str(error.value)
