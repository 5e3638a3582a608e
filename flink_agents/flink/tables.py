"""Flink Tables in and out of agents (docs/pipelines.md, "Tables and SQL").

A table's rows become JSON records for the agent (:func:`table_records`); an agent's answers
become rows of a table whose columns are the fields of its output type (:func:`row_type`,
:func:`answers_table`), or of a SQL table's declared columns (:func:`table_row_type`, for a
job spec's ``sink: {kind: sql}``).

Column types, from a field's annotation or a SQL column's type:

====================================  ======================  ===========================
Python                                Flink SQL               in the agent's JSON input
====================================  ======================  ===========================
``str``, ``Literal`` of strings       ``STRING``/``VARCHAR``  string
``int``, ``Literal`` of ints          ``BIGINT`` (``INT``,    number
                                      ``SMALLINT``,
                                      ``TINYINT`` read)
``float``                             ``DOUBLE`` (``FLOAT``)  number
``bool``                              ``BOOLEAN``             true/false
``decimal.Decimal``                   ``DECIMAL(38, 18)``     string (exact)
``datetime.datetime``                 ``TIMESTAMP(3)``        ISO 8601 string
``datetime.date``                     ``DATE``                ISO 8601 string
``list[X]``                           ``ARRAY<X>``            array
a pydantic model or dataclass         ``ROW<...>``            object
``X | None``                          ``X`` (nullable)
====================================  ======================  ===========================

Any other type (``dict``, ``Any``, unions of two types, sets, ``bytes``...) has no column type:
:func:`row_type` raises ``TypeError`` naming the field, its type and this list.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python
from pyflink.common import Row, Types
from pyflink.common.typeinfo import ObjectArrayTypeInfo, RowTypeInfo, TypeInformation
from pyflink.datastream import DataStream
from pyflink.table import DataTypes, Schema, StreamTableEnvironment, Table
from pyflink.table.types import (
    ArrayType,
    BigIntType,
    BooleanType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    RowType,
    SmallIntType,
    TimestampType,
    TinyIntType,
    VarCharType,
)

SUPPORTED_TYPES = (
    "str, int, float, bool, Decimal, datetime, date, Literal of str or int, list[...] of these, "
    "a nested pydantic model or dataclass, and X | None of any of them"
)
"""What :func:`row_type` maps to a column type, as its errors say."""

ROWTIME = "rowtime"
"""The column of an event-time table holding each row's timestamp (a watermarked
``TIMESTAMP_LTZ(3)``, see :func:`answers_table`)."""


def row_type(output_type: Any) -> RowTypeInfo:
    """The row type of a table of ``output_type`` answers: one column per field, in order.

    Raises ``TypeError`` for a type that is not a pydantic model or dataclass, or a field whose
    type has no column type (naming the field and what is supported).
    """
    fields = _fields(output_type)
    if fields is None:
        raise TypeError(
            f"a table's rows come from an output type with fields (a pydantic model or a "
            f"dataclass), not {_name(output_type)}"
        )
    name = _name(output_type)
    return Types.ROW_NAMED(
        list(fields), [_column(hint, f"{name}.{field}") for field, hint in fields.items()]
    )


def _fields(output_type: Any) -> dict[str, Any] | None:
    if isinstance(output_type, type) and issubclass(output_type, BaseModel):
        return {name: info.annotation for name, info in output_type.model_fields.items()}
    if isinstance(output_type, type) and dataclasses.is_dataclass(output_type):
        hints = typing.get_type_hints(output_type)
        return {field.name: hints[field.name] for field in dataclasses.fields(output_type)}
    return None


_SIMPLE: dict[Any, Callable[[], TypeInformation]] = {
    str: Types.STRING,
    int: Types.LONG,
    float: Types.DOUBLE,
    bool: Types.BOOLEAN,
    decimal.Decimal: Types.BIG_DEC,
    datetime.datetime: Types.SQL_TIMESTAMP,
    datetime.date: Types.SQL_DATE,
}


def _column(hint: Any, where: str) -> TypeInformation:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        present = [arg for arg in args if arg is not type(None)]
        if len(present) == 1:
            return _column(present[0], where)
    elif origin is typing.Literal:
        kinds = {type(arg) for arg in args}
        if kinds in ({str}, {int}):
            return _SIMPLE[kinds.pop()]()
    elif origin is list and len(args) == 1:
        return Types.OBJECT_ARRAY(_column(args[0], f"{where}[]"))
    elif hint in _SIMPLE:
        return _SIMPLE[hint]()
    elif _fields(hint) is not None:
        fields = _fields(hint) or {}
        return Types.ROW_NAMED(
            list(fields), [_column(sub, f"{where}.{field}") for field, sub in fields.items()]
        )
    raise TypeError(
        f"field {where}: {_name(hint)} has no Flink column type (supported: {SUPPORTED_TYPES})"
    )


def _name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)


def table_row_type(table: Table, where: str) -> RowTypeInfo:
    """The row type of ``table``'s columns (a SQL sink's), for rows made from JSON answers.

    Raises ``TypeError`` naming ``where`` and the column for a column type with no place here
    (``MAP``, ``MULTISET``, ``BYTES``, ``TIME``...).
    """
    names, kinds = _columns(table)
    return Types.ROW_NAMED(
        names,
        [
            _sql_column(kind, f"{where} column {name}")
            for name, kind in zip(names, kinds, strict=True)
        ],
    )


def _columns(table: Table) -> tuple[list[str], list[DataType]]:
    """``table``'s column names and types: from its resolved schema (Flink 2), or from the
    ``TableSchema`` Flink 1.20's Python API offers instead."""
    # getattr: a Table answers an unknown attribute with an AttributeError naming its columns.
    resolved = getattr(table, "get_resolved_schema", None)
    if resolved is not None:
        schema = resolved()
        return list(schema.get_column_names()), list(schema.get_column_data_types())
    legacy = table.get_schema()
    return list(legacy.get_field_names()), list(legacy.get_field_data_types())


def _sql_column(kind: DataType, where: str) -> TypeInformation:
    simple: list[tuple[type[DataType], Callable[[], TypeInformation]]] = [
        (VarCharType, Types.STRING),
        (CharType, Types.STRING),
        (BigIntType, Types.LONG),
        (IntType, Types.INT),
        (SmallIntType, Types.SHORT),
        (TinyIntType, Types.BYTE),
        (DoubleType, Types.DOUBLE),
        (FloatType, Types.FLOAT),
        (BooleanType, Types.BOOLEAN),
        (DecimalType, Types.BIG_DEC),
        (TimestampType, Types.SQL_TIMESTAMP),
        (DateType, Types.SQL_DATE),
    ]
    for data_type, info in simple:
        if isinstance(kind, data_type):
            return info()
    if isinstance(kind, ArrayType):
        return Types.OBJECT_ARRAY(_sql_column(kind.element_type, f"{where}[]"))
    if isinstance(kind, RowType):
        return Types.ROW_NAMED(
            kind.field_names(),
            [_sql_column(field.data_type, f"{where}.{field.name}") for field in kind.fields],
        )
    raise TypeError(f"{where}: {kind} is not supported (use {SUPPORTED_TYPES})")


def to_row(value: Any, info: RowTypeInfo) -> Row:
    """``value`` (an answer: a model, dataclass or JSON object) as a row of ``info``; a field it
    lacks is NULL."""
    return _convert(_plain(value), info)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return TypeAdapter(type(value)).dump_python(value, mode="python")
    return value


def _convert(value: Any, info: TypeInformation) -> Any:
    if value is None:
        return None
    if isinstance(info, RowTypeInfo):
        names, kinds = info.get_field_names(), info.get_field_types()
        fields = _plain(value)
        row = Row(
            *[_convert(fields.get(name), kind) for name, kind in zip(names, kinds, strict=True)]
        )
        row.set_field_names(names)
        return row
    if isinstance(info, ObjectArrayTypeInfo):
        return [_convert(item, info._element_type) for item in value]
    if info == Types.SQL_TIMESTAMP() and isinstance(value, str):
        return datetime.datetime.fromisoformat(value)
    if info == Types.SQL_DATE() and isinstance(value, str):
        return datetime.date.fromisoformat(value)
    if info == Types.BIG_DEC():
        return decimal.Decimal(str(value))
    if info in (Types.DOUBLE(), Types.FLOAT()):
        return float(value)
    return value


def answers_table(
    t_env: StreamTableEnvironment, answers: DataStream, info: RowTypeInfo, *, event_time: bool
) -> Table:
    """A table of ``answers`` (rows of ``info``); with ``event_time`` a :data:`ROWTIME` column
    holds each answer's timestamp, watermarked by the stream's watermarks."""
    rows = answers.map(lambda answer: to_row(answer, info), output_type=info).name("as rows")
    if not event_time:
        return t_env.from_data_stream(rows)
    if ROWTIME in info.get_field_names():
        raise TypeError(f"an event-time table adds a {ROWTIME!r} column: rename that field")
    schema = (
        Schema.new_builder()
        .column_by_metadata(ROWTIME, DataTypes.TIMESTAMP_LTZ(3))
        .watermark(ROWTIME, "SOURCE_WATERMARK()")
        .build()
    )
    return t_env.from_data_stream(rows, schema)


def table_records(t_env: StreamTableEnvironment, table: Table) -> DataStream:
    """``table``'s rows as JSON-generic records (dicts), one per row with the columns as
    fields (a timestamp or date as its ISO 8601 text, a decimal as its exact text).

    A rowtime column's timestamps and the table's watermarks go with the records. Only
    insert-only tables convert (an updating one, such as a grouped aggregate, is refused by
    Flink).
    """
    return (
        t_env.to_data_stream(table)
        .map(_row_record, output_type=Types.PICKLED_BYTE_ARRAY())
        .name("rows as records")
    )


def _row_record(row: Row) -> Any:
    return to_jsonable_python(row.as_dict(recursive=True))
