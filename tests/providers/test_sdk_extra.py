"""A provider whose SDK is not installed says which extra installs it."""

from __future__ import annotations

import importlib
import sys

import pytest

from flink_agents.providers._sdk import sdk_from_extra

# Ollama talks to its server with httpx but shares the OpenAI tool format (openai_compatible).
PROVIDER_SDKS = [
    ("flink_agents.providers.openai_compatible", "openai"),
    ("flink_agents.providers.anthropic", "anthropic"),
    ("flink_agents.providers.ollama", "openai"),
]
# The cloud providers' SDKs have extras of their own.
CLOUD_SDKS = [
    ("flink_agents.providers.gemini", "google.genai", "gemini"),
    ("flink_agents.providers.bedrock", "boto3", "bedrock"),
]


@pytest.mark.parametrize(("module", "sdk"), PROVIDER_SDKS)
def test_a_missing_sdk_names_the_providers_extra(
    module: str, sdk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, sdk, None)  # None in sys.modules: `import sdk` fails
    for loaded in [name for name in sys.modules if name.startswith("flink_agents.providers.")]:
        if not loaded.startswith("flink_agents.providers._"):
            monkeypatch.delitem(sys.modules, loaded)  # restored when the test ends

    with pytest.raises(ImportError) as error:
        importlib.import_module(module)

    assert f"needs the {sdk!r} package" in str(error.value)
    assert "pip install 'flink-agents-py[providers]'" in str(error.value)
    assert error.value.name == sdk


@pytest.mark.parametrize(("module", "sdk", "extra"), CLOUD_SDKS)
def test_a_missing_cloud_sdk_names_its_own_extra(
    module: str, sdk: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, sdk, None)
    monkeypatch.delitem(sys.modules, module, raising=False)  # restored when the test ends

    with pytest.raises(ImportError) as error:
        importlib.import_module(module)

    assert f"needs the {sdk!r} package" in str(error.value)
    assert f"pip install 'flink-agents-py[{extra}]'" in str(error.value)


def test_a_missing_namespace_package_of_a_dotted_sdk_names_the_extra() -> None:
    with (
        pytest.raises(ModuleNotFoundError, match="gemini"),
        sdk_from_extra("google.genai", "x[gemini]"),
    ):
        raise ModuleNotFoundError("No module named 'google'", name="google")


def test_another_missing_module_is_raised_as_it_is() -> None:
    with pytest.raises(ModuleNotFoundError) as error, sdk_from_extra("openai"):
        import flink_agents_no_such_module  # noqa: F401

    assert error.value.name == "flink_agents_no_such_module"
    assert "pip install" not in str(error.value)
