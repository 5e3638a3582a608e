"""api/moved: old module and class paths say where they moved, in references and imports."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from flink_agents.api.moved import MOVED, moved_reference
from flink_agents.api.refs import UnresolvableReference, import_reference


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_each_entry_is_gone_from_its_old_path_and_found_at_its_new_one(old, new):
    """A stale entry (an old path back in use, a new path moved again) fails here."""
    if ":" in old:
        import_reference(new)
        with pytest.raises(UnresolvableReference):
            import_reference(old)
    else:
        importlib.import_module(new)
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "flink_agents.integrations.scripted:ScriptedChatModelConnection",
            "flink_agents.providers.scripted:ScriptedChatModelConnection",
        ),
        ("flink_agents.api.react:react_start", "flink_agents.agents.react:react_start"),
        (
            "flink_agents.runtime.store.config:StoreConfig",  # a submodule follows its package
            "flink_agents.durable.store.store_config:StoreConfig",
        ),
    ],
)
def test_a_reference_to_a_moved_module_names_what_to_use(old, new):
    assert moved_reference(old) == new
    with pytest.raises(UnresolvableReference) as info:
        import_reference(old)
    module = old.partition(":")[0]
    assert str(info.value) == f"cannot import {old!r}: module {module!r} moved: use {new!r}"
    import_reference(new)


def test_a_renamed_class_names_its_new_name():
    with pytest.raises(UnresolvableReference) as info:
        import_reference("flink_agents.durable.store.kafka:KafkaStoreConfig")
    assert str(info.value).endswith(
        "; it moved: use 'flink_agents.durable.store.store_config:StoreConfig'"
    )


def test_a_reference_that_never_existed_gets_no_hint():
    assert moved_reference("flink_agents.nowhere:Thing") is None
    with pytest.raises(UnresolvableReference) as info:
        import_reference("flink_agents.api.nowhere:Thing")
    assert "moved" not in str(info.value)


def test_a_python_import_of_a_moved_module_says_where_it_went():
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("flink_agents.api.react")
    assert str(info.value) == (
        "No module named 'flink_agents.api.react'; it moved to flink_agents.agents.react"
    )


def test_a_python_import_from_a_package_split_up_lists_where_its_modules_went():
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("flink_agents.integrations.scripted")  # its package goes first
    assert str(info.value) == (
        "No module named 'flink_agents.integrations'; its modules moved: anthropic, "
        "http_subagent, ollama, openai_compatible, scripted to flink_agents.providers"
    )


def test_modules_that_never_existed_are_left_to_the_usual_error():
    assert importlib.util.find_spec("flink_agents.api.nowhere") is None
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("flink_agents.api.nowhere")
    assert str(info.value) == "No module named 'flink_agents.api.nowhere'"


@pytest.mark.parametrize(
    ("module", "name", "new"),
    [
        ("flink_agents.api", "ReActAgent", "flink_agents.agents:ReActAgent"),
        ("flink_agents.api", "import_reference", "flink_agents.api.refs:import_reference"),
        ("flink_agents.runtime", "DirectCallRunner", "flink_agents.durable:DurableCalls"),
        ("flink_agents.durable", "StoreCallRunner", "flink_agents.durable:DurableCalls"),
        ("flink_agents.testing", "CountingCallRunner", "flink_agents.testing:CountingProbe"),
        (
            "flink_agents.api",
            "HttpSubagent",
            "flink_agents.providers.http_subagent:HttpSubagent",
        ),
        (
            "flink_agents.api.attempts",
            "retry_within_budget",
            "flink_agents.providers.retry_loop:retry_within_budget",
        ),
    ],
)
def test_a_name_a_package_face_used_to_export_says_where_it_went(module, name, new):
    with pytest.raises(ImportError) as info:
        exec(f"from {module} import {name}", {})
    assert str(info.value) == f"cannot import name {name!r} from {module!r}; it moved: use {new!r}"


def test_a_name_a_package_face_never_exported_stays_an_attribute_error():
    api = importlib.import_module("flink_agents.api")
    assert getattr(api, "Nowhere", None) is None
    with pytest.raises(ImportError) as info:
        exec("from flink_agents.api import Nowhere", {})
    assert "moved" not in str(info.value)


def test_the_changelog_lists_every_moved_path_as_the_table_does():
    """CHANGELOG.md's "Moved" table and MOVED are one list: a path added to either fails here."""
    changelog = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text()
    section = changelog.split("\n### Moved\n", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)`", section, flags=re.MULTILINE)
    assert dict(rows) == MOVED
    assert len(rows) == len(MOVED)  # no row twice
