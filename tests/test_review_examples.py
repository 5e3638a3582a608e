"""The review-scoring examples (``examples/reviews.py`` and ``.yaml``) run with the scripted
model: a bad review gets one star after the team is notified, a good one five stars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flink_agents.api import Agent
from flink_agents.cli import main
from flink_agents.plan import load_yaml_agents
from flink_agents.runtime import run_local

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

REVIEWS = [
    {"id": 1, "product": "kettle", "text": "This kettle is terrible, it leaks"},
    {"id": 2, "product": "mug", "text": "Lovely mug, keeps tea warm"},
]
SCORES = [
    [{"stars": 1, "summary": "unhappy: notified the kettle team"}],
    [{"stars": 5, "summary": "happy customer"}],
]


def _agents() -> dict[str, Agent]:
    from examples.reviews import build_react_agent, build_workflow_agent

    yaml_agents = load_yaml_agents(EXAMPLES / "reviews.yaml")
    return {
        "python workflow": build_workflow_agent(),
        "python react": build_react_agent(),
        "yaml workflow": yaml_agents["review_workflow"],
        "yaml react": yaml_agents["review_react"],
    }


@pytest.mark.parametrize("form", ["python workflow", "python react", "yaml workflow", "yaml react"])
def test_each_form_scores_the_reviews(form, capsys):
    results = run_local(_agents()[form], REVIEWS, key="id")
    assert [r.output_values for r in results] == SCORES
    assert capsys.readouterr().out == "notifying the kettle team\n"  # the tool ran once


def test_the_cli_writes_the_scores_apart_from_what_the_tool_prints(tmp_path, capsys):
    inputs, outputs = tmp_path / "reviews.jsonl", tmp_path / "scores.jsonl"
    inputs.write_text("".join(json.dumps(review) + "\n" for review in REVIEWS))
    source = str(EXAMPLES / "reviews.yaml")
    args = ["run", "--local", source, "--agent", "review_react", "--input", str(inputs)]
    assert main([*args, "--key", "id", "--output", str(outputs)]) == 0
    lines = [json.loads(line) for line in outputs.read_text().splitlines()]
    # In the order the runs finished, as a job writes them.
    scores = {review["id"]: score for review, (score,) in zip(REVIEWS, SCORES, strict=True)}
    assert {line["key"]: line["output"] for line in lines} == scores
    assert capsys.readouterr().out == "notifying the kettle team\n"
