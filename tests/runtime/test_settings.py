"""One settings model: every host builds its runtime from a ``RuntimeSettings``.

The window, the store's policies and the connections' caps reach the engine and its calls
through :meth:`Runtime.build`; what has a lifetime (the store, the event log) is the host's to
build from them and close.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from flink_agents.durable import DurableCalls
from flink_agents.durable.store import ActionState, InMemoryActionStateStore, StoreConfig
from flink_agents.observability import EventLogConfig
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.resolve import resolve_plan
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import OperatorOptions, Runtime, RuntimeSettings, run_local
from tests.sample_agents import react_agent

ANSWER = [{"content": '{"city": "$input", "total": 1}'}]
CITIES = [{"id": i, "city": f"c{i}"} for i in range(12)]


def _window(max_in_flight: int) -> RuntimeSettings:
    return RuntimeSettings(operator=OperatorOptions(max_in_flight=max_in_flight))


def test_the_settings_window_bounds_the_runs_a_built_engine_runs_at_once() -> None:
    ScriptedChatModelConnection.reset_stats("settings-window")
    plan = compile_agent(react_agent(ANSWER, latency=0.01, name="settings-window"))

    async def scenario() -> None:
        engine = Runtime.build(plan, _window(2)).engine
        for record in CITIES:
            engine.submit(record["id"], record)
        await engine.drain()
        assert len(engine.take_results()) == len(CITIES)
        await engine.close()

    asyncio.run(scenario())
    stats = ScriptedChatModelConnection.stats("settings-window")
    assert stats.total == len(CITIES)
    assert 1 < stats.max_in_flight <= 2


def test_the_stores_policies_in_the_settings_reach_the_durable_calls() -> None:
    plan = compile_agent(react_agent(ANSWER, name="settings-policy"))
    store = InMemoryActionStateStore()
    settings = RuntimeSettings(store=StoreConfig(mismatch_policy="warn", record_arguments=False))
    calls = Runtime.build(plan, settings, store=store).calls
    assert isinstance(calls, DurableCalls)
    assert (calls.mismatch_policy, calls.record_arguments) == ("warn", False)
    defaults = Runtime.build(plan, store=store).calls
    assert isinstance(defaults, DurableCalls)
    assert (defaults.mismatch_policy, defaults.record_arguments) == ("fail", True)


def test_a_store_in_the_settings_must_be_given_built() -> None:
    plan = compile_agent(react_agent(ANSWER, name="settings-unbuilt"))
    with pytest.raises(ValueError, match=r"settings.store is set but no store was given"):
        Runtime.build(plan, RuntimeSettings(store=StoreConfig()))


def test_the_call_caps_of_the_settings_hold_for_every_run_of_the_engine() -> None:
    ScriptedChatModelConnection.reset_stats("settings-cap")
    agent = react_agent(ANSWER, latency=0.01, name="settings-cap")
    settings = RuntimeSettings(max_concurrent_calls={"conn": 1})
    run_local(agent, CITIES, key="id", settings=settings)
    stats = ScriptedChatModelConnection.stats("settings-cap")
    assert stats.total == len(CITIES)
    assert stats.max_in_flight == 1


def test_call_caps_need_the_agent_plan_and_name_a_chat_model_connection() -> None:
    plan = compile_agent(react_agent(ANSWER, name="settings-resolved"))
    capped = RuntimeSettings(max_concurrent_calls={"conn": 1})
    with pytest.raises(ValueError, match="needs the AgentPlan"):
        Runtime.build(resolve_plan(plan), capped)
    with pytest.raises(ValueError, match="'nope' is not a chat model connection"):
        RuntimeSettings(max_concurrent_calls={"nope": 1}).capped(plan)


def test_run_local_builds_the_store_of_its_settings_and_closes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[InMemoryActionStateStore] = []
    closed: list[InMemoryActionStateStore] = []
    written: list[ActionState] = []

    class Kept(InMemoryActionStateStore):
        def put(self, state: ActionState) -> None:
            written.append(state)
            super().put(state)

        def close(self) -> None:
            closed.append(self)
            super().close()

    def build(config: StoreConfig) -> Kept:
        built.append(Kept())
        return built[-1]

    monkeypatch.setattr(StoreConfig, "build", build)
    plan = compile_agent(react_agent(ANSWER, name="settings-store"))
    [result] = run_local(plan, CITIES[:1], key="id", settings=RuntimeSettings(store=StoreConfig()))
    assert result.error is None
    assert closed == built
    assert len(built) == 1
    assert written  # the run's model call was recorded in it


def test_run_local_shortcuts_replace_the_settings_fields(tmp_path: Path) -> None:
    from flink_agents.runtime.local import LOCAL_MAX_IN_FLIGHT, local_settings

    assert local_settings(None).operator.max_in_flight == LOCAL_MAX_IN_FLIGHT
    log = EventLogConfig(path=str(tmp_path / "events.jsonl"))
    settings = local_settings(_window(5), max_in_flight=3, event_log=log)
    assert (settings.operator.max_in_flight, settings.event_log) == (3, log)
    assert local_settings(_window(5)).operator.max_in_flight == 5


def test_resolving_makes_the_event_logs_relative_path_relative_to_a_folder(
    tmp_path: Path,
) -> None:
    settings = RuntimeSettings(event_log=EventLogConfig(path="events-{subtask}.jsonl"))
    resolved = settings.resolved(tmp_path)
    assert resolved.event_log is not None
    assert resolved.event_log.path == str(tmp_path.resolve() / "events-{subtask}.jsonl")
    assert RuntimeSettings().resolved(tmp_path) == RuntimeSettings()
