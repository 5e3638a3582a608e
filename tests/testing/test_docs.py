"""docs/testing.md: every Python block runs, in order, in one namespace."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_every_code_block_of_the_testing_doc_runs() -> None:
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 3
    # A real module, so functions defined in the doc have a module and qualname to label them.
    module = types.ModuleType("testing_doc_examples")
    sys.modules[module.__name__] = module
    try:
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
