"""A tiny keyed PyFlink job: counts records per key with keyed ValueState.

Used by the smoke tests both in the local mini-cluster (imported) and on the standalone
cluster (`flink run -py`); with an output path argument it writes `key,count` lines there.
"""

from __future__ import annotations

import sys

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.state import ValueStateDescriptor

RECORDS = [("a", 1), ("b", 1), ("a", 1), ("c", 1), ("a", 1), ("b", 1)]
EXPECTED_FINAL_COUNTS = {"a": 3, "b": 2, "c": 1}


class RunningCount(KeyedProcessFunction):
    """Emits `key,count` after each record; the count lives in keyed state."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        current = (self.count.value() or 0) + value[1]
        self.count.update(current)
        yield f"{value[0]},{current}"


def build(env: StreamExecutionEnvironment):
    """Adds the counting pipeline to `env` and returns its output stream."""
    source = env.from_collection(RECORDS, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
    return source.key_by(lambda r: r[0], key_type=Types.STRING()).process(
        RunningCount(), output_type=Types.STRING()
    )


def main(output_path: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    lines = list(build(env).execute_and_collect())
    with open(output_path, "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
