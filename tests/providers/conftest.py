"""Fixtures of the provider tests: a fake model server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.fake_servers import FakeModelServer

AWS_TEST_ACCESS_KEY_ID = "AKIAFLINKAGENTSTEST"
AWS_TEST_SECRET_KEY = "aws-secret-SENTINEL-must-not-leak"


@pytest.fixture(autouse=True)
def aws_test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake AWS credentials and no host AWS configuration (files, instance metadata), so the
    Bedrock connection signs with known values and never reaches out for others."""
    for variable in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_TEST_ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_TEST_SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake
