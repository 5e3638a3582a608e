"""Input and output stamps, free of any agent framework (the peer driver loads this file too).

The source holds JSON records ``{"k": key, "text": "@T0"}``; a map right after it replaces
``@T0`` with the wall time, so the text the agent sees *is* its input's timestamp. Every answer
repeats that text, and a map chained right after the agent writes ``<t_in> <t_out>``.
"""

from __future__ import annotations

import json
import re
import time

PLACEHOLDER = "@T0"
_STAMP = re.compile(r"\d{10}\.\d{6}")

# Small network buffers: with Flink's 32 KB segments a saturated exchange holds thousands of
# these ~40-byte records, and latency would measure that queue rather than the operator.
SMALL_BUFFERS = {
    "taskmanager.memory.segment-size": "4kb",
    "taskmanager.network.memory.floating-buffers-per-gate": "2",
}


def input_records(count: int, keys: int) -> list[str]:
    """``count`` records spread round-robin over ``keys`` keys, text to be stamped."""
    return [json.dumps({"k": i % keys, "text": PLACEHOLDER}) for i in range(count)]


def stamp_input(text: str) -> str:
    return text.replace(PLACEHOLDER, f"{time.time():.6f}", 1)


def stamp_output(text: str) -> str:
    """``<t_in> <t_out>``; an output without a stamp (an error output) gets ``nan``."""
    found = _STAMP.search(text)
    return f"{found.group(0) if found else 'nan'} {time.time():.6f}"
