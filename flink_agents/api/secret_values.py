"""The values of the secrets this process resolved, and text with them taken out.

Every secret reaches a resource through an environment reference (``{"env": NAME}``,
``"${env:NAME}"``, an MCP ``bearer_token_env`` / ``header_env``); whatever resolves one tells
:func:`remember_secret` its value. What leaves the process -- a store record, an error output,
a tool's result or failure shown to a model, the event log -- is passed through
:func:`scrub_secrets` at the boundary where it is written, so a key a gateway echoes in a 401
body, or a URL with ``?key=...`` in a tool's traceback, is written as ``<redacted>``.

Two ways: the values remembered here are replaced wherever they appear (also in their JSON
escaped form: :func:`scrub_secrets_json`); and error texts (:func:`scrub_error_text`) also lose
what has the shape of a credential -- a ``Bearer`` token, a ``key=``/``token=`` query parameter,
a value after an ``Authorization``/``x-api-key`` header name, a common key prefix such as
``sk-`` -- so a key this process never resolved (a user's, in a tool's URL) is cut out too.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading

REDACTED = "<redacted>"
#: Shorter values are not remembered: they would scrub ordinary words out of every text.
SHORTEST_SECRET = 6

_lock = threading.Lock()
_values: frozenset[str] = frozenset()
# The same values as their JSON string escapes, where those differ (a quote, a backslash...).
_json_forms: frozenset[tuple[str, str]] = frozenset()

# Credentials by shape, for error texts. Each keeps its lead-in (the header or parameter name)
# and replaces what follows it.
_SHAPES = re.compile(
    r"(?P<lead>"
    r"\bbearer\s+"
    r"|\b(?-i:Basic)\s+(?=[A-Za-z0-9+/]{8,}={0,2}(?![\w+/=]))"  # the HTTP scheme, base64
    r"|[?&;](?:api[_-]?key|key|token|access_token|auth|sig|signature|password|secret)="
    r"|\b(?:authorization|x-api-key|api-key|x-goog-api-key|proxy-authorization)[\"']?\s*[:=]\s*"
    r"[\"']?(?:(?:bearer|basic|token)\s+)?"
    r")"
    r"(?P<value>[^\s\"'&;,)}\]]{6,})"
    r"|(?P<prefixed>\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abpr]-[A-Za-z0-9-]{10,}|\bAIza[0-9A-Za-z_-]{30,})",
    re.IGNORECASE,
)


def remember_secret(value: str) -> None:
    """Remember ``value`` (a resolved secret) so that every scrub in this process replaces it."""
    global _values, _json_forms
    if not isinstance(value, str) or len(value) < SHORTEST_SECRET or value in _values:
        return
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    with _lock:  # copy on write: scrubs read the sets without the lock
        _values = _values | {value}
        if escaped != value:
            _json_forms = _json_forms | {(escaped, REDACTED)}


def remembered_secrets() -> frozenset[str]:
    """The secret values remembered in this process."""
    return _values


def forget_secrets() -> None:
    """Forget every remembered value (for tests that resolve their own secrets)."""
    global _values, _json_forms
    with _lock:
        _values, _json_forms = frozenset(), frozenset()


def holds_a_secret(text: str) -> bool:
    """Whether ``text`` holds a remembered secret value."""
    for value in _values:  # noqa: SIM110 - a loop: no generator frame per text
        if value in text:
            return True
    return False


def scrub_secrets(text: str) -> str:
    """``text`` with every remembered secret value replaced by ``<redacted>``."""
    for value in _values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def scrub_secrets_json(text: str) -> str:
    """:func:`scrub_secrets` for JSON text: a value is also found in its escaped form."""
    text = scrub_secrets(text)
    for escaped, replacement in _json_forms:
        if escaped in text:
            text = text.replace(escaped, replacement)
    return text


def scrub_json_bytes(data: bytes) -> bytes:
    """:func:`scrub_secrets_json` for UTF-8 JSON bytes (a store record's body); ``data`` itself
    when nothing is remembered or nothing is found (no copy on the usual way)."""
    if not _values:
        return data
    text = data.decode("utf-8", "surrogatepass")
    scrubbed = scrub_secrets_json(text)
    return data if scrubbed == text else scrubbed.encode("utf-8", "surrogatepass")


def scrub_error_text(text: str) -> str:
    """An error's message or traceback with remembered secrets and credential shapes removed."""
    return _SHAPES.sub(_redact_match, scrub_secrets(text))


_CREDENTIAL_VALUE = re.compile(
    r"\s*(?:(?:bearer|basic|token)\s+\S{6,}"
    r"|(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,})\s*",
    re.IGNORECASE,
)


# A URL carrying a key in its query (``https://...?key=...``).
_CREDENTIAL_IN_URL = re.compile(
    r"[?&](?:api[_-]?key|key|token|access_token|secret|password|sig|signature)=[^&\s]{6,}",
    re.IGNORECASE,
)


def looks_like_credential(value: str) -> bool:
    """Whether ``value`` as a whole has a credential's shape: an ``Authorization`` value
    (``Bearer``/``Basic``/``Token`` and a token) or a key with a common provider prefix
    (``sk-``, ``AKIA``, ``ghp_``, ``xoxb-``, ``AIza``), or a URL with a key in its query."""
    return (
        _CREDENTIAL_VALUE.fullmatch(value) is not None
        or _CREDENTIAL_IN_URL.search(value) is not None
    )


def scrub_exception_chain(error: BaseException) -> None:
    """Scrub, in place, the text arguments of ``error`` and of the exceptions it was raised
    from or during: what a host prints with the traceback of a job's failure (Flink's job
    status, a log line). Only for an exception on its way out of the engine."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if any(isinstance(arg, str) for arg in current.args):
            # An exception type that refuses new args keeps its own.
            with contextlib.suppress(AttributeError, TypeError):
                current.args = tuple(
                    scrub_error_text(arg) if isinstance(arg, str) else arg for arg in current.args
                )
        current = current.__cause__ or current.__context__


def _redact_match(match: re.Match[str]) -> str:
    lead = match.group("lead")
    return REDACTED if lead is None else lead + REDACTED
