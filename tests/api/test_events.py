import pytest
from pydantic import ValidationError

from flink_agents.api import Event, InputEvent, OutputEvent, action
from flink_agents.api.events import event_type_name
from tests.sample_agents import Doubled


def test_builtin_events_have_short_type_names():
    assert InputEvent(input=1).type == "InputEvent"
    assert OutputEvent(output=1).type == "OutputEvent"


def test_custom_event_type_is_its_importable_path():
    assert Doubled(value=2).type == "tests.sample_agents:Doubled"
    assert event_type_name(Doubled) == "tests.sample_agents:Doubled"


def test_plain_event_needs_an_explicit_type():
    with pytest.raises(ValidationError, match="explicit type"):
        Event()
    assert Event(type="note", attributes={"a": 1}).attributes == {"a": 1}


def test_unknown_fields_are_rejected():
    with pytest.raises(ValidationError):
        Doubled(value=1, extra=2)


def test_action_requires_event_ctx_signature():
    with pytest.raises(TypeError, match=r"exactly \(event, ctx\)"):

        @action(InputEvent)
        def bad(event):  # pragma: no cover - never called
            pass


def test_action_needs_an_event_type():
    with pytest.raises(TypeError, match="at least one event type"):
        action()
