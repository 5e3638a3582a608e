import json

from flink_agents.flink.job import JobSpec
from flink_agents.plan.yaml.schema import agents_json_schema
from scripts import regenerate


def test_the_plans_folder_and_the_schemas_are_current():
    stale = [str(path) for path in regenerate.stale_files()]
    assert stale == [], "run `python -m scripts.regenerate` and commit the result"


def test_the_plans_folder_holds_exactly_the_shipped_agents():
    assert regenerate.PLANS_DIR == regenerate.REPO_DIR / "plans"
    generated = {
        path for path in regenerate.generated_files() if path.parent == regenerate.PLANS_DIR
    }
    assert set(regenerate.PLANS_DIR.glob("*.json")) == generated


def test_every_example_has_a_plan_file_and_the_schema_covers_the_yaml_blocks():
    names = {path.name for path in regenerate.generated_files()}
    expected_files = {"weather_react.json", "ticket_triage.json"}
    assert expected_files | {"agent.schema.json", "job.schema.json"} <= names
    schema = json.loads(regenerate.SCHEMA_FILE.read_text())
    assert schema == json.loads(json.dumps(agents_json_schema()))
    agent_fields = set(schema["$defs"]["AgentSpec"]["properties"])
    expected = {"actions", "resources", "prompts", "tools", "chat_models", "subagents", "react"}
    assert expected <= agent_fields
    job_schema = json.loads(regenerate.JOB_SCHEMA_FILE.read_text())
    assert job_schema == JobSpec.model_json_schema()


def test_check_mode_reports_a_stale_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(regenerate, "SCHEMA_FILE", tmp_path / "agent.schema.json")
    monkeypatch.setattr(regenerate, "REPO_DIR", tmp_path.parent)
    assert regenerate.main(["--check"]) == 1
    assert "agent.schema.json" in capsys.readouterr().err
