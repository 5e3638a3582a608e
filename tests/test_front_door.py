"""The front door: ``flink_agents`` exports what a user needs, and importing it stays light."""

import subprocess
import sys

import flink_agents


def test_every_exported_name_resolves_to_the_object_of_its_home_package() -> None:
    from flink_agents.agents import ReActAgent
    from flink_agents.api import Agent, Subagent
    from flink_agents.durable.store.store_config import StoreConfig
    from flink_agents.flink import AgentsExecutionEnvironment
    from flink_agents.runtime import run_local

    for name in flink_agents.__all__:
        assert getattr(flink_agents, name) is not None, name
    assert flink_agents.Agent is Agent
    assert flink_agents.Subagent is Subagent
    assert flink_agents.ReActAgent is ReActAgent
    assert flink_agents.run_local is run_local
    assert flink_agents.StoreConfig is StoreConfig
    assert flink_agents.AgentsExecutionEnvironment is AgentsExecutionEnvironment


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    try:
        flink_agents.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("flink_agents.NoSuchThing did not raise")


def test_importing_the_front_door_or_the_api_does_not_start_pyflink() -> None:
    probe = (
        "import sys, flink_agents, flink_agents.api, flink_agents.agents; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyflink', 'confluent_kafka')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_importing_the_front_door_or_the_api_does_not_load_an_http_client() -> None:
    # The contract is declarations; HTTP clients belong to the providers that call out.
    probe = (
        "import sys, flink_agents, flink_agents.api, flink_agents.api.subagents; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpcore')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
