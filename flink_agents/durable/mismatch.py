"""Mismatch checks: the call the code makes now against the call recorded at its place (when a
run goes again over its records, after a failover or in the offline replayer); the error.

A durable call is described by its :class:`CallSignature`: call id, a human label of the
function and a digest of its arguments. The label and digest are never part of the identity;
they only let a rerun notice that the code now makes a different call where a recorded one was.
The arguments' JSON (capped, recorded with the call) is kept to show what changed:
:func:`arguments_diff`.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from flink_agents.api.context import InfrastructureError
from flink_agents.api.tools import function_label
from flink_agents.durable.identity import ActionInvocation
from flink_agents.durable.store import (
    ArgumentDigestError,
    CallResult,
    arguments_text,
    canonical_arguments_and_digest,
)

logger = logging.getLogger(__name__)

MismatchPolicy = Literal["fail", "warn"]
"""``fail``: raise :class:`CallMismatchError`; ``warn``: log both sides and call again."""

MISMATCH_POLICIES: tuple[str, ...] = get_args(MismatchPolicy)

MISMATCH_POLICY_KEY = "durable.mismatch_policy"
"""Agent (plan) config key choosing the :data:`MismatchPolicy`; the default is ``fail``."""


@dataclass(frozen=True)
class CallSignature:
    """A call as a mismatch check compares it: id, function label and argument digest.

    An empty ``args_digest`` means the arguments had no stable JSON form; it is not compared.
    ``arguments`` (their JSON as text, capped; None if unknown) is shown, never compared.
    """

    call_id: str
    function: str
    args_digest: str
    arguments: str | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        call_id: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kw: Mapping[str, Any],
        *,
        with_text: bool = True,
    ) -> CallSignature:
        """The signature of a call; ``with_text=False`` leaves ``arguments`` unknown (saves
        building the text when it is not recorded)."""
        try:
            arguments, digest = canonical_arguments_and_digest(args, kw)
        except ArgumentDigestError as exc:
            logger.debug("call %s: arguments not compared on replay: %s", call_id, exc)
            return cls(call_id, function_label(fn), "")
        text = arguments_text(arguments) if with_text else None
        return cls(call_id, function_label(fn), digest, text)

    @classmethod
    def recorded(cls, result: CallResult) -> CallSignature:
        return cls(result.call_id, result.function, result.args_digest, result.arguments)

    def matches(self, other: CallSignature) -> bool:
        digests_known = bool(self.args_digest and other.args_digest)
        return (
            self.call_id == other.call_id
            and self.function == other.function
            and (not digests_known or self.args_digest == other.args_digest)
        )

    def describe(self) -> str:
        return f"id={self.call_id!r} function={self.function!r} args={self.args_digest[:16] or '?'}"


class CallMismatchError(InfrastructureError):
    """A recorded call differs from the call the code makes now at its place.

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
    """Both sides of a mismatch and the diff of their arguments, for the error and the
    warning."""
    now = requested.describe() if requested is not None else "no call (the code stopped here)"
    diff = arguments_diff(recorded, requested) if requested is not None else ""
    return (
        f"replay of run {invocation.run}, action {invocation.action!r} on event "
        f"{invocation.event_id} differs from the record at call #{position}:\n"
        f"  recorded: {recorded.describe()}\n"
        f"  now:      {now}" + (f"\n{diff}" if diff else "")
    )


def arguments_diff(recorded: CallSignature, requested: CallSignature) -> str:
    """A unified diff of the two calls' arguments (JSON, one field per line); empty when they
    are the same, and a note when a side's arguments are unknown (recorded by an older version,
    or without a JSON form)."""
    if recorded.arguments is None or requested.arguments is None:
        missing = "recorded" if recorded.arguments is None else "requested"
        if recorded.args_digest == requested.args_digest:
            return ""
        return f"  (arguments not shown: the {missing} call's arguments are unknown)"
    lines = difflib.unified_diff(
        recorded.arguments.splitlines(),
        requested.arguments.splitlines(),
        fromfile="recorded arguments",
        tofile="arguments now",
        lineterm="",
    )
    return "\n".join(lines)
