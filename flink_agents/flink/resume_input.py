"""The second input of the agent operator: decisions and events for waits (docs/waits.md).

Decision and event records (JSON text) are tagged and united with the inputs before the one
``key_by``, so one keyed operator -- one owner of the key's state -- takes both: a tagged
record carries its key (read by the decisions' own key selector), the united stream's selector
reads it back, and the operator hands the record to ``KeyedAgentLogic.on_resume``. No input
record starts with the tag (JSON text does not start with a control character).
"""

from __future__ import annotations

from collections.abc import Callable

RESUME_TAG = "\x1e"
"""Starts a decision or event record, and ends its key."""


def tagger(select: Callable[[str], str]) -> Callable[[str], str]:
    """A map over decision records: each becomes tag, its key (``select``), tag, the record."""

    def tag(text: str) -> str:
        return f"{RESUME_TAG}{select(text)}{RESUME_TAG}{text}"

    return tag


def united_selector(select_input: Callable[[str], str]) -> Callable[[str], str]:
    """The key selector of inputs united with tagged decision records."""

    def select(text: str) -> str:
        if text.startswith(RESUME_TAG):
            return text[1 : text.index(RESUME_TAG, 1)]
        return select_input(text)

    return select


def resume_text(value: str) -> str | None:
    """The decision or event record a tagged value carries; None for an input record."""
    if not value.startswith(RESUME_TAG):
        return None
    return value[value.index(RESUME_TAG, 1) + 1 :]
