"""The call path of a model call (issue 31: "following a model call from the operator to its
store write crosses at most 4 packages"), measured by ``bench/call_path.py`` on the weather agent
through ``run_local``.

In process the path starts in ``runtime``; under Flink the operator (``flink``) hands each input
to the same engine, one package more: the budget of 4 leaves 3 to the in-process path.
"""

from __future__ import annotations

from bench.call_path import CallPath, model_call_path


def test_a_model_call_reaches_its_store_write_through_at_most_three_packages_in_process() -> None:
    path = model_call_path()
    assert len(path.to_store()) <= 3, path.to_store()


def test_the_contract_and_the_providers_are_not_on_the_way_to_the_store_write() -> None:
    path = model_call_path()
    assert {"api", "providers"}.isdisjoint(path.to_store()), path.to_store()
    # The measure sees them where they are: the called model's setup and connection.
    assert {"api", "providers"} <= set(CallPath.packages(path.invoked))
    assert path.written[-1].where.endswith(":put")
