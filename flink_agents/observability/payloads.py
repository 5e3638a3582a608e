"""Payloads for the event log: JSON values, cut at a size, with secrets taken out.

Secrets are kept out three ways: an object that is not plain data is written as its type name
(never its ``repr``, which could hold a client or a key); a mapping entry whose name says secret
(``api_key``, ``password``...) is redacted; and the values of the environment variables the
plan's resources reference (``{"env": "NAME"}``, ``"${env:NAME}"``: how API keys reach a
connection, see :func:`~flink_agents.api.resources.resolve_env_references`) are replaced
wherever they appear.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from flink_agents.api.json_values import json_bytes
from flink_agents.api.resources import env_reference
from flink_agents.api.secret_values import holds_a_secret, scrub_error_text, scrub_secrets_json

REDACTED = "<redacted>"
DEFAULT_MAX_PAYLOAD_CHARS = 2000
_SECRET_WORDS = ("api_key", "apikey", "secret", "password", "passwd", "authorization", "credential")
# A name ending in "token" too (token, access_token, bearer_token), not "input_tokens".
_SECRET_FIELD = re.compile("|".join(_SECRET_WORDS) + "|token$", re.I)
_SHORTEST_SECRET = 6  # shorter values would scrub ordinary words out of payloads


class PayloadWriter:
    """Turns values into event-log payloads of at most ``max_chars`` characters of JSON.

    A payload longer than that becomes ``{"truncated": <its first max_chars characters>,
    "chars": <its full length>}``.
    """

    def __init__(self, max_chars: int = DEFAULT_MAX_PAYLOAD_CHARS, secrets: Iterable[str] = ()):
        self.max_chars = max_chars
        self._secrets: set[str] = set()
        self.add_secrets(secrets)

    def add_secrets(self, values: Iterable[str]) -> None:
        """Values to replace by ``<redacted>`` wherever they appear in a payload."""
        self._secrets.update(v for v in values if len(v) >= _SHORTEST_SECRET)

    def text(self, message: str) -> str:
        """``message`` (an error's text) with secrets replaced, cut at ``max_chars``."""
        return scrub_error_text(self._scrub(message))[: self.max_chars]

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return scrub_secrets_json(text)  # and those this process resolved since

    def __call__(self, value: Any) -> Any:
        """``value`` as the payload a record holds: a JSON value."""
        data = to_jsonable_python(value, fallback=_opaque)
        text = json_bytes(data).decode()  # compact, as json.dumps(ensure_ascii=False), faster
        if _may_name_a_secret(text):
            # Some name says secret (or a value does): walk the fields. Most payloads have no
            # such word anywhere, and the walk in Python cost more than the rest of the payload.
            data = _redact_fields(data)
            text = json_bytes(data).decode()
        scrubbed = self._scrub(text)
        if len(scrubbed) > self.max_chars:
            return {"truncated": scrubbed[: self.max_chars], "chars": len(scrubbed)}
        return data if scrubbed == text else json.loads(scrubbed)

    def json(self, value: Any) -> bytes:
        """``value`` as a payload's JSON (UTF-8): the JSON of what :meth:`__call__` returns.

        Serialized once, straight from ``value``: most payloads name no secret and hold none,
        and are then their JSON as it is, or cut; any other takes :meth:`__call__`'s way.
        """
        raw = json_bytes(value, fallback=_opaque)
        text = raw.decode()  # str: `in` on bytes costs ~0.4 us a test, on str ~0.03
        if _may_name_a_secret(text) or self._holds_a_secret(text):
            return json_bytes(self(value))
        if len(text) > self.max_chars:
            return json_bytes({"truncated": text[: self.max_chars], "chars": len(text)})
        return raw

    def members(self, values: Mapping[str, Any]) -> bytes:
        """``values`` (payloads by field name, plain ASCII names) as the members of a JSON
        object, ``"name":<json>,...``: each value's JSON what :meth:`json` writes for it.

        Serialized once and gated once for all of them (a call's arguments and result: one
        pydantic call, one decode, one ``lower()`` and four scans less than rendering each).
        When the whole is at most ``max_chars`` characters no value is cut, and when it names
        no secret word and holds no secret no value is changed: each is then its JSON as it
        is. Otherwise each value takes :meth:`json`'s way on its own (serialized again).
        """
        raw = json_bytes(values, fallback=_opaque)
        text = raw.decode()
        if len(text) > self.max_chars or _may_name_a_secret(text) or self._holds_a_secret(text):
            return b",".join(
                b'"%s":%s' % (name.encode(), self.json(value)) for name, value in values.items()
            )
        return raw[1:-1]  # without the object's braces

    def _holds_a_secret(self, text: str) -> bool:
        for secret in self._secrets:
            if secret in text:
                return True
        return holds_a_secret(text)  # a value resolved in this process (api/secret_values.py)


def _may_name_a_secret(text: str) -> bool:
    """Whether a secret word (:func:`_is_secret_name`'s) appears anywhere in ``text``."""
    if not text.isascii():  # Unicode case folding: let the regex decide, as it does for names
        return _SECRET_FIELD.search(text) is not None
    # ASCII: the same answer (or a few more yes, the walk then decides), a twentieth of the
    # regex's CPU on a payload of 500 characters. Spelled out: an `or` of `in` tests cost a
    # third of any() over the words (tests/observability/test_payloads.py pins every word).
    # Four scans of a payload that names none (each word's own scan only after a shorter one
    # they share found something: "key" in api_key and apikey, "cre" in secret and credential).
    lowered = text.lower()
    return (
        ("key" in lowered and ("api_key" in lowered or "apikey" in lowered))
        or ("cre" in lowered and ("secret" in lowered or "credential" in lowered))
        or "passw" in lowered  # password, passwd
        or "authorization" in lowered
        or 'token":' in lowered  # a key ending in token (compact JSON): not "output_tokens"
    )


def _opaque(value: Any) -> str:
    return f"<{type(value).__name__}>"


@functools.lru_cache(maxsize=4096)
def _is_secret_name(name: str) -> bool:
    # Payloads repeat the same few field names: one regex search per name, not per occurrence.
    return _SECRET_FIELD.search(name) is not None


def _redact_fields(data: Any) -> Any:
    if isinstance(data, dict):
        return {
            name: REDACTED if _is_secret_name(str(name)) else _redact_fields(item)
            for name, item in data.items()
        }
    if isinstance(data, list):
        return [_redact_fields(item) for item in data]
    return data


def referenced_secrets(plan_data: Any, environ: Mapping[str, str] | None = None) -> set[str]:
    """The values of the environment variables referenced anywhere in ``plan_data`` (a plan's
    JSON value: resource arguments, sub-agent scopes)."""
    environ = os.environ if environ is None else environ
    return {environ[name] for name in _references(plan_data) if name in environ}


def _references(data: Any) -> Iterator[str]:
    name = env_reference(data)
    if name is not None:
        yield name
    elif isinstance(data, Mapping):
        for item in data.values():
            yield from _references(item)
    elif isinstance(data, list):
        for item in data:
            yield from _references(item)
