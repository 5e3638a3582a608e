"""A job spec's SQL parts on the job being built: its ``tables`` created, a ``kind: sql``
source read and a ``kind: sql`` sink written (the spec's side is flink/sql_spec.py)."""

from __future__ import annotations

import json
from typing import Any

from pyflink.common import Row
from pyflink.common.typeinfo import RowTypeInfo
from pyflink.datastream import DataStream, MapFunction

from flink_agents.flink.environment import AgentInput, AgentsExecutionEnvironment
from flink_agents.flink.sql_spec import SqlSinkSpec, SqlSourceSpec
from flink_agents.flink.tables import table_row_type, to_row


def create_tables(agents: AgentsExecutionEnvironment, statements: list[str]) -> None:
    """Run a spec's ``tables`` statements, in order, in the job's table environment."""
    for statement in statements:
        agents.table_env.execute_sql(statement)


def sql_input(agents: AgentsExecutionEnvironment, source: SqlSourceSpec, key: str) -> AgentInput:
    """The rows of the source's table or query, keyed by field ``key``."""
    t_env = agents.table_env
    table = t_env.sql_query(source.query) if source.query else t_env.from_path(source.table)
    return agents.from_table(table, key)


def sql_sink(agents: AgentsExecutionEnvironment, answers: DataStream, sink: SqlSinkSpec) -> None:
    """Insert ``answers`` (JSON text objects) into the sink's table, a row each."""
    t_env = agents.table_env
    info = table_row_type(t_env.from_path(sink.table), f"sink.table {sink.table!r}")
    rows = answers.map(AnswerRows(info, sink.table), output_type=info).name(f"rows of {sink.table}")
    agents.insert_into(sink.table, t_env.from_data_stream(rows))


class AnswerRows(MapFunction):
    """An answer (JSON text of an object) as a row of the sink table's columns."""

    def __init__(self, info: RowTypeInfo, table: str) -> None:
        self._info = info
        self._table = table

    def map(self, value: str) -> Row:
        answer: Any = json.loads(value)
        if not isinstance(answer, dict):
            raise ValueError(
                f"an answer for table {self._table!r} is a JSON object (one field per "
                f"column), not {value[:80]!r}: give the job an output_schema of type object"
            )
        try:
            return to_row(answer, self._info)
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise ValueError(
                f"answer {value[:80]!r} does not fit table {self._table!r}: {exc}"
            ) from exc
