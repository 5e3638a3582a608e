import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from tests.sample_agents import EchoAgent, fail_on_negative


class Child(EchoAgent):
    @action(InputEvent)
    def double(event: InputEvent, ctx: RunnerContext) -> None:  # overrides the parent's
        ctx.send_event(OutputEvent(output="child"))

    @action(OutputEvent)
    def extra(event: OutputEvent, ctx: RunnerContext) -> None:
        pass


def test_actions_are_collected_in_definition_order_with_overrides():
    assert [a.name for a in EchoAgent().actions] == ["double", "emit"]
    child = Child().actions
    assert [a.name for a in child] == ["emit", "double", "extra"]
    assert child[1].function is Child.double


def test_instance_actions_follow_class_actions_and_names_stay_unique():
    agent = EchoAgent()
    agent.add_action(fail_on_negative, name="check")
    assert [a.name for a in agent.actions] == ["double", "emit", "check"]
    agent.add_action(fail_on_negative, name="double")
    with pytest.raises(ValueError, match="two actions named 'double'"):
        _ = agent.actions


def test_add_action_needs_event_types_for_undecorated_functions():
    def handler(event, ctx):
        pass

    with pytest.raises(TypeError, match="not an @action"):
        Agent().add_action(handler)


def test_an_action_written_as_a_method_is_refused_with_a_hint():
    with pytest.raises(TypeError) as info:

        class _Methods(Agent):
            @action(InputEvent)
            def handle(self, event, ctx):
                pass

    assert "got ['self', 'event', 'ctx']; actions take no self" in str(info.value)
