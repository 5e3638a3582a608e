"""Small example agents, each in a Python and a YAML form that compile to the same plan.

:data:`EXAMPLES` maps a plan name (the agent's name) to the Python factory and the YAML file
holding that agent; the
compiled plans live in ``plans/<name>.json`` (see ``python -m scripts.regenerate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

EXAMPLES_DIR = Path(__file__).parent


@dataclass(frozen=True)
class Example:
    """An example agent: ``factory`` as ``module:function`` and its YAML twin."""

    factory: str
    yaml_file: Path


EXAMPLES: dict[str, Example] = {
    "weather_react": Example("examples.weather:build_agent", EXAMPLES_DIR / "weather.yaml"),
    "ticket_triage": Example("examples.triage:build_agent", EXAMPLES_DIR / "triage.yaml"),
    "research_desk": Example("examples.research:build_agent", EXAMPLES_DIR / "research.yaml"),
    "review_workflow": Example(
        "examples.reviews:build_workflow_agent", EXAMPLES_DIR / "reviews.yaml"
    ),
    "review_react": Example("examples.reviews:build_react_agent", EXAMPLES_DIR / "reviews.yaml"),
    "docs_ingest": Example("examples.docs_qa:build_ingest_agent", EXAMPLES_DIR / "docs_qa.yaml"),
    "docs_qa": Example("examples.docs_qa:build_qa_agent", EXAMPLES_DIR / "docs_qa.yaml"),
    "customer_memory": Example(
        "examples.customer_memory:build_agent", EXAMPLES_DIR / "customer_memory.yaml"
    ),
    "refunds": Example("examples.refunds:build_agent", EXAMPLES_DIR / "refunds.yaml"),
}
