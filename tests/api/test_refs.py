import pytest

from flink_agents.api.refs import UnresolvableReference, import_reference


def test_a_module_whose_own_code_raises_is_reported_with_the_users_line(tmp_path, monkeypatch):
    (tmp_path / "raising_agent_module.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnresolvableReference) as info:
        import_reference("raising_agent_module:x")
    message = str(info.value)
    assert "importing module 'raising_agent_module' raised RuntimeError: boom" in message
    assert f"(at {tmp_path / 'raising_agent_module.py'}:2)" in message


def test_a_missing_attribute_names_it():
    with pytest.raises(UnresolvableReference, match="'textwrap' has no attribute 'nope'"):
        import_reference("textwrap:nope")
