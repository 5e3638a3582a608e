"""The providers' face: every provider class by name, each module loaded on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import flink_agents.providers as providers
from flink_agents.providers import _HOME


@pytest.mark.parametrize("name", providers.__all__)
def test_every_exported_name_is_the_object_of_its_module(name: str) -> None:
    assert getattr(providers, name) is getattr(importlib.import_module(_HOME[name]), name)


def test_the_face_exports_what_its_table_names() -> None:
    assert set(providers.__all__) == set(_HOME)
    with pytest.raises(AttributeError, match="NoSuchConnection"):
        providers.NoSuchConnection  # noqa: B018


def test_importing_the_face_loads_no_provider_module() -> None:
    probe = (
        "import sys, flink_agents.providers; "
        "print(sorted(m for m in sys.modules if m.startswith('flink_agents.providers.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
