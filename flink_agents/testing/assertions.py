"""Assertions for durable-execution tests: fail with a message naming the calls at fault."""

from __future__ import annotations

from flink_agents.testing.harness import CrashReplayResult


def assert_no_completed_call_reinvoked(result: CrashReplayResult) -> None:
    """Every call that completed before the crash (its outcome acknowledged by the store) was
    handed back on replay, not made again. Calls that returned but were not acknowledged yet
    may be made again (:meth:`CrashReplayResult.resent`); the message counts them too."""
    again = sorted(str(identity) for identity in result.reinvoked())
    assert not again, (
        f"{len(again)} completed call(s) invoked again on replay: {again} "
        f"(and {len(result.resent())} returned but unacknowledged call(s) sent again)"
    )


def assert_replay_equals_live(result: CrashReplayResult, live: CrashReplayResult) -> None:
    """The crashed-and-replayed runs gave the outputs of an uninterrupted run (``live``, e.g.
    :func:`crash_and_replay` with a crash point never reached)."""
    got, want = result.outputs(), live.outputs()
    assert got == want, f"replay after a crash gave {got}, an uninterrupted run {want}"
