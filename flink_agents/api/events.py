"""Events: what actions receive and send.

Every event has a ``type`` (what actions listen to), an ``id`` and lineage (the event and action
that produced it). The engine fills ``id`` and lineage when an event is sent; authors only set the
payload. Ids are derived deterministically from the run, the sending action and an ordinal, so an
action that re-executes after a failover produces the same ids again.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flink_agents.api.chat import ChatMessage, ToolCall
from flink_agents.api.json_values import json_generic


class Event(BaseModel):
    """Base of all events.

    A subclass's type is ``module:qualname`` unless it sets ``EVENT_TYPE``. A plain ``Event`` needs
    an explicit ``type`` and carries its payload in ``attributes`` (handy for YAML agents).
    """

    model_config = ConfigDict(extra="forbid")

    EVENT_TYPE: ClassVar[str | None] = None

    type: str = ""
    id: str = ""
    attributes: dict[str, Any] = Field(default_factory=dict)
    upstream_id: str | None = Field(default=None, description="Id of the event that led to this.")
    upstream_action: str | None = Field(default=None, description="Action that sent this event.")

    @classmethod
    def event_type(cls) -> str:
        """The type name actions use to listen to this class of events."""
        declared = cls.__dict__.get("EVENT_TYPE")
        if declared:
            return declared
        if cls is Event:
            raise TypeError("a plain Event has no fixed type; pass type='...' when creating one")
        return f"{cls.__module__}:{cls.__qualname__}"

    @model_validator(mode="after")
    def _default_type(self) -> Event:
        if not self.type:
            if type(self) is Event:
                raise ValueError("a plain Event needs an explicit type")
            self.type = type(self).event_type()
        return self


class InputEvent(Event):
    """Starts a run; ``input`` is the record submitted for the key."""

    EVENT_TYPE: ClassVar[str | None] = "InputEvent"
    input: Any = None


class ActionFailure(BaseModel):
    """Why a run ended early: the action that raised and the event it was handling."""

    action: str
    event_id: str
    event_type: str
    error_type: str
    message: str

    def describe(self) -> str:
        return (
            f"action {self.action!r} failed on {self.event_type} event {self.event_id}: "
            f"{self.error_type}: {self.message}"
        )


class OutputEvent(Event):
    """A result of the run; ``error`` is set instead of ``output`` when the run failed (emit).

    ``output`` is kept in its JSON form: a pydantic model or a dataclass (also inside dicts and
    lists) becomes the data it dumps in JSON mode, so a run's outputs are the same whether it
    ran or was replayed, and every sink can write them. A value JSON cannot hold is refused.
    """

    EVENT_TYPE: ClassVar[str | None] = "OutputEvent"
    output: Any = None
    error: ActionFailure | None = None

    @field_validator("output")
    @classmethod
    def _json_output(cls, output: Any) -> Any:
        return json_generic(output)


class ChatRequestEvent(Event):
    """Ask the chat model resource ``model`` to answer ``messages`` (tools are looped for you).

    ``prompt_args`` fill the placeholders of the setup's prompt (its system prompt).
    """

    EVENT_TYPE: ClassVar[str | None] = "ChatRequestEvent"
    model: str
    messages: list[ChatMessage]
    prompt_args: dict[str, Any] = Field(default_factory=dict)


class ChatResponseEvent(Event):
    """The model's final answer to the request ``request_id``."""

    EVENT_TYPE: ClassVar[str | None] = "ChatResponseEvent"
    request_id: str
    model: str
    response: ChatMessage


class ToolRequestEvent(Event):
    """Tool calls the model asked for while answering ``request_id``."""

    EVENT_TYPE: ClassVar[str | None] = "ToolRequestEvent"
    request_id: str
    model: str
    tool_calls: list[ToolCall]


class ToolResult(BaseModel):
    """Outcome of one tool call, as handed back to the model."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False


class ToolResponseEvent(Event):
    """Results of the tool calls of a ``ToolRequestEvent``."""

    EVENT_TYPE: ClassVar[str | None] = "ToolResponseEvent"
    request_id: str
    model: str
    results: list[ToolResult]


def event_type_name(event_type: type[Event] | str) -> str:
    """Normalise what ``@action`` accepts (an Event class or a type name) to the type name."""
    if isinstance(event_type, str):
        if not event_type:
            raise ValueError("event type name must not be empty")
        return event_type
    if isinstance(event_type, type) and issubclass(event_type, Event):
        return event_type.event_type()
    raise TypeError(f"expected an Event subclass or a type name, got {event_type!r}")
