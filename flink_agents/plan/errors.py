"""Plan errors that point at the offending place with a JSON pointer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from flink_agents.api.refs import REFERENCE_PATTERN
from flink_agents.api.resources import LiteralSecretError


def json_pointer(location: Iterable[str | int]) -> str:
    """RFC 6901 pointer for a path of keys and indexes (``/actions/2/function``)."""
    parts = [str(part).replace("~", "~0").replace("/", "~1") for part in location]
    return "/" + "/".join(parts) if parts else ""


@dataclass(frozen=True)
class PlanIssue:
    """One problem: where (a JSON pointer into the plan) and what was expected."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '/'}: {self.message}"


class PlanWarning(UserWarning):
    """Something in an agent that compiles but looks wrong (an untyped tool parameter, a setup
    prompt's roles): issued when the agent is compiled, with where it is (``source``, and the
    JSON ``path`` into the plan) and the fix (``text``)."""

    def __init__(self, source: str, path: str, text: str) -> None:
        super().__init__(f"{source}: {path or '/'}: {text}")
        self.source = source
        self.path = path
        self.text = text


class PlanValidationError(ValueError):
    """A plan that cannot be loaded or run; ``issues`` lists every problem found."""

    def __init__(self, issues: Sequence[PlanIssue], source: str | None = None) -> None:
        self.issues = list(issues)
        self.source = source
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  {issue}" for issue in self.issues)
        super().__init__(f"invalid agent plan{where}:\n{lines}")


def describe_error(error: Mapping[str, Any]) -> str:
    """A pydantic error item as a sentence saying what was expected."""
    if error["type"] == "missing":
        return "required field is missing"
    if error["type"] == "extra_forbidden":
        return "unknown field (not part of the format)"
    if error["type"] == "string_pattern_mismatch" and (
        error.get("ctx", {}).get("pattern") == REFERENCE_PATTERN
    ):
        return f"expected module:qualname, such as my_pkg.tools:lookup (got {error['input']!r})"
    if isinstance(error.get("ctx", {}).get("error"), LiteralSecretError):
        return error_text(error)  # the input holds the secret
    return f"{error_text(error)} (got {error['input']!r})"


def error_text(error: Mapping[str, Any]) -> str:
    """A pydantic error's message; a validator's own error without the "Value error, " tag."""
    raised = error.get("ctx", {}).get("error")
    return str(raised) if error["type"] == "value_error" and raised else str(error["msg"])


def clean_location(data: Any, location: Sequence[str | int]) -> list[str | int]:
    """Drop the union-branch names pydantic inserts into an error location.

    A part is kept when it exists in ``data`` at that depth, or when it is the last part (a
    missing field); anything else is a branch tag such as ``'str'`` or ``'PromptSpec'``.
    """
    kept: list[str | int] = []
    current = data
    for position, part in enumerate(location):
        children = dict(enumerate(current)) if isinstance(current, list) else current
        if isinstance(children, Mapping) and part in children:
            current = children[part]
        elif position != len(location) - 1:
            continue
        kept.append(part)
    return kept


def issues_from_validation(error: ValidationError, data: Any) -> list[PlanIssue]:
    """Convert pydantic errors about ``data`` to plan issues with JSON pointers."""
    return [
        PlanIssue(json_pointer(clean_location(data, item["loc"])), describe_error(item))
        for item in error.errors()
    ]
