"""The built-in "remember" step (``remember_run``): at each output of a run, the set's extraction
model is shown the run's input and that output, and the facts it answers are written."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_agents.agents.remember_step import run_transcript
from flink_agents.api import InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.chat import ChatRequest
from flink_agents.durable.identity import canonical_json
from flink_agents.plan import YamlAgentError, compile_yaml
from flink_agents.plan.models import AgentPlan
from tests.memory_samples import memory_plan, run_keyed
from tests.sample_agents import RecordingChatConnection

TICKET = {"customer": "ada", "text": "My router is an XR-500 and the wifi keeps dropping."}
FACT = "The customer's router is an XR-500."
TURNS = [{"match": "XR-500", "content": f'["{FACT}"]'}, {"content": "[]"}]
ANSWER = {"answer": "Thanks, noted."}


@action(InputEvent)
async def acknowledge(event: InputEvent, ctx: RunnerContext) -> None:
    ctx.send_event(OutputEvent(output=ANSWER))


def remembering_plan() -> AgentPlan:
    """An agent that answers every input, with the remember step into ``facts``."""
    return memory_plan(
        acknowledge,
        extraction=True,
        extractor=RecordingChatConnection,
        extractor_turns=TURNS,
        remember_runs=True,
    )


@pytest.fixture
def requests() -> Iterator[list[ChatRequest]]:
    RecordingChatConnection.requests.clear()
    yield RecordingChatConnection.requests
    RecordingChatConnection.requests.clear()


def test_the_facts_of_a_runs_input_and_output_are_remembered(
    requests: list[ChatRequest],
) -> None:
    plan = remembering_plan()
    [result], states = run_keyed(plan, [("ada", TICKET)])
    assert result.output_values == [ANSWER]
    [request] = requests
    assert request.messages[-1].content == run_transcript(TICKET, ANSWER)
    items = states[canonical_json("ada")].long_term_memory["facts"]
    assert [(item.text, item.metadata) for item in items.values()] == [(FACT, {"source": "run"})]


def test_a_run_with_nothing_to_remember_writes_nothing(requests: list[ChatRequest]) -> None:
    plan = remembering_plan()
    [result], states = run_keyed(plan, [("bob", {"text": "Hello?"})])
    assert result.output_values == [ANSWER]
    assert len(requests) == 1
    assert states[canonical_json("bob")].long_term_memory == {}


def test_the_transcript_shows_text_as_it_is_and_other_values_as_json() -> None:
    assert run_transcript("hi", {"b": 1, "a": [2]}) == 'Input:\nhi\n\nOutput:\n{"a": [2], "b": 1}'


AGENT = """\
agents:
  - name: remembering
    embedding_connections:
      embedding_connection: {class: hashing, arguments: {dimensions: 32}}
    embedding_models:
      embedding_model: {connection: embedding_connection, dimensions: 32}
    connections:
      scripted: {class: scripted, arguments: {name: yaml-extractor, turns: [{content: "[]"}]}}
    chat_models:
      extractor: {connection: scripted, model: m}
    memory_sets:
      facts:
        embedding_model: embedding_model
        extraction: {chat_model: %s, instructions: List the facts as JSON strings.}
    actions:
      - function: tests.agents.test_remember_step:acknowledge
      - function: flink_agents.agents:remember_run
        config: {memory_set: %s}
"""


def _yaml(tmp_path: Path, chat_model: str, memory_set: str) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(textwrap.dedent(AGENT % (chat_model, memory_set)))
    return path


def test_yaml_declares_the_extraction_and_the_step(tmp_path: Path) -> None:
    plan = compile_yaml(_yaml(tmp_path, "extractor", "facts"))
    assert plan.resources["facts"].arguments["extraction"] == {
        "chat_model": "extractor",
        "instructions": "List the facts as JSON strings.",
    }
    [step] = [a for a in plan.actions if a.name == "remember_run"]
    assert step.config == {"memory_set": "facts"}
    assert sorted(step.listen_to) == ["InputEvent", "OutputEvent"]


@pytest.mark.parametrize(
    ("chat_model", "memory_set", "line", "problem"),
    [
        ("nobody", "facts", 14, "no resource named 'nobody'"),
        ("extractor", "nothing", 18, "no resource named 'nothing'"),
    ],
)
def test_an_extraction_or_step_naming_nothing_is_refused_at_compile_with_its_line(
    tmp_path: Path, chat_model: str, memory_set: str, line: int, problem: str
) -> None:
    path = _yaml(tmp_path, chat_model, memory_set)
    with pytest.raises(YamlAgentError) as error:
        compile_yaml(path)
    assert f"{path}:{line}:" in str(error.value)
    assert problem in str(error.value)
