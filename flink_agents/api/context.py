"""What an action sees: :class:`RunnerContext`. The engine provides the implementation."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, TypeVar

from flink_agents.api.events import Event
from flink_agents.api.memory import Memory
from flink_agents.api.resources import Resource, ResourceType

T = TypeVar("T")


class _NotDone:
    """Type of :data:`NOT_DONE`; a single instance, falsy, with a readable repr."""

    _instance: _NotDone | None = None

    def __new__(cls) -> _NotDone:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_DONE"

    def __bool__(self) -> bool:
        return False


NOT_DONE: Final = _NotDone()
"""What a :class:`Reconciler` returns when the started call did not take effect: send it again."""


class InfrastructureError(RuntimeError):
    """The machinery of a durable call failed, not the work it calls.

    Base of replay mismatches, store and codec errors (the durable layer subclasses it; this
    layer cannot import those classes). Such an error says nothing about the called work, so
    it is never recorded as a call's outcome nor captured into a result (a failed tool call or
    delegation): it propagates out of the action, and the agent's error policy applies.
    Cancellation (``asyncio.CancelledError``) is not an ``Exception`` and propagates too.
    """


class RecordedCallError(RuntimeError):
    """A durable call whose recorded outcome is a failure, raised again on replay.

    The original exception is not rebuilt (its class may not be importable, or not safe to
    instantiate); ``error_type`` is its ``module.qualname``, ``message`` its text and ``trace``
    its (capped) traceback, all as recorded.
    """

    def __init__(
        self, call_id: str, error_type: str, message: str, trace: str | None = None
    ) -> None:
        self.call_id = call_id
        self.error_type = error_type
        self.message = message
        self.trace = trace
        super().__init__(f"{error_type}: {message} (recorded outcome of call {call_id!r})")


class Reconciler(Protocol):
    """Asks the outside world whether a call that was started before a failover went through.

    Called on replay when a durable call's record says it was started (``PENDING``) but has no
    outcome. It receives the call's own arguments (bind anything else, e.g. the call's
    idempotency key from :meth:`RunnerContext.durable_call_key`, when creating it) and may be a
    plain or an ``async`` function. It returns the call's result (recorded as succeeded and
    handed to the action), raises (recorded as failed and raised), or returns
    :data:`NOT_DONE` (the call is sent again).
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


class RunnerContext(ABC):
    """The engine's face towards one action invocation."""

    @property
    @abstractmethod
    def key(self) -> Any:
        """The key this run belongs to."""

    @abstractmethod
    def send_event(self, event: Event) -> None:
        """Queue ``event`` for dispatch within this run (ids and lineage are filled in)."""

    @abstractmethod
    def get_resource(self, name: str, resource_type: ResourceType) -> Resource:
        """The resource ``name``, which must be of ``resource_type``."""

    @property
    @abstractmethod
    def sensory_memory(self) -> Memory:
        """Memory of this run only."""

    @property
    @abstractmethod
    def short_term_memory(self) -> Memory:
        """Memory of this key, kept across runs; changes are committed when the run ends."""

    @property
    @abstractmethod
    def config(self) -> Mapping[str, Any]:
        """The agent's configuration."""

    @property
    @abstractmethod
    def action_config(self) -> Mapping[str, Any]:
        """The configuration of the running action."""

    @abstractmethod
    def next_session_id(self) -> str:
        """A new sub-agent session id, unique within the run and the same on every replay.

        Derived from the run, the event being handled, the action and the ordinal of the
        session within this action invocation; never random.
        """

    @abstractmethod
    def next_call_id(self, session_id: str) -> str:
        """The id of the next sub-agent call in ``session_id``: its ordinal in this invocation
        (``"1"``, ``"2"``, ...)."""

    @abstractmethod
    def durable_call_key(self, call_id: str) -> str:
        """The digest of the identity a durable call with ``call_id`` gets in this invocation.

        Stable across replays and unique per run, event, action and call id: what an external
        service may use as an idempotency key.
        """

    @abstractmethod
    async def run_child_scope(self, scope: str, input: Any, *, delegation_key: str) -> list[Any]:
        """Run the internal sub-agent ``scope`` on ``input``; returns its outputs.

        Framework seam for :class:`~flink_agents.api.subagents.InternalSubagent`, called inside
        the delegation's durable call. The child's own ids derive from ``delegation_key``.
        """

    @abstractmethod
    def durable_execute(
        self,
        fn: Callable[..., T],
        *args: Any,
        call_id: str | None = None,
        reconciler: Reconciler | None = None,
        result_type: type | None = None,
        **kwargs: Any,
    ) -> T:
        """Run ``fn(*args, **kwargs)`` as a durable call and return its result.

        ``call_id`` names the call within this action invocation (default: its ordinal);
        ``result_type`` tells replay how to rebuild a recorded result. Use this for every side
        effect (model, tool, service) so a replay after failover does not repeat it.
        """

    @abstractmethod
    async def durable_execute_async(
        self,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        call_id: str | None = None,
        reconciler: Reconciler | None = None,
        result_type: type | None = None,
        **kwargs: Any,
    ) -> T:
        """Async form of :meth:`durable_execute` for coroutine functions."""
