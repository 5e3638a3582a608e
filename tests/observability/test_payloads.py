"""Payloads: JSON values, cut at the configured size, and never a secret."""

import json

import pytest
from pydantic import BaseModel, SecretStr

from flink_agents.observability.payloads import REDACTED, PayloadWriter, referenced_secrets


class Client:
    def __repr__(self) -> str:
        return "Client(api_key='sk-live-should-never-show')"


class Settings(BaseModel):
    url: str
    hidden: SecretStr


def test_plain_data_is_kept_as_json_values():
    assert PayloadWriter()(
        {"a": [1, "two", None], "m": Settings(url="u", hidden=SecretStr("x"))}
    ) == {
        "a": [1, "two", None],
        "m": {"url": "u", "hidden": "**********"},
    }


def test_a_payload_longer_than_the_limit_is_cut_and_says_how_long_it_was():
    payload = PayloadWriter(max_chars=10)({"text": "x" * 100})
    assert payload == {"truncated": '{"text":"x', "chars": 111}


def test_objects_that_are_not_data_are_written_as_their_type_never_their_repr():
    assert PayloadWriter()({"client": Client()}) == {"client": "<Client>"}


def test_fields_named_like_secrets_are_redacted_at_any_depth():
    payload = PayloadWriter()({"headers": [{"Authorization": "Bearer abc"}], "api_key": "k"})
    assert payload == {"headers": [{"Authorization": REDACTED}], "api_key": REDACTED}


def test_values_of_referenced_environment_variables_are_replaced_everywhere():
    plan_data = {
        "resources": {
            "openai": {"arguments": {"api_key": {"env": "OPENAI_KEY"}}},
            "scope": {"nested": ["${env:OTHER_KEY}"]},
        }
    }
    environ = {"OPENAI_KEY": "sk-123456789", "OTHER_KEY": "hunter2-other", "UNUSED": "plain-words"}
    secrets = referenced_secrets(plan_data, environ)
    assert secrets == {"sk-123456789", "hunter2-other"}

    writer = PayloadWriter(secrets=secrets)
    assert writer({"reply": "your key is sk-123456789!"}) == {"reply": f"your key is {REDACTED}!"}
    assert writer.text("ValueError: bad key hunter2-other") == f"ValueError: bad key {REDACTED}"
    assert writer({"note": "plain-words"}) == {"note": "plain-words"}  # not referenced


def test_token_counts_are_not_secrets():
    usage = {"usage": {"input_tokens": 3, "output_tokens": 5}, "max_tokens": 9}
    assert PayloadWriter()(usage) == usage


def test_a_secret_word_in_a_value_redacts_nothing():
    payload = PayloadWriter()({"question": "how do I reset my password?", "n": [1, {"a": None}]})
    assert payload == {"question": "how do I reset my password?", "n": [1, {"a": None}]}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("API_KEY", "plain"),
        ("x-ApiKey", "plain"),
        ("db_password", "plain"),
        ("Authorization", "plain"),
        ("old_passwd", "plain"),
        ("clientSecret", "plain"),
        ("Credentials", "plain"),
        ("token", "plain"),
        ("refresh_Token", "plain"),
        ("api_key", "caf\u00e9"),
        ("\u017fecret", "caf\u00e9"),  # a long s: the regex's Unicode case folding decides
    ],
)
def test_a_secret_name_is_redacted_in_any_case_and_script(name, text):
    writer = PayloadWriter()
    payload = writer({"outer": [{name: "value", "text": text}]})
    assert payload == {"outer": [{name: REDACTED, "text": text}]}
    assert json.loads(writer.json({"outer": [{name: "value", "text": text}]})) == payload
