"""Agents files and plans of any badness fail with the plan's own errors, naming where: a YAML
agents file cut short, with a character put in, of bytes that are not UTF-8, nested too deeply,
holding a huge integer or an alias bomb, or with any field replaced by any value, is a
``YamlAgentError`` (file, line, column, field); plan JSON the same way is a
``PlanValidationError`` (JSON pointers). Never a bare ``KeyError``, ``TypeError``, reader error
or ``RecursionError``, and never minutes of work.

Property tests over seeded examples (tests/adversarial.py), then the defects they found. Job
specs go through the same YAML reader: tests/flink/test_job_spec_properties.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from flink_agents.api.json_values import MAX_JSON_DEPTH
from flink_agents.plan import AgentPlan, PlanValidationError, YamlAgentError, load_yaml_agents
from flink_agents.plan.checks import check_plan
from flink_agents.plan.yaml.loader import MAX_YAML_VALUES
from tests.adversarial import corrupted_text, json_text, nested_text, one_part_replaced

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
AGENTS_TEXT = (EXAMPLES / "weather.yaml").read_text()
AGENTS = yaml.safe_load(AGENTS_TEXT)
PLAN_TEXT = (EXAMPLES.parent / "plans" / "weather_react.json").read_text()
PLAN = AgentPlan.from_json(PLAN_TEXT).to_dict()

LOCATED = re.compile(r"^agents\.yaml:\d+:\d+: ", re.MULTILINE)


def load_agents(text: str | bytes) -> Any:
    """The agents of ``text``, or the error, whose every line must say file, line and column."""
    try:
        return load_yaml_agents("agents.yaml", text)  # type: ignore[arg-type]
    except YamlAgentError as error:
        lines = str(error).splitlines()
        assert lines and all(LOCATED.match(line) for line in lines), str(error)
        return error


def as_yaml(document: Any) -> str:
    # Values YAML cannot write as text (lone surrogates) go as JSON, which is YAML too.
    try:
        return yaml.safe_dump(document, allow_unicode=True)
    except yaml.YAMLError:
        return json_text(document)


@given(text=corrupted_text(AGENTS_TEXT))
def test_an_agents_file_cut_short_or_corrupted_fails_naming_file_and_line(
    text: str | bytes,
) -> None:
    load_agents(text)


@given(document=one_part_replaced(AGENTS))
def test_an_agents_file_with_any_part_replaced_fails_naming_file_and_line(
    document: tuple[Any, Any],
) -> None:
    load_agents(as_yaml(document[1]))


def load_plan_text(text: str | bytes) -> AgentPlan | PlanValidationError:
    try:
        return check_plan(AgentPlan.from_json(text))  # type: ignore[arg-type]
    except PlanValidationError as error:
        assert error.issues and all(issue.message for issue in error.issues)
        return error


@given(text=corrupted_text(PLAN_TEXT))
def test_plan_json_cut_short_or_corrupted_fails_as_an_invalid_plan(text: str | bytes) -> None:
    load_plan_text(text)


@given(document=one_part_replaced(PLAN))
def test_a_plan_with_any_part_replaced_fails_as_an_invalid_plan(
    document: tuple[Any, Any],
) -> None:
    load_plan_text(json_text(document[1]))


@given(depth=st.sampled_from([MAX_JSON_DEPTH + 1, 3_000, 100_000]))
def test_plan_json_nested_too_deeply_fails_as_an_invalid_plan(depth: int) -> None:
    error = load_plan_text('{"name": ' + nested_text(depth) + "}")
    assert isinstance(error, PlanValidationError)
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in str(error)


# --- the defects the properties found ----------------------------------------------------------


def test_a_nul_character_in_an_agents_file_is_an_error_at_its_line_and_column() -> None:
    error = load_agents("agents:\n  - name: a\x00\n")
    assert isinstance(error, YamlAgentError)
    assert str(error) == (
        "agents.yaml:2:12: <document>: not valid YAML: character U+0000 "
        "(special characters are not allowed)"
    )


def test_an_agents_file_of_bytes_that_are_not_utf8_is_an_error_naming_the_byte(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agents.yaml"
    path.write_bytes(b"agents:\n  - name: caf\xe9\n")
    with pytest.raises(YamlAgentError) as info:
        load_yaml_agents(path)
    assert str(info.value).startswith(f"{path}:")
    assert "not valid YAML: byte 0xe9 (invalid continuation byte)" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("agents: " + nested_text(MAX_JSON_DEPTH + 1), id="past-the-bound"),
        pytest.param("agents: " + nested_text(5_000), id="past-python's-stack"),
        pytest.param("".join("  " * i + "a:\n" for i in range(3_000)), id="block-mappings"),
    ],
)
def test_an_agents_file_nested_too_deeply_is_an_error(text: str) -> None:
    error = load_agents(text)
    assert isinstance(error, YamlAgentError)
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in str(error)


def test_an_integer_of_thousands_of_digits_in_an_agents_file_is_an_error() -> None:
    error = load_agents("agents:\n  - name: " + "9" * 5_000 + "\n")
    assert isinstance(error, YamlAgentError)
    assert "not readable: Exceeds the limit (4300 digits)" in str(error)


def test_an_alias_bomb_is_refused_before_it_is_expanded() -> None:
    lines = ["agents:", "  - name: a", "    resources:", "      r:", "        class: x:y"]
    lines += ["        arguments:", "          a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for name, previous in zip("bcdefgh", "abcdefg", strict=True):
        lines.append(f"          {name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    error = load_agents("\n".join(lines) + "\n")  # 9**8 values: minutes to validate, before
    assert isinstance(error, YamlAgentError)
    assert f"more than {MAX_YAML_VALUES} values once its aliases are expanded" in str(error)


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"name": ' + "9" * 5_000 + "}", "not a plan: Exceeds the limit (4300 digits)"),
        ('{"name": NaN}', "not a plan: NaN is not a JSON number"),
    ],
)
def test_plan_json_beyond_what_a_plan_holds_is_an_invalid_plan(text: str, why: str) -> None:
    error = load_plan_text(text)
    assert isinstance(error, PlanValidationError)
    assert why in str(error)
