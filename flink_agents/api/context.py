"""What an action sees: :class:`RunnerContext`. The engine provides the implementation."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar, get_args

from flink_agents.api.events import Event
from flink_agents.api.memory import Memory, MemoryRef
from flink_agents.api.resources import Resource, ResourceType
from flink_agents.api.secret_values import scrub_error_text
from flink_agents.api.waits import Decision, OnTimeout, ScheduledInput

if TYPE_CHECKING:
    from flink_agents.api.long_term_memory import LongTermMemory

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
"""What a :class:`Reconciler` returns when it cannot tell that the started call took effect; the
call's :data:`InDoubtPolicy` decides what happens next."""

InDoubtPolicy = Literal["resend", "fail"]
"""What replay does with a call found started (``PENDING``) whose outcome is unknown (no
reconciler, or the reconciler answered :data:`NOT_DONE`): ``resend`` calls it again (at least
once: right for idempotent work and services that honour the idempotency key); ``fail`` records
the call as failed with :class:`InDoubtCallError` and raises that in the action, so nothing is
sent twice (at most once: right for payments, e-mails, ...)."""

IN_DOUBT_POLICIES: tuple[str, ...] = get_args(InDoubtPolicy)


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


def live_failure(error: BaseException) -> tuple[str, str]:
    """``error``'s type name and message as the live call's exception had them: for a
    :class:`RecordedCallError` (a failure handed back on replay) the recorded ones, so what a
    run tells a model or emits as its error output reads the same live and after a failover
    (messages longer than the store keeps are recorded cut)."""
    if isinstance(error, RecordedCallError):
        return error.error_type.rsplit(".", 1)[-1], scrub_error_text(error.message)
    return type(error).__name__, scrub_error_text(str(error))


class InDoubtCallError(RuntimeError):
    """A call was started before a failover, its outcome is unknown and its in-doubt policy is
    ``fail``: it is recorded as the call's (failed) outcome, so every later replay agrees."""

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        super().__init__(
            f"call {call_id!r} was started before a failover and its outcome is unknown; "
            "its in-doubt policy is 'fail', so it is not sent again"
        )


@dataclass(frozen=True)
class ReconcileRequest:
    """What a :class:`Reconciler` is asked about: one durable call found started, no outcome.

    ``call_id`` names the call within its action invocation; ``idempotency_key`` is the digest
    of its durable identity (what :meth:`RunnerContext.durable_call_key` gave the call, and what
    it may have sent outside); ``args`` / ``kwargs`` are the call's own arguments (for a
    sub-agent delegation, ``args[0]`` is its ``SubagentRequest``).
    """

    call_id: str
    idempotency_key: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


class Reconciler(Protocol):
    """Asks the outside world whether a call that was started before a failover went through.

    Called on replay, once, when a durable call's record says it was started (``PENDING``) but
    has no outcome; may be a plain or an ``async`` function. It receives the call's
    :class:`ReconcileRequest` and

    * returns the call's result: validated as the call's declared ``result_type`` (a value that
      does not fit is a ``PayloadError``, an :class:`InfrastructureError`, and the call stays
      ``PENDING``), recorded as succeeded and handed to the action exactly as a replay would
      hand it back;
    * raises: recorded as failed, raised in the action (and on every later replay, as
      :class:`RecordedCallError`);
    * returns :data:`NOT_DONE`: the outcome is unknown, the call's :data:`InDoubtPolicy` applies.
    """

    def __call__(self, request: ReconcileRequest, /) -> Any: ...


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

    def resolve(self, ref: MemoryRef) -> Any:
        """A copy of the value ``ref`` (from :meth:`Memory.ref`, passed in an event) names, as
        the run's memory holds it now; :class:`~flink_agents.api.memory.
        DanglingMemoryRefError` if it holds nothing there."""
        memory = self.short_term_memory if ref.scope == "short_term" else self.sensory_memory
        return memory.resolve(ref)

    @property
    def long_term_memory(self) -> LongTermMemory:
        """The memory sets of this key (docs/memory.md): searchable, kept across runs; writes
        are committed when the run ends. Contexts that keep none (a test's fake) raise."""
        raise RuntimeError(f"{type(self).__name__} keeps no long-term memory")

    @property
    @abstractmethod
    def config(self) -> Mapping[str, Any]:
        """The agent's configuration."""

    @property
    @abstractmethod
    def action_config(self) -> Mapping[str, Any]:
        """The configuration of the running action."""

    @abstractmethod
    def durable_call_key(self, call_id: str) -> str:
        """The digest of the identity a durable call with ``call_id`` gets in this invocation.

        Stable across replays and unique per run, event, action and call id: what an external
        service may use as an idempotency key.
        """

    @abstractmethod
    def durable_execute(
        self,
        fn: Callable[..., T],
        *args: Any,
        call_id: str | None = None,
        reconciler: Reconciler | None = None,
        result_type: type | None = None,
        in_doubt: InDoubtPolicy = "resend",
        **kwargs: Any,
    ) -> T:
        """Run ``fn(*args, **kwargs)`` as a durable call and return its result.

        ``call_id`` names the call within this action invocation (default: its ordinal).
        ``result_type`` (any type pydantic validates) is what the result is, live and replayed:
        the value is dumped as JSON and validated back, so the action gets the same value and
        type either way. ``reconciler`` (see :class:`Reconciler`) and ``in_doubt`` (see
        :data:`InDoubtPolicy`) decide what replay does with a call started but not finished.
        Use this for every side effect (model, tool, service) so a replay after failover does
        not repeat it.
        """

    @abstractmethod
    async def durable_execute_async(
        self,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        call_id: str | None = None,
        reconciler: Reconciler | None = None,
        result_type: type | None = None,
        in_doubt: InDoubtPolicy = "resend",
        **kwargs: Any,
    ) -> T:
        """Async form of :meth:`durable_execute` for coroutine functions."""

    @abstractmethod
    async def wait_for_approval(
        self,
        request: Any,
        *,
        timeout_s: float | None = None,
        on_timeout: OnTimeout = "reject",
        call_id: str | None = None,
        deciders: Sequence[str] | None = None,
        contract: Any = None,
    ) -> Decision:
        """Pause the run until a person decides on ``request`` (any JSON value), and return the
        :class:`~flink_agents.api.waits.Decision`.

        A durable call of kind ``wait``: the run emits a ``waiting`` record naming the wait's id
        and pauses, holding nothing in memory; the decision, sent as a record keyed like the
        input, is recorded as this call's result and the action runs again, its earlier calls
        handed back. ``timeout_s``: after it the wait resolves as ``timed_out`` (``on_timeout``
        ``"reject"``: a decision that is not approved; ``"raise"``:
        :class:`~flink_agents.api.waits.WaitTimedOutError`). Needs an action-state store
        (docs/waits.md).

        ``deciders``: the names that may decide (a decision's ``by``); another's decision is
        refused (None: anyone). ``contract``: any JSON value the decision is made against (a
        schema, a version; default: the action's function and config); its digest goes with the
        wait, and a run replayed under a plan whose wait has another one refuses a decision made
        on the old one and asks again (fail closed).
        """

    @abstractmethod
    async def wait_for_event(
        self,
        event_type: str | type[T],
        *,
        match: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        call_id: str | None = None,
    ) -> Any:
        """Pause the run until an event of ``event_type`` (a name, or a pydantic model class:
        its name, and the data validated into it) arrives for this key with every field of
        ``match`` equal, and return its data. Raises
        :class:`~flink_agents.api.waits.WaitTimedOutError` after ``timeout_s``. An event that
        arrives before the wait registers, while the key has a run to register it, is kept
        for it (docs/waits.md).
        """

    @abstractmethod
    async def sleep(self, duration_s: float, *, call_id: str | None = None) -> None:
        """Pause the run for ``duration_s`` seconds (processing time), durably: a wait of kind
        ``timer`` that only its time resolves. Nothing is held while it sleeps (the run pauses
        as for :meth:`wait_for_approval`); when the key's timer fires, the action runs again,
        its earlier calls handed back, and the sleep returns. Needs an action-state store
        (docs/waits.md, "Timers").
        """

    @abstractmethod
    async def schedule(
        self,
        input: Any,
        *,
        delay_s: float | None = None,
        at_ms: int | None = None,
        call_id: str | None = None,
    ) -> ScheduledInput:
        """Ask for ``input`` (any JSON value) to reach this key as a new input -- a run of its
        own -- after ``delay_s`` seconds or at ``at_ms`` (epoch ms, processing time); exactly
        one of the two. A durable call: its result, the
        :class:`~flink_agents.api.waits.ScheduledInput`, is recorded, so a replayed run
        schedules the same follow-up once. The follow-up takes effect when the run succeeds
        (like its memory writes) and fires once, after a restore too (docs/waits.md, "Timers").
        """
