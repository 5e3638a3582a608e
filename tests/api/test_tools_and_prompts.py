import asyncio
import threading
from typing import Annotated

import pytest
from pydantic import Field, ValidationError

from flink_agents.api import FunctionTool, Prompt
from flink_agents.api.attempts import CountedAttempts, tracking_attempts
from flink_agents.api.prompts import MissingPlaceholderError


def test_function_tool_schema_comes_from_signature_and_docstring():
    spec = FunctionTool(function="tests.sample_agents:add").spec()
    assert spec.name == "add"
    assert spec.description == "Add two numbers."
    props = spec.parameters["properties"]
    assert props["a"]["type"] == "integer"
    assert props["a"]["description"] == "The first number."
    assert props["b"]["description"] == "The second number, defaulting to one."
    assert props["b"]["default"] == 1
    assert spec.parameters["required"] == ["a"]


def described_by_fields(
    city: Annotated[str, Field(description="The city's name.")],
    days: Annotated[int, Field(ge=1, le=7)] = 1,
    unit: str = Field("c", description="c or f."),
) -> str:
    """A forecast, its parameters described as pydantic-ai and openai-agents users do."""
    return f"{city} {days} {unit}"


def test_function_tool_keeps_field_descriptions_and_constraints():
    tool = FunctionTool(function="tests.api.test_tools_and_prompts:described_by_fields")
    props = tool.spec().parameters["properties"]
    assert props["city"]["description"] == "The city's name."
    assert (props["days"]["minimum"], props["days"]["maximum"]) == (1, 7)
    assert (props["unit"]["description"], props["unit"]["default"]) == ("c or f.", "c")
    assert tool.spec().parameters["required"] == ["city"]
    with pytest.raises(ValidationError):
        asyncio.run(tool.call({"city": "Oslo", "days": 9}))
    assert asyncio.run(tool.call({"city": "Oslo"})) == "Oslo 1 c"


def test_function_tool_validates_and_calls_sync_and_async():
    add = FunctionTool(function="tests.sample_agents:add")
    assert asyncio.run(add.call({"a": "2", "b": 5})) == 7
    with pytest.raises(ValidationError):
        asyncio.run(add.call({"b": 5}))
    lookup = FunctionTool(function="tests.sample_agents:lookup", name="find")
    assert lookup.spec().name == "find"
    assert asyncio.run(lookup.call({"city": "Oslo"})) == {"city": "Oslo", "population": 4000}


def test_prompt_fills_placeholders_and_names_missing_ones():
    prompt = Prompt(
        messages=[
            {"role": "system", "content": "Be {tone}."},
            {"role": "user", "content": "{q} {{raw}}"},
        ]
    )
    messages = prompt.format_messages(tone="brief", q="Why?")
    assert [m.content for m in messages] == ["Be brief.", "Why? {raw}"]
    with pytest.raises(MissingPlaceholderError) as info:
        prompt.format_messages(tone="x")
    assert str(info.value) == "prompt needs 'q'; got ['tone']"  # not KeyError's quoted repr


def test_a_json_example_stands_in_a_prompt_unescaped():
    prompt = Prompt(text='Review: {review}\nAnswer as {\n  "id": {id},\n  "stars": 1\n}')
    assert prompt.placeholders == ["review", "id"]
    assert (
        prompt.format(review="good", id=7)
        == 'Review: good\nAnswer as {\n  "id": 7,\n  "stars": 1\n}'
    )


def test_only_an_identifier_in_braces_is_a_placeholder():
    prompt = Prompt(text="{a} {a} {0} {x.y} {} {b!r} {{c}} }")
    assert prompt.placeholders == ["a"]
    assert prompt.format(a=1) == "1 1 {0} {x.y} {} {b!r} {c} }"


def test_prompt_needs_exactly_one_form():
    with pytest.raises(ValidationError, match="exactly one"):
        Prompt()
    with pytest.raises(ValidationError, match="exactly one"):
        Prompt(text="a", messages=[])


MEETING = threading.Barrier(2, timeout=5)


def meet(name: str) -> str:
    """Blocks until a second call arrives (a sync tool doing blocking I/O).

    Args:
        name: Who arrives.
    """
    MEETING.wait()
    return name


def test_sync_tools_run_off_the_event_loop() -> None:
    # Two calls of a blocking sync tool, awaited together: on the loop thread the first would
    # block the second forever (the barrier breaks); in worker threads they meet.
    tool = FunctionTool(function="tests.api.test_tools_and_prompts:meet")

    async def both() -> list[str]:
        return list(await asyncio.gather(tool.call({"name": "a"}), tool.call({"name": "b"})))

    assert asyncio.run(both()) == ["a", "b"]


CALLED: list[str] = []


def record_call(name: str) -> str:
    """A sync tool that notes each call that reached it.

    Args:
        name: Who called.
    """
    CALLED.append(name)
    return name


class Frozen(BaseException):
    """What a tripped freeze fence raises."""


@pytest.mark.parametrize("tripped", [False, True])
def test_a_sync_tool_is_checked_in_its_worker_right_before_it_runs(tripped: bool) -> None:
    # The durable layer checks its fence before it hands the call over; a freeze while the call
    # waits for a worker thread must still keep it from leaving.
    tool = FunctionTool(function="tests.api.test_tools_and_prompts:record_call")
    checked_on: list[str] = []

    def send_check() -> None:
        checked_on.append(threading.current_thread().name)
        if tripped:
            raise Frozen

    async def call() -> object:
        with tracking_attempts(CountedAttempts(), send_check):
            return await tool.call({"name": "a"})

    CALLED.clear()
    if tripped:
        with pytest.raises(Frozen):
            asyncio.run(call())
    else:
        assert asyncio.run(call()) == "a"
    reached = [] if tripped else ["a"]
    assert reached == CALLED
    assert len(checked_on) == 1 and checked_on[0] != threading.main_thread().name
