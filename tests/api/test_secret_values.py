"""What the secret scrub takes out of a text: remembered values (also JSON escaped) and, in an
error's text, what has the shape of a credential."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flink_agents.api.resources import resolve_env_references
from flink_agents.api.secret_values import (
    forget_secrets,
    remember_secret,
    scrub_error_text,
    scrub_json_bytes,
    scrub_secrets,
)


@pytest.fixture(autouse=True)
def nothing_remembered() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def test_a_resolved_reference_is_remembered_and_scrubbed() -> None:
    resolve_env_references({"api_key": {"env": "K"}}, {"K": "s3cr3t-value"})
    assert scrub_secrets("sent s3cr3t-value twice: s3cr3t-value") == (
        "sent <redacted> twice: <redacted>"
    )


def test_short_values_are_not_remembered() -> None:
    remember_secret("abc")
    assert scrub_secrets("abc abc") == "abc abc"


def test_a_value_is_found_in_its_json_escaped_form() -> None:
    remember_secret('pa"ss\\word')
    assert scrub_json_bytes(b'{"v":"pa\\"ss\\\\word"}') == b'{"v":"<redacted>"}'


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("Authorization: Bearer abcdef123456", "Authorization: Bearer <redacted>"),
        ("{'Authorization': 'Basic dXNlcjpwYXNz'}", "{'Authorization': 'Basic <redacted>'}"),
        ("GET https://x.test/v1?key=AIzaXYZ123&q=1", "GET https://x.test/v1?key=<redacted>&q=1"),
        ("x-api-key: abcdef123456", "x-api-key: <redacted>"),
        ("used sk-proj-0123456789abcdefghij here", "used <redacted> here"),
        ("aws AKIAABCDEFGHIJKLMNOP", "aws <redacted>"),
        ("plain text with no credential", "plain text with no credential"),
    ],
)
def test_an_error_text_loses_credential_shapes(text: str, scrubbed: str) -> None:
    assert scrub_error_text(text) == scrubbed


def test_ordinary_words_after_basic_are_kept() -> None:
    assert scrub_error_text("basic validation failed") == "basic validation failed"
    assert scrub_error_text("Basic dXNlcjpwYXNzd29yZA==") == "Basic <redacted>"
