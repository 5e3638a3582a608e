"""The console: a local web app to watch runs, read their traces, look into the store, see a
job's health and decide waiting runs (docs/console.md).

It shows what the command line's readers read (``flink-agents trace``, ``store inspect``,
``waits``), in pages rendered on the server; a decision is written by ``waits``' writer. Needs
the ``console`` extra (Starlette, Jinja2, uvicorn).
"""

from flink_agents.console.app import Console, build_app
from flink_agents.console.console_sources import ConsoleSources

__all__ = ["Console", "ConsoleSources", "build_app"]
