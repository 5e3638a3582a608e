"""testing/plans: the helpers that build plans and run them; their old names."""

from __future__ import annotations

import pytest

import flink_agents.testing
from flink_agents.testing import resume


def test_replay_is_the_old_name_of_resume_and_warns():
    """The offline replayer keeps the word replay: finishing a checkpointed run is resuming it."""
    with pytest.warns(DeprecationWarning, match=r"testing\.replay is deprecated: use .*resume"):
        from flink_agents.testing import replay
    assert replay is resume


def test_a_name_the_face_never_had_is_still_an_attribute_error():
    with pytest.raises(AttributeError):
        flink_agents.testing.replay_all  # noqa: B018
