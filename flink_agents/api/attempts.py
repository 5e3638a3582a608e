"""The seam between a provider's retry loop and durable execution.

A model call may take several HTTP attempts. If attempts were only counted in memory, a failover
in the middle of a retry storm would restart the count and a call could be tried forever. The
durable layer therefore sets :data:`current_attempt_tracker` while it runs a durable call; the
tracker knows how many attempts the call's record already holds and persists each new one.
Retry loops read the tracker; without one they count locally.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, runtime_checkable


@runtime_checkable
class AttemptTracker(Protocol):
    """Attempts of the durable call in progress."""

    @property
    def attempts(self) -> int:
        """Attempts already made for this call (restored from its record after a restart)."""
        ...

    def record_attempt(self) -> None:
        """Persist ``attempts + 1``; called before an attempt is sent."""
        ...


current_attempt_tracker: ContextVar[AttemptTracker | None] = ContextVar(
    "current_attempt_tracker", default=None
)
"""The tracker of the durable call running in this context, if any."""


@contextmanager
def tracking_attempts(tracker: AttemptTracker) -> Iterator[AttemptTracker]:
    """Make ``tracker`` the current one for the duration of the block."""
    token = current_attempt_tracker.set(tracker)
    try:
        yield tracker
    finally:
        current_attempt_tracker.reset(token)
