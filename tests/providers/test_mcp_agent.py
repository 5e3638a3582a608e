"""The MCP example agent (examples/mcp_agent.py and its YAML twin) runs offline against its
stdio server, and ``flink-agents inspect`` lists what the model is offered from the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.mcp_agent import build_agent
from flink_agents.api.resources import ResourceType
from flink_agents.cli import main
from flink_agents.plan import compile_agent
from flink_agents.plan.resolve import resolve_plan
from flink_agents.plan.yaml.loader import YamlAgentError, load_yaml_agent
from flink_agents.runtime.local import run_local
from flink_agents.runtime.scopes import Scope

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both forms name the server script relative to the repository root."""
    monkeypatch.chdir(EXAMPLES.parent)


INPUTS = [{"id": 1, "miles": "26.2"}, {"id": 2, "miles": "1"}]
ANSWERS = ["26.2 mi = 42.16 km", "1 mi = 1.61 km"]


def test_the_example_agent_converts_with_the_servers_tool() -> None:
    results = run_local(build_agent(), INPUTS, key="id")
    assert [result.output_values for result in results] == [[answer] for answer in ANSWERS]


def test_the_servers_prompt_is_the_models_system_prompt() -> None:

    scope = Scope.build(resolve_plan(compile_agent(build_agent())))
    model = scope.resources.get("chat_model", ResourceType.CHAT_MODEL)
    request = model.request([])  # type: ignore[attr-defined]
    assert request.messages[0].role == "system"
    assert request.messages[0].content.endswith("Answer in a brief style.")
    assert [tool.name for tool in request.tools] == ["units__convert"]


def test_the_yaml_twin_declares_the_same_server_and_prompt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `python` on it: "${python}" needs none
    agent = load_yaml_agent(EXAMPLES / "mcp_agent.yaml")
    plan = compile_agent(agent)
    server = plan.resources["units"]
    assert server.type is ResourceType.TOOL
    assert server.arguments["namespace"] == "units"
    assert plan.resources["assistant"].arguments == {
        "server": "units",
        "prompt": "assistant",
        "arguments": {"style": "brief"},
    }
    results = run_local(agent, INPUTS, key="id")
    assert [result.output_values for result in results] == [[answer] for answer in ANSWERS]


def test_the_python_and_yaml_forms_compile_to_byte_identical_plans() -> None:
    python_plan = compile_agent(build_agent()).to_json()
    yaml_plan = compile_agent(load_yaml_agent(EXAMPLES / "mcp_agent.yaml")).to_json()
    assert python_plan == yaml_plan


def test_per_tool_settings_in_yaml_are_the_python_arguments_as_written(tmp_path: Path) -> None:
    settings = {
        "convert": {"idempotent": False, "timeout_seconds": 5, "retry": {"max_attempts": 2}}
    }
    text = (EXAMPLES / "mcp_agent.yaml").read_text()
    text = text.replace(
        "        timeout_seconds: 20\n",
        "        timeout_seconds: 20\n        tool_settings:\n          convert: "
        "{idempotent: false, timeout_seconds: 5, retry: {max_attempts: 2}}\n",
    )
    (tmp_path / "agent.yaml").write_text(text)
    yaml_plan = compile_agent(load_yaml_agent(tmp_path / "agent.yaml"))
    assert yaml_plan.resources["units"].arguments["tool_settings"] == settings


def test_a_yaml_mcp_server_name_must_be_a_namespace(tmp_path: Path) -> None:
    agents = tmp_path / "agents.yaml"
    agents.write_text(
        "agents:\n  - name: a\n    mcp_servers:\n      my.git:\n"
        "        transport: {type: stdio, command: git-mcp}\n"
    )
    with pytest.raises(YamlAgentError, match=r"mcp_servers\.my\.git.*name must be 1-32 of"):
        load_yaml_agent(agents)
    assert main(["compile", str(agents)]) == 2


def test_a_missing_server_binary_fails_the_run_in_one_line_naming_server_and_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (EXAMPLES / "mcp_agent.yaml").read_text()
    missing = tmp_path / "no-such-mcp-server"
    text = text.replace(
        'command: "${python}", args: [examples/mcp_server.py]', f"command: {missing}"
    )
    (tmp_path / "agent.yaml").write_text(text)
    (tmp_path / "in.jsonl").write_text('{"id": 1, "miles": "1"}\n')
    run = ["run", "--local", str(tmp_path / "agent.yaml"), "--input", str(tmp_path / "in.jsonl")]
    assert main([*run, "--key", "id"]) == 1
    failure, *rest = capsys.readouterr().err.splitlines()
    assert f"ModelCallError: MCP server 'units' ({missing}): list tools and prompts" in failure
    assert "No such file or directory" in failure
    assert len(rest) == 1 and "error_policy" in rest[0]  # the hint, no traceback


def test_a_yaml_mcp_server_needs_a_transport(tmp_path: Path) -> None:
    agents = tmp_path / "agents.yaml"
    agents.write_text("agents:\n  - name: a\n    mcp_servers:\n      s: {include: [x]}\n")
    with pytest.raises(YamlAgentError, match=r"mcp_servers\.s\.transport"):
        load_yaml_agent(agents)


def test_inspect_lists_what_the_model_is_offered_from_the_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["inspect", "examples.mcp_agent:build_agent"]) == 0
    out = capsys.readouterr().out
    assert "tools: units\n" in out
    assert "from units: units__convert\n" in out
