"""The action-state store's recovery marker, carried in keyed state.

PyFlink's Python functions have no snapshot hook, so the marker cannot be stored once per
checkpoint. Instead the keyed logic (``runtime/keyed.py``) takes a marker now and then and writes
it with every key state it saves. Any marker taken before a checkpoint is a valid starting
point for restoring it: every state of a run still open at (or started after) that moment lies
at or after the marker's low-water offsets. After a restore, the first key the logic visits
hands its marker to the store, which rebuilds from there: the cost follows what was written
since the marker, not the topic's size. (The marker kept in state is the compact form: low
offsets only, read in full.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from flink_agents.durable.store import PartitionMark, RecoveryMarker


def compact(marker: RecoveryMarker) -> RecoveryMarker:
    """The marker reduced to its low offsets: a restore reads everything from there on."""
    return marker.model_copy(
        update={
            "partitions": {
                p: PartitionMark(low=mark.low, end=mark.low)
                for p, mark in marker.partitions.items()
            },
            "open_runs": [],
        }
    )


def from_start(marker: RecoveryMarker) -> RecoveryMarker:
    """A marker that reads the whole topic (a restart with no marker in any state seen yet)."""
    return marker.model_copy(
        update={
            "partitions": {p: PartitionMark(low=0, end=0) for p in marker.partitions},
            "open_runs": [],
        }
    )


@dataclass
class MarkerClock:
    """When to take the next marker, and which older marker may be used to prune.

    A run's states may be pruned once no checkpoint that might be restored predates its end;
    the logic cannot see checkpoints complete, so it prunes with a marker at least
    ``prune_after_s`` old (documented in docs/flink-runtime.md).
    """

    every_s: float
    prune_after_s: float
    _next_at: float = 0.0
    _history: list[tuple[float, RecoveryMarker]] = field(default_factory=list)

    def due(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self._next_at

    def taken(self, marker: RecoveryMarker, now: float | None = None) -> RecoveryMarker | None:
        """Record a new marker; returns the newest marker old enough to prune with, if any."""
        now = time.monotonic() if now is None else now
        self._next_at = now + self.every_s
        self._history.append((now, marker))
        ripe = [m for at, m in self._history if now - at >= self.prune_after_s]
        if not ripe:
            return None
        self._history = [(at, m) for at, m in self._history if now - at < self.prune_after_s]
        return ripe[-1]
