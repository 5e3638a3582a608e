from flink_agents.plan import compile_agent
from flink_agents.plan.resolve import resolve_plan
from flink_agents.runtime.scopes import Scope
from tests.sample_agents import EchoAgent


def test_a_scope_lists_the_plans_listeners_of_each_event_type_in_plan_order():
    resolved = resolve_plan(compile_agent(EchoAgent(name="echo")))
    scope = Scope.build(resolved)
    types = {event_type for action in resolved.plan.actions for event_type in action.listen_to}
    for event_type in [*sorted(types), "NoSuchEvent"]:
        listed = scope.listeners(event_type)
        assert [a.name for a in listed] == [a.name for a in resolved.plan.listeners(event_type)]
        assert scope.listeners(event_type) is listed  # found once
    assert scope.listeners("NoSuchEvent") == []
