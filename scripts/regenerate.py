"""Regenerate what is derived from code: the example plans and the published JSON Schemas.

``python -m scripts.regenerate`` (from the repository root) rewrites ``plans/*.json``,
``flink_agents/schemas/agent.schema.json`` (YAML agents) and ``job.schema.json`` (job specs);
with ``--check`` it only reports stale files and exits 1 if any. A test runs the check so the
files never go stale. A developer tool: it is not part of the installed package.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from examples import EXAMPLES
from flink_agents.flink.job import JobSpec
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.sources import agent_from_reference
from flink_agents.plan.yaml.schema import agents_json_schema

REPO_DIR = Path(__file__).resolve().parents[1]
SCHEMA_FILE = REPO_DIR / "flink_agents" / "schemas" / "agent.schema.json"
JOB_SCHEMA_FILE = SCHEMA_FILE.with_name("job.schema.json")
PLANS_DIR = REPO_DIR / "plans"


def generated_files() -> dict[Path, str]:
    """Every generated file and the content it should have."""
    files = {
        PLANS_DIR / f"{name}.json": compile_agent(agent_from_reference(example.factory)).to_json()
        for name, example in EXAMPLES.items()
    }
    files[SCHEMA_FILE] = _json(agents_json_schema())
    files[JOB_SCHEMA_FILE] = _json(JobSpec.model_json_schema())
    return files


def _json(schema: dict[str, object]) -> str:
    return json.dumps(schema, sort_keys=True, indent=2) + "\n"


def stale_files() -> list[Path]:
    """Generated files whose content on disk differs from what the code gives."""
    return [
        path
        for path, content in generated_files().items()
        if not path.exists() or path.read_text() != content
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.regenerate")
    parser.add_argument("--check", action="store_true", help="report stale files, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"stale: {path.relative_to(REPO_DIR)}", file=sys.stderr)
        return 1 if stale else 0
    for path, content in generated_files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        print(f"wrote {path.relative_to(REPO_DIR)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
