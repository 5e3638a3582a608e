import json
import os
import socket
import sys
from pathlib import Path

import pytest

from flink_agents.api import Agent, InputEvent, OutputEvent
from flink_agents.cli import build_parser, main
from flink_agents.plan import AgentPlan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_weather(inputs: Path, key: str) -> list[str]:
    """The arguments running the weather example locally over ``inputs``."""
    return ["run", "--local", "examples.weather:build_agent", "--input", str(inputs), "--key", key]


def test_compile_yaml_and_python_give_the_same_plan_file(tmp_path):
    from_yaml, from_python = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["compile", str(EXAMPLES / "triage.yaml"), "-o", str(from_yaml)]) == 0
    assert main(["compile", "examples.triage:build_agent", "-o", str(from_python)]) == 0
    assert from_yaml.read_text() == from_python.read_text()
    assert AgentPlan.from_json(from_yaml.read_text()).name == "ticket_triage"


def test_run_local_prints_outputs_as_json_lines(tmp_path, capsys):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"city": "Oslo"}\n\n{"city": "Lisbon"}\n')
    assert main(run_weather(inputs, "city")) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"key": "Oslo", "seq": 0, "output": {"city": "Oslo", "advice": "coat"}},
        {"key": "Lisbon", "seq": 0, "output": {"city": "Lisbon", "advice": "t-shirt"}},
    ]


def shout(event, ctx):
    """An action that prints, as a chatty tool might, then outputs its input."""
    print("tool chatter")
    ctx.send_event(OutputEvent(output=event.input["n"]))


def shouting_agent() -> Agent:
    return Agent(name="shouting").add_action(shout, InputEvent)


def test_run_local_output_file_holds_only_the_json_lines(tmp_path, capsys):
    inputs, outputs = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inputs.write_text('{"n": 1}\n')
    source = "tests.test_cli:shouting_agent"
    args = ["run", "--local", source, "--input", str(inputs), "--key", "n"]
    assert main([*args, "--output", str(outputs)]) == 0
    assert outputs.read_text() == '{"key": 1, "output": 1, "seq": 0}\n'
    assert capsys.readouterr().out == "tool chatter\n"


def test_bad_sources_exit_with_a_message(tmp_path, capsys):
    assert main(["compile", "no_such_module:Agent"]) == 2
    assert "module 'no_such_module' is not importable" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  - name: x\n    actions: 3\n")
    assert main(["compile", str(bad)]) == 2
    assert f"{bad}:3:" in capsys.readouterr().err
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"city": "Oslo"}\n')
    assert (
        main(["run", "examples/plans/weather_react.json", "--input", str(inputs), "--key", "city"])
        == 2
    )


def test_inspect_lists_offered_and_skipped_subagents(tmp_path, capsys):
    agents = tmp_path / "agents.yaml"
    agents.write_text(
        """\
agents:
  - name: desk
    react: {chat_model: chat_model}
    connections:
      conn: {class: "flink_agents.providers.scripted:ScriptedChatModelConnection",
             arguments: {turns: [{content: hi}]}}
    chat_models:
      chat_model: {connection: conn, subagents: [helper, shapeless]}
    subagents:
      helper: {class: "tests.subagent_samples:FakeSubagent",
               arguments: {input_schema: {type: object}}}
      shapeless: {class: "tests.subagent_samples:FakeSubagent"}
"""
    )
    assert main(["inspect", str(agents)]) == 0
    out = capsys.readouterr().out
    assert "sub-agent tools: subagent_helper\n" in out
    assert "skipped sub-agents: shapeless (no input schema" in out


def test_a_missing_file_is_a_usage_error_naming_it(tmp_path, capsys):
    missing = tmp_path / "agents.yaml"
    assert main(["compile", str(missing)]) == 2
    assert (
        capsys.readouterr().err == f"flink-agents compile: {missing}: No such file or directory\n"
    )
    inputs = tmp_path / "in.jsonl"
    assert main(run_weather(inputs, "c")) == 2
    assert f"{inputs}: No such file or directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["trace", "--topic", "t"],
        ["store", "inspect", "--topic", "t", "--key", "k"],
        ["store", "export", "--topic", "t", "-o", "out.jsonl"],
        ["replay", "plan.json", "--topic", "t"],
    ],
)
@pytest.mark.parametrize("flag", ["--bootstrap", "--bootstrap-servers"])
def test_every_topic_command_takes_both_spellings_of_the_brokers(command, flag):
    args = build_parser().parse_args([*command, flag, "broker:9093"])
    assert args.bootstrap_servers == "broker:9093"


def test_trace_says_when_no_run_matches(tmp_path, capsys):
    log = tmp_path / "events.jsonl"
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"city": "Oslo"}\n')
    assert main([*run_weather(inputs, "city"), "--event-log", str(log)]) == 0
    capsys.readouterr()
    assert main(["trace", str(log), "--key", "Lima"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "flink-agents trace: no run of key Lima in the event log\n",
    )


def test_a_reader_closing_the_pipe_ends_the_command_without_a_traceback(tmp_path, monkeypatch):
    read_end, write_end = os.pipe()
    os.close(read_end)
    with open(write_end, "w", buffering=1) as closed_pipe:  # each line written at once
        monkeypatch.setattr(sys, "stdout", closed_pipe)
        assert main(["compile", "examples.weather:build_agent"]) == 1


def test_submit_to_an_address_nobody_answers_says_so(capsys):
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    job = str(EXAMPLES / "jobs" / "weather.yaml")
    assert main(["submit", job, "--jobmanager", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"flink-agents submit: no JobManager answers at 127.0.0.1:{port} (")
    assert "scripts/flink-cluster.sh start" in err


def test_run_of_a_job_whose_input_file_is_missing_names_it(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: weather\nagent: {EXAMPLES / 'weather.yaml'}\n"
        "source: {kind: list, path: cities.jsonl}\nkey: city\nsink: {kind: stdout}\n"
    )
    assert main(["run", str(job)]) == 2
    assert capsys.readouterr().err == (
        f"flink-agents run: {job}: source.path: no file {tmp_path / 'cities.jsonl'} "
        "(relative paths start at the job spec's folder)\n"
    )


def test_an_input_without_the_key_field_is_named_plainly(tmp_path, capsys):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('{"city": "Oslo"}\n')
    assert main(run_weather(inputs, "town")) == 2
    assert capsys.readouterr().err == (
        "flink-agents run: input record has no key field 'town': {'city': 'Oslo'}\n"
    )


def test_a_file_of_several_agents_asks_for_agent(capsys):
    assert main(["compile", str(EXAMPLES / "reviews.yaml")]) == 2
    assert "say which one (--agent NAME, or name=)" in capsys.readouterr().err
