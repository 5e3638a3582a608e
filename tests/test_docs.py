"""The documentation's Python blocks import only names that exist (a reader copies them first)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _imports(page: Path) -> list[tuple[str, int]]:
    """The import statements of our packages in ``page``'s Python blocks, with their line."""
    found: list[tuple[str, int]] = []
    text = page.read_text()
    for match in re.finditer(r"```python\n(.*?)```", text, flags=re.DOTALL):
        start = text.count("\n", 0, match.start(1)) + 1
        for node in ast.walk(ast.parse(match.group(1))):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [alias.name for alias in node.names]
                if any(name.split(".")[0] in ("flink_agents", "examples") for name in names):
                    found.append((ast.unparse(node), start + node.lineno - 1))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_import_of_the_docs_works(page: Path) -> None:
    for statement, line in _imports(page):
        try:
            exec(statement, {})
        except ImportError as exc:
            pytest.fail(f"{page.name}:{line}: {statement}: {exc}")


_PRIVATE_PATH = re.compile(r"\bflink_agents(?:\.\w+)*\._\w+")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_page_tells_a_reader_to_use_a_private_module(page: Path) -> None:
    # A dotted path is what a reader imports; a private module may move without notice.
    found = [match.group(0) for match in _PRIVATE_PATH.finditer(page.read_text())]
    assert not found, f"{page.name} names private modules: {found}"
