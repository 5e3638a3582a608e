"""The engine's side of delegation: the ids it assigns, and the seam actions do not see.

The ids are pinned byte for byte: a run in flight across an upgrade replays its delegations under
the ids it sent before (they are in the recorded durable call ids and the idempotency keys).
"""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents.api import RunnerContext
from flink_agents.api.subagents.delegation import Delegating, delegating
from flink_agents.durable.identity import RunId
from flink_agents.runtime import ActionContext
from flink_agents.runtime.delegated_calls import DelegationIds, delegation_call_id

RUN = RunId(agent="desk", key="k-1", seq=3)


def test_session_ids_are_digests_of_the_invocation_and_an_ordinal() -> None:
    ids = DelegationIds(RUN, "ev-1", "route")
    assert ids.next_session_id() == "session-916409fc5be801bb48c94a3959ca9d4f"
    assert ids.next_session_id() == "session-2081d51f192512e3e3df78e71f06d1f8"
    # the same invocation, replayed: the same ids
    assert DelegationIds(RUN, "ev-1", "route").next_session_id() == (
        "session-916409fc5be801bb48c94a3959ca9d4f"
    )


def test_call_ids_count_per_session_under_the_invocations_tag() -> None:
    ids = DelegationIds(RUN, "ev-1", "route")
    assert [ids.next_call_id("s"), ids.next_call_id("s"), ids.next_call_id("t")] == [
        "1@661801f215981378",
        "2@661801f215981378",
        "1@661801f215981378",
    ]
    # another action continuing session "s" sends other ids
    assert DelegationIds(RUN, "ev-1", "answer").next_call_id("s") != "1@661801f215981378"


def test_a_delegations_durable_call_id_is_structured_json() -> None:
    assert delegation_call_id("billing", "s,1", "1@x") == '["subagent","billing","s,1","1@x"]'


def test_the_framework_seams_are_not_on_what_an_action_types_against() -> None:
    for seam in ("next_session_id", "next_call_id", "run_child_scope", "delegate"):
        assert not hasattr(RunnerContext, seam), seam
    assert hasattr(RunnerContext, "durable_call_key")  # an idempotency key for the user's calls
    assert issubclass(ActionContext, Delegating)


def test_a_context_without_the_seam_cannot_delegate() -> None:
    stranger: Any = object()
    with pytest.raises(TypeError, match="cannot delegate to sub-agents"):
        delegating(stranger)
