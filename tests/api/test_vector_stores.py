"""Metadata filters of the vector store contract."""

from __future__ import annotations

import pytest

from flink_agents.api.vector_stores import filter_conditions, matches_filter

META = {"source": "docs/a.md", "chunk": 3, "draft": False}


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (None, True),
        ({}, True),
        ({"source": "docs/a.md"}, True),
        ({"source": "docs/b.md"}, False),
        ({"source": {"$ne": "docs/b.md"}}, True),
        ({"chunk": {"$gte": 3}, "draft": False}, True),
        ({"chunk": {"$gt": 3}}, False),
        ({"chunk": {"$lt": 4}}, True),
        ({"source": {"$in": ["docs/a.md", "docs/c.md"]}}, True),
        ({"source": {"$nin": ["docs/a.md"]}}, False),
        ({"missing": "x"}, False),
        ({"source": {"$gt": 1}}, False),  # no order between a string and a number
    ],
)
def test_a_record_matches_when_every_condition_holds(
    where: dict[str, object] | None, expected: bool
) -> None:
    assert matches_filter(META, where) is expected


@pytest.mark.parametrize(
    "where",
    [{"source": {"$like": "docs"}}, {"source": {"$eq": 1, "$ne": 2}}, {"chunk": {"$in": 3}}],
)
def test_an_unknown_or_malformed_condition_is_refused(where: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"chunk|source"):
        filter_conditions(where)
