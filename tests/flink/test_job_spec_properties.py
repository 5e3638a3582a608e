"""Job specs of any badness fail naming file, line, column and field (``YamlAgentError``, the
YAML reader agents files use too): cut short, corrupted, of bytes that are not UTF-8, or with
any field replaced by any value. No JVM: only the spec is read.

Property tests over seeded examples (tests/adversarial.py); the defects they found in the
shared reader are pinned in tests/plan/test_bad_input_properties.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import given

from flink_agents.flink.job import JobSpec
from flink_agents.plan import YamlAgentError
from flink_agents.plan.yaml.loader import load_yaml_model
from tests.adversarial import corrupted_text, json_text, one_part_replaced
from tests.plan.test_bad_input_properties import LOCATED, as_yaml

SPEC_TEXT = (Path(__file__).resolve().parents[2] / "jobs" / "weather.yaml").read_text()
SPEC = yaml.safe_load(SPEC_TEXT)


def load_spec(text: str | bytes) -> JobSpec | YamlAgentError:
    try:
        return load_yaml_model("agents.yaml", JobSpec, text)  # type: ignore[arg-type]
    except YamlAgentError as error:
        lines = str(error).splitlines()
        assert lines and all(LOCATED.match(line) for line in lines), str(error)
        return error


@given(text=corrupted_text(SPEC_TEXT))
def test_a_job_spec_cut_short_or_corrupted_fails_naming_file_and_line(text: str | bytes) -> None:
    load_spec(text)


@given(document=one_part_replaced(SPEC))
def test_a_job_spec_with_any_part_replaced_fails_naming_file_and_line(
    document: tuple[Any, Any],
) -> None:
    load_spec(as_yaml(document[1]))


def test_a_job_spec_in_json_form_with_a_lone_surrogate_fails_naming_the_field() -> None:
    error = load_spec(json_text({**SPEC, "name": "\ud800"}))
    assert isinstance(error, YamlAgentError)
    assert ": name: " in str(error)
