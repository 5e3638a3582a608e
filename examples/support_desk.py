"""Tools of the support-desk example job (jobs/support_desk/agent.yaml).

The desk's tools call the example services over HTTP (see :mod:`examples.services`),
so every tool call is visible to an independent witness.
"""

from __future__ import annotations

import os

import httpx

SERVICES_URL = os.environ.get("FLINK_AGENTS_EXAMPLE_SERVICES", "http://127.0.0.1:8765")


def lookup_fact(topic: str) -> str:
    """Look a fact up in the support knowledge base.

    Args:
        topic: What to look up.
    """
    response = httpx.post(f"{SERVICES_URL}/tools/lookup_fact", json={"topic": topic}, timeout=30)
    response.raise_for_status()
    return str(response.json()["result"])
