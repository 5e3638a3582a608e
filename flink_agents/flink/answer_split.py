"""The agent operator's envelopes split into typed answers and a dead-letter side output.

:class:`SplitOutputs` follows the agent operator: each envelope's answer goes on (a Python object
of the declared type, or its JSON text for a job spec's sinks), each failure goes to the
:data:`DEAD_LETTERS` side output as a :class:`~flink_agents.runtime.typed_outputs.DeadLetter`
in JSON text. See docs/pipelines.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyflink.common import Types
from pyflink.datastream import OutputTag, ProcessFunction

from flink_agents.runtime.typed_outputs import OutputType, split_envelope

DEAD_LETTERS = OutputTag("flink-agents-dead-letters", Types.STRING())
"""The side output of dead letters (JSON text), one per failed run or unusable input."""


class SplitOutputs(ProcessFunction):
    """Answers of ``output_type`` on the main output, failures on :data:`DEAD_LETTERS`."""

    def __init__(self, output_type: OutputType) -> None:
        self._output_type = output_type

    def process_element(self, value: str, ctx: ProcessFunction.Context) -> Iterator[Any]:
        answer, dead_letter = split_envelope(value, self._output_type)
        if dead_letter is not None:
            yield DEAD_LETTERS, dead_letter.to_json()
        else:
            yield answer
