"""Comparing what the code asks for on replay with what was recorded; the mismatch error.

A durable call is described by its :class:`CallSignature`: call id, a human label of the
function and a digest of its arguments. The label and digest are never part of the identity;
they only let replay notice that the code now makes a different call where a recorded one was.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from flink_agents.api.context import InfrastructureError
from flink_agents.durable.identity import ActionInvocation
from flink_agents.durable.store import ArgumentDigestError, CallResult, digest_arguments

logger = logging.getLogger(__name__)

MismatchPolicy = Literal["fail", "warn"]
"""``fail``: raise :class:`ReplayMismatchError`; ``warn``: log both sides and call again."""

MISMATCH_POLICIES: tuple[str, ...] = get_args(MismatchPolicy)

MISMATCH_POLICY_KEY = "durable.mismatch_policy"
"""Agent (plan) config key choosing the :data:`MismatchPolicy`; the default is ``fail``."""


@dataclass(frozen=True)
class CallSignature:
    """A call as replay compares it: id, function label and argument digest.

    An empty ``args_digest`` means the arguments had no stable JSON form; it is not compared.
    """

    call_id: str
    function: str
    args_digest: str

    @classmethod
    def of(
        cls, call_id: str, fn: Callable[..., Any], args: tuple[Any, ...], kw: Mapping[str, Any]
    ) -> CallSignature:
        try:
            args_digest = digest_arguments(args, kw)
        except ArgumentDigestError as exc:
            logger.debug("call %s: arguments not compared on replay: %s", call_id, exc)
            args_digest = ""
        return cls(call_id, function_label(fn), args_digest)

    @classmethod
    def recorded(cls, result: CallResult) -> CallSignature:
        return cls(result.call_id, result.function, result.args_digest)

    def matches(self, other: CallSignature) -> bool:
        digests_known = bool(self.args_digest and other.args_digest)
        return (
            self.call_id == other.call_id
            and self.function == other.function
            and (not digests_known or self.args_digest == other.args_digest)
        )

    def describe(self) -> str:
        return f"id={self.call_id!r} function={self.function!r} args={self.args_digest[:16] or '?'}"


def function_label(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of ``fn`` (of the wrapped function for a partial): a label only."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}"


class ReplayMismatchError(InfrastructureError):
    """Replay found a recorded call that differs from the call the code makes now.

    ``recorded`` / ``requested`` are the two sides at ``position`` (the call's ordinal in the
    action invocation); ``requested`` is None when the code no longer makes a recorded call.
    """

    def __init__(
        self,
        invocation: ActionInvocation,
        position: int,
        recorded: CallSignature,
        requested: CallSignature | None,
    ) -> None:
        self.invocation = invocation
        self.position = position
        self.recorded = recorded
        self.requested = requested
        super().__init__(describe_mismatch(invocation, position, recorded, requested))


def describe_mismatch(
    invocation: ActionInvocation,
    position: int,
    recorded: CallSignature,
    requested: CallSignature | None,
) -> str:
    """Both sides of a mismatch, for the error and the warning."""
    now = requested.describe() if requested is not None else "no call (the code stopped here)"
    return (
        f"replay of run {invocation.run}, action {invocation.action!r} on event "
        f"{invocation.event_id} differs from the record at call #{position}:\n"
        f"  recorded: {recorded.describe()}\n"
        f"  now:      {now}"
    )
