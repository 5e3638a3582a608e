"""What a chat model connection tells the event log about itself: a routing decision, a
fallback to the next connection, a wait on a rate limit.

A connection calls :func:`note_connection`; the durable layer sets
:data:`current_connection_notes` while it runs a call, to a function that writes the note as an
event-log record of the call's run (kind ``connection``) and counts it in the metrics. Outside a
durable call (a connection used on its own) a note is only logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

logger = logging.getLogger(__name__)

ConnectionDecision = Literal["routed", "fallback", "rate_limited"]
"""What a connection did: chose a route (``routed``), moved a call to the next connection after
a failure (``fallback``), or held a call back for its rate limit (``rate_limited``)."""


@dataclass(frozen=True, slots=True)
class ConnectionNote:
    """One decision of a connection about one call."""

    connection: str
    """The connection that decided: a router's resource name, or ``provider model``."""
    decision: ConnectionDecision
    reason: str
    """Why, in a phrase: the rule that matched, the failure, the limit that was reached."""
    target: str | None = None
    """The connection a call was routed or moved to."""
    waited_ms: float | None = None
    """How long a call was held back for a rate limit."""


current_connection_notes: ContextVar[Callable[[ConnectionNote], None] | None] = ContextVar(
    "current_connection_notes", default=None
)
"""Where the notes of the durable call running in this context go, if anywhere."""


@contextmanager
def noting_connections(tell: Callable[[ConnectionNote], None]) -> Iterator[None]:
    """Send the notes of connections called in the block to ``tell``."""
    token = current_connection_notes.set(tell)
    try:
        yield
    finally:
        current_connection_notes.reset(token)


def note_connection(note: ConnectionNote) -> None:
    """Log ``note`` and hand it to the current durable call's listener, if any."""
    logger.info(
        "%s: %s%s (%s)",
        note.connection,
        note.decision,
        f" -> {note.target}" if note.target else "",
        note.reason,
    )
    tell = current_connection_notes.get()
    if tell is not None:
        tell(note)
