"""flink-agents-py: LLM agents as keyed Apache Flink jobs, with durable calls."""

from typing import Any

__all__ = ["run_local"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing flink_agents.api does not pull in the runtime.
    if name == "run_local":
        from flink_agents.runtime.local import run_local

        return run_local
    raise AttributeError(f"module 'flink_agents' has no attribute {name!r}")
