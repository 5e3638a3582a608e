"""Strategies of bad input for the property-based tests: JSON values of every type (lone
surrogates, huge and non-finite numbers, long strings), valid documents with one part replaced
by such a value, truncated or corrupted text, and nesting deeper than anything may be.

Each property test feeds these to one parser (or to the engine) and checks that it answers
with its own error naming what and where, never a bare ``KeyError``, ``TypeError`` or
``RecursionError``. The examples are seeded (the hypothesis profile in tests/conftest.py).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

Path = tuple[str | int, ...]

LONE_SURROGATES = st.sampled_from(["\ud800", "\udcff", "a\udfffb"])

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**40, max_value=10**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | LONE_SURROGATES
    | st.just("x" * 40_000)
)
"""Scalars a JSON document might carry, and some it should not (NaN, lone surrogates)."""

JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def nested_text(depth: int, leaf: str = "1") -> str:
    """JSON text of ``depth`` arrays within each other (not built as a value: too deep)."""
    return "[" * depth + leaf + "]" * depth


def nested_value(depth: int) -> Any:
    """A value of ``depth`` lists within each other, built without recursion."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


DEPTHS = st.sampled_from([129, 600, 5_000, 100_000])
"""Nesting past the runtime's bound (128), past Python's stack, and far past it."""


def paths(value: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every path into ``value`` (the empty one included), parents before children."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*prefix, index))


def replaced(value: Any, path: Path, new: Any) -> Any:
    """A copy of ``value`` with the part at ``path`` replaced by ``new``."""
    if not path:
        return new
    result = copy.deepcopy(value)
    parent = result
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = new
    return result


def one_part_replaced(document: Any) -> st.SearchStrategy[tuple[Path, Any]]:
    """``document`` with one part (anything from the whole to one scalar) replaced by a value
    from :data:`JSON_VALUES` or a deeply nested one, with the path replaced."""
    return st.tuples(
        st.sampled_from(list(paths(document))),
        JSON_VALUES | DEPTHS.map(lambda depth: nested_value(min(depth, 600))),
    ).map(lambda found: (found[0], replaced(document, found[0], found[1])))


def corrupted_text(text: str) -> st.SearchStrategy[str | bytes]:
    """``text`` cut short, with characters put in or taken out, or made of bytes that are not
    UTF-8 (as a file or a topic may hold them)."""
    encoded = text.encode()
    cut = st.integers(0, max(len(text) - 1, 0)).map(lambda end: text[:end])
    spliced = st.tuples(
        st.integers(0, len(text)), st.integers(0, 8), st.text(max_size=6) | LONE_SURROGATES
    ).map(lambda s: text[: s[0]] + s[2] + text[s[0] + s[1] :])
    control = st.tuples(st.integers(0, len(text)), st.sampled_from(["\x00", "\x07", "\ufffe"])).map(
        lambda s: text[: s[0]] + s[1] + text[s[0] :]
    )
    not_utf8 = st.tuples(
        st.integers(0, len(encoded)), st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])
    ).map(lambda s: encoded[: s[0]] + s[1] + encoded[s[0] :])
    return cut | spliced | control | not_utf8


def json_text(value: Any) -> str:
    """``value`` as JSON text the way a careless writer would make it (NaN as ``NaN``, lone
    surrogates escaped)."""
    return json.dumps(value)
