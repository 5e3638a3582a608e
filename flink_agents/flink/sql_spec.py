"""A job spec's SQL: the ``tables`` it creates, and a SQL source and sink (docs/yaml.md,
"SQL tables").

    tables:
      - CREATE TABLE reviews (...) WITH ('connector' = 'kafka', ...)
      - CREATE TABLE notes (...) WITH ('connector' = 'kafka', ...)
    source: {kind: sql, query: "SELECT review_id, product, stars, text FROM reviews"}
    sink: {kind: sql, table: notes}

The statements run in order before the job is built; a source reads a table (or a ``SELECT``),
one JSON object per row; a sink writes the last stage's typed answers into a table, one row
each, its columns filled from the answer's fields of the same names.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

_CREATE = re.compile(
    r"\s*CREATE\s+(?:TEMPORARY\s+)?(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?([`\w.]+)",
    re.IGNORECASE,
)


def created_name(statement: str) -> str | None:
    """The table or view a ``CREATE [TEMPORARY] TABLE|VIEW`` statement creates (its last
    dotted part, without backquotes), else None."""
    found = _CREATE.match(statement)
    return None if found is None else found.group(1).split(".")[-1].strip("`")


def _create_statement(statement: str) -> str:
    if created_name(statement) is None:
        raise ValueError(
            "each entry of tables is one CREATE [TEMPORARY] TABLE or VIEW statement, not "
            f"{statement.strip()[:60]!r}"
        )
    return statement


CreateStatement = Annotated[str, AfterValidator(_create_statement)]
"""One statement of a job spec's ``tables``."""


class SqlSourceSpec(BaseModel):
    """Rows of a SQL table (created in ``tables``) or of a ``SELECT`` over them, one JSON
    object per row; a rowtime column's timestamps and watermarks come with them."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["sql"]
    table: str | None = Field(default=None, description="A table or view created in tables.")
    query: str | None = Field(
        default=None, description="A SELECT over the tables (instead of table)."
    )

    @model_validator(mode="after")
    def _one_of_table_and_query(self) -> SqlSourceSpec:
        if (self.table is None) == (self.query is None):
            raise ValueError("a sql source takes table or query (one of them)")
        if self.query is not None and not re.match(r"\s*(SELECT|WITH)\b", self.query, re.I):
            raise ValueError(f"query is a SELECT statement, not {self.query.strip()[:60]!r}")
        return self


class SqlSinkSpec(BaseModel):
    """The answers as rows of a SQL table created in ``tables``: each column takes the answer's
    field of its name (NULL when it has none); the job's ``output_schema`` should say the same.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["sql"]
    table: str = Field(description="A table created in tables.")


def check_sql_tables(tables: list[str], source: object, sink: object, *, typed: bool) -> None:
    """Raise ``ValueError`` naming the field when a job spec's SQL parts do not fit together:
    a table named by the source or sink that ``tables`` does not create, or a SQL sink without
    typed answers."""
    created = [name for name in map(created_name, tables) if name is not None]
    for field, spec in (("source", source), ("sink", sink)):
        name = getattr(spec, "table", None) if getattr(spec, "kind", None) == "sql" else None
        if name is not None and name.split(".")[-1].strip("`") not in created:
            listed = ", ".join(created) or "none"
            raise ValueError(f"{field}.table {name!r} is not created in tables (created: {listed})")
    if isinstance(sink, SqlSinkSpec) and not typed:
        raise ValueError(
            "sink kind sql writes answers as rows: give output_schema (or then), so that the "
            "sink gets answers rather than envelopes"
        )
