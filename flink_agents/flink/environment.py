"""`AgentsExecutionEnvironment`: put agents on PyFlink data streams.

    agents = AgentsExecutionEnvironment(env)
    outputs = agents.from_list(records, key="user").apply(agent).to_datastream()
    env.execute("my agents")

Records are JSON text, or Python records (dicts, pydantic models, dataclasses) that become JSON
at the boundary; a key is a field name or a function of the record
(``key=lambda r: r.customer``).

An agent with a declared output type (``apply(agent, output_type=Review)``, or an ``output_type``
attribute on the agent) gives objects of that type from ``to_datastream()``, and its failures
from ``dead_letters()``; ``then(key=...)`` feeds the answers to a next agent (docs/pipelines.md).
Without one, each output is a JSON envelope with the run's agent, key, seq and either
``output`` or ``error`` (see :class:`~flink_agents.runtime.json_records.OutputRecord`), as
``to_envelopes()`` always gives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.common.serialization import SimpleStringSchema
from pyflink.datastream import (
    DataStream,
    KeyedProcessFunction,
    MapFunction,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
from pyflink.java_gateway import get_gateway
from pyflink.table import StreamTableEnvironment, Table

from flink_agents.api.agent import Agent
from flink_agents.durable.store import StoreConfig
from flink_agents.flink.answer_split import DEAD_LETTERS, SplitOutputs
from flink_agents.flink.batches import BatchKey, in_batches
from flink_agents.flink.event_time import output_watermarks
from flink_agents.flink.jars import kafka_connector_jar
from flink_agents.flink.job import PROCESS_MODE_BUNDLE_SIZE, python_settings
from flink_agents.flink.operator import AgentFunction
from flink_agents.flink.pemja_references import releasing
from flink_agents.flink.resume_input import tagger, united_selector
from flink_agents.flink.tables import answers_table, row_type, table_records
from flink_agents.observability import EventLogConfig
from flink_agents.plan.checks import check_for_workers
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.json_records import (
    BadRecord,
    KeySpec,
    bad_input_record,
    encode_input,
    key_selector,
    object_key_selector,
)
from flink_agents.runtime.options import OperatorOptions
from flink_agents.runtime.settings import RuntimeSettings
from flink_agents.runtime.typed_outputs import JsonOutputs, OutputType, PythonOutputType

logger = logging.getLogger(__name__)


class AgentsExecutionEnvironment:
    """Builds agent pipelines on a :class:`StreamExecutionEnvironment`.

    ``store`` makes every model, tool and sub-agent call durable (see docs/durable-execution.md);
    without one, a replay after a failure calls everything again. ``event_log`` keeps a record
    of every run, action, event and call (a JSON-lines file on each worker, a Kafka topic,
    OpenTelemetry spans, listeners by reference; see docs/operations.md). Metrics are
    published to Flink unless ``options.metrics`` is off. ``settings`` gives all of them (and
    the connections' ``max_concurrent_calls``) in one :class:`RuntimeSettings`, as a job spec
    does; it cannot be combined with ``options``, ``store`` or ``event_log``.

    An ``env`` whose ``python.executable`` is not set gets this interpreter for its Python
    workers, as a job spec does (see :func:`~flink_agents.flink.job.python_settings`): the
    venv a job is started with is the one its workers import PyFlink and the agent from.
    """

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        *,
        settings: RuntimeSettings | None = None,
        options: OperatorOptions | None = None,
        store: StoreConfig | None = None,
        event_log: EventLogConfig | None = None,
    ) -> None:
        self.env = env
        _this_python_unless_set(env)
        if settings is None:
            settings = RuntimeSettings(
                operator=options or OperatorOptions(), store=store, event_log=event_log
            )
        elif options is not None or store is not None or event_log is not None:
            raise ValueError(
                "AgentsExecutionEnvironment: give settings, or options/store/event_log, not both"
            )
        if settings.store is not None:
            # Fail here, where the job is built, not on every restart of its workers.
            settings.store.require_secret()
        self.settings = settings
        self._kafka_jar_added = False
        self._uids: set[str] = set()
        self._table_env: StreamTableEnvironment | None = None

    def uid(self, name: str) -> str:
        """A stable operator uid for ``name`` (``name``, or ``name#2``, ``#3``... when this
        environment already gave it out).

        Flink maps a savepoint's state to operators by id; without a uid the id is a hash of the
        job graph's shape, so a release that adds or moves an operator (or chains one
        differently) could not restore a savepoint of the one before. The sources, the agent
        operator and the sinks this class builds are given uids named after what they read,
        run or write; repeats are numbered in the order the pipeline is built (docs/operations.md,
        "Upgrading a running job").
        """
        uid, n = name, 1
        while uid in self._uids:
            n += 1
            uid = f"{name}#{n}"
        self._uids.add(uid)
        return uid

    def from_list(
        self, records: Iterable[Any], key: KeySpec, *, records_per_second: float | None = None
    ) -> AgentInput:
        """A bounded input of records (JSON values, pydantic models, dataclasses), keyed by
        field ``key`` or a function of the record.

        The records are written as JSON lines read like :meth:`from_file`, because a collection
        source starts over after a restore, while a file source resumes where its last
        checkpoint was (the same inputs must get the same ``seq`` on replay). When every record
        is of one pydantic model or dataclass, a key function is given records of that type.
        For local runs: the file is on this machine. A record JSON cannot hold fails here.
        """
        records = list(records)
        folder = Path(tempfile.mkdtemp(prefix="flink-agents-list-"))
        path = folder / "records.jsonl"
        path.write_text("".join(encode_input(record) + "\n" for record in records))
        agent_input = self.from_file(path, key, records_per_second=records_per_second)
        agent_input.record_type = _common_record_type(records)
        return agent_input

    def from_file(
        self, path: str | Path, key: KeySpec, *, records_per_second: float | None = None
    ) -> AgentInput:
        """A JSON-lines file, one record per line; replay resumes at the checkpointed position.

        ``records_per_second`` lets the records arrive over time, like a live stream would: a
        bounded input that arrives at once ends before any checkpoint can record progress.
        """
        source = FileSource.for_record_stream_format(
            StreamFormat.text_line_format(), str(Path(path).resolve())
        ).build()
        stream = self.env.from_source(
            source, WatermarkStrategy.no_watermarks(), f"file:{path}"
        ).uid(self.uid(f"source:file:{path}"))
        if records_per_second:
            stream = stream.map(Paced(records_per_second), output_type=Types.STRING()).name(
                f"paced:{records_per_second}/s"
            )
        return AgentInput(self, stream, key)

    def from_datastream(self, stream: DataStream, key: KeySpec) -> AgentInput:
        """An existing stream: of JSON strings, or of Python records (dicts, pydantic models,
        dataclasses: any other type than ``Types.STRING()``).

        A key function is given each Python record as it is (``key=lambda r: r.customer``); the
        record becomes JSON when the agent's operator takes it. A record JSON cannot hold, or
        whose key cannot be read, is reported as a ``BadRecord`` output and the job goes on.
        """
        return AgentInput(self, stream, key, python_records=stream.get_type() != Types.STRING())

    @property
    def table_env(self) -> StreamTableEnvironment:
        """The table environment on this environment's stream environment (made on first use),
        where SQL tables are created (``agents.table_env.execute_sql("CREATE TABLE ...")``).
        The pinned Kafka connector jar is on its path when it has been fetched."""
        if self._table_env is None:
            # The jar first: the table environment takes the stream environment's jars as it
            # is made.
            with contextlib.suppress(FileNotFoundError):  # other connectors need no Kafka jar
                self._require_kafka_jar()
            self._table_env = StreamTableEnvironment.create(self.env)
        return self._table_env

    def from_table(self, table: Table, key: KeySpec) -> AgentInput:
        """The rows of an insert-only ``table`` of :attr:`table_env` as records (one JSON
        object per row, the columns as fields), keyed by field ``key`` or a function of the
        record; a rowtime column's timestamps and watermarks come with them (docs/pipelines.md,
        "Tables and SQL")."""
        return self.from_datastream(table_records(self.table_env, table), key)

    def insert_into(self, table_name: str, table: Table) -> None:
        """Write ``table`` (an agent's :meth:`AgentInput.to_table`) into the SQL table
        ``table_name`` as part of this job: ``env.execute()`` runs it with the rest."""
        statements = self.table_env.create_statement_set()
        statements.add_insert(table_name, table)
        statements.attach_as_datastream()

    def from_kafka(
        self,
        topic: str,
        *,
        bootstrap_servers: str,
        key: KeySpec,
        group_id: str = "flink-agents",
        starting_offsets: str = "earliest",
        bounded: bool = False,
    ) -> AgentInput:
        """Records (JSON text values) of a Kafka topic. ``bounded`` stops at today's end offsets."""
        from pyflink.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource

        self._require_kafka_jar()
        starting = (
            KafkaOffsetsInitializer.earliest()
            if starting_offsets == "earliest"
            else KafkaOffsetsInitializer.latest()
        )
        builder = (
            KafkaSource.builder()
            .set_bootstrap_servers(bootstrap_servers)
            .set_topics(topic)
            .set_group_id(group_id)
            .set_starting_offsets(starting)
            .set_value_only_deserializer(SimpleStringSchema())
        )
        if bounded:
            builder = builder.set_bounded(KafkaOffsetsInitializer.latest())
        stream = self.env.from_source(
            builder.build(), WatermarkStrategy.no_watermarks(), f"kafka:{topic}"
        ).uid(self.uid(f"source:kafka:{topic}"))
        return AgentInput(self, stream, key)

    def to_kafka(
        self,
        stream: DataStream,
        topic: str,
        *,
        bootstrap_servers: str,
        exactly_once: ExactlyOnce | None = None,
    ) -> None:
        """Write a stream of strings (agent outputs) to a Kafka topic: at least once, or with
        ``exactly_once`` in Kafka transactions committed when a checkpoint completes (a
        ``read_committed`` consumer then sees each output once, a checkpoint interval later).

        Raises ``ValueError`` for ``exactly_once`` when checkpointing is off: nothing would ever
        be committed.
        """
        from pyflink.datastream.connectors.base import DeliveryGuarantee
        from pyflink.datastream.connectors.kafka import (
            KafkaRecordSerializationSchema,
            KafkaSink,
        )

        self._require_kafka_jar()
        builder = (
            KafkaSink.builder()
            .set_bootstrap_servers(bootstrap_servers)
            .set_record_serializer(
                KafkaRecordSerializationSchema.builder()
                .set_topic(topic)
                .set_value_serialization_schema(SimpleStringSchema())
                .build()
            )
        )
        if exactly_once is None:
            builder = builder.set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE)
        else:
            if not self.env.get_checkpoint_config().is_checkpointing_enabled():
                raise ValueError(
                    f"exactly-once output to {topic!r} needs checkpointing: its transactions "
                    "are committed when a checkpoint completes (env.enable_checkpointing(ms))"
                )
            builder = (
                builder.set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .set_transactional_id_prefix(exactly_once.transactional_id_prefix)
                .set_property("transaction.timeout.ms", str(exactly_once.transaction_timeout_ms))
            )
        stream.sink_to(builder.build()).name(f"kafka:{topic}").uid(self.uid(f"sink:kafka:{topic}"))

    def _require_kafka_jar(self) -> None:
        if not self._kafka_jar_added:
            self.env.add_jars(kafka_connector_jar().as_uri())
            self._kafka_jar_added = True


@dataclass(frozen=True)
class ExactlyOnce:
    """Settings of an exactly-once Kafka sink.

    ``transactional_id_prefix`` must stay the same across restarts of a job (so a restore aborts
    the transactions its killed writers left open) and differ between jobs on one cluster.
    ``transaction_timeout_ms`` must exceed the checkpoint interval and stay within the broker's
    ``transaction.max.timeout.ms`` (15 min by default).
    """

    transactional_id_prefix: str
    transaction_timeout_ms: int = 600_000


class Paced(MapFunction):
    """Lets records through at a fixed rate (sleeping between them)."""

    def __init__(self, per_second: float) -> None:
        self._interval = 1.0 / per_second

    def open(self, runtime_context: Any) -> None:
        self._next = time.monotonic()

    def map(self, value: str) -> str:
        delay = self._next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self._next = max(self._next, time.monotonic()) + self._interval
        return value


def _this_python_unless_set(env: StreamExecutionEnvironment) -> None:
    """Give ``env`` the Python settings of a job spec when it names no Python of its own.

    Without ``python.executable`` the workers run whatever ``python`` is on ``PATH`` and fail
    with "No module named 'pyflink'". A ``python.executable`` the user (or ``flink run
    -pyexec``, or the cluster's configuration) set is left as it is, with whatever goes with it.
    """
    util = get_gateway().jvm.org.apache.flink.python.util.PythonConfigUtil
    config = util.getEnvironmentConfig(env._j_stream_execution_environment)
    if config.containsKey("python.executable"):
        return
    for name, value in python_settings().items():
        if not config.containsKey(name):
            config.setString(name, value)


_BEAM_FILESYSTEMS = logging.getLogger("apache_beam.io.filesystems")


def _not_the_gcs_import_warning(record: logging.LogRecord) -> bool:
    """False for Beam's "Failed to import GCSFileSystem; loading of this filesystem will be
    skipped" warning, printed on stderr by every job built without google-cloud-storage (Beam's
    Google Cloud filesystem, which no agent job uses); true for every other record."""
    return not str(record.msg).startswith("Failed to import GCSFileSystem;")


# PyFlink imports Beam when the first StreamExecutionEnvironment is made: the filter is in place
# once this module is imported (`from flink_agents import AgentsExecutionEnvironment` does).
_BEAM_FILESYSTEMS.addFilter(_not_the_gcs_import_warning)


def _timer_safe_bundles(env: StreamExecutionEnvironment) -> None:
    """Process mode: one element per Python bundle, or a restore can lose inputs.

    The operator finds a key again only through its timers, and PyFlink's process mode registers
    the timers of the bundle a checkpoint flushes after that checkpoint's snapshot (see
    :data:`~flink_agents.flink.job.PROCESS_MODE_BUNDLE_SIZE`). Thread mode is not affected.
    """
    options = get_gateway().jvm.org.apache.flink.python.PythonOptions
    config = env._j_stream_execution_environment.getConfiguration()
    if str(config.get(options.PYTHON_EXECUTION_MODE)) != "process":
        return
    if str(config.get(options.MAX_BUNDLE_SIZE)) == PROCESS_MODE_BUNDLE_SIZE:
        return
    logger.warning(
        "process mode: python.fn-execution.bundle.size set to %s (was %s) so that checkpoints "
        "keep the agent operator's timers; a bundle per element holds the operator to about a "
        "fifth of thread mode's runs/s (docs/flink-runtime.md, 'Process mode')",
        PROCESS_MODE_BUNDLE_SIZE,
        config.get(options.MAX_BUNDLE_SIZE),
    )
    setting = Configuration()
    setting.set_string("python.fn-execution.bundle.size", PROCESS_MODE_BUNDLE_SIZE)
    env.configure(setting)


def _common_record_type(records: list[Any]) -> type | None:
    """The pydantic model or dataclass every record is an instance of, if they share one."""
    types = {type(record) for record in records}
    if len(types) != 1:
        return None
    (kind,) = types
    return kind if issubclass(kind, BaseModel) or dataclasses.is_dataclass(kind) else None


class PythonRecordsFunction(AgentFunction):
    """The agent operator over a stream of Python records: each becomes JSON text first."""

    def __init__(self, plan: AgentPlan, settings: RuntimeSettings, *, event_time: bool) -> None:
        super().__init__(plan.to_json(), settings, event_time=event_time)
        self._plan_name = plan.name

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterable[str]:
        try:
            text = encode_input(value)
        except BadRecord as exc:
            return [bad_input_record(self._plan_name, None, str(exc)).to_json()]
        return super().process_element(text, ctx)


@dataclass
class AgentInput:
    """A keyed input waiting for an agent; :meth:`apply` one.

    ``python_records``: the stream holds Python records rather than JSON text.
    ``record_type``: the model or dataclass the JSON records were written from (a key function
    is given records of that type).
    """

    agents: AgentsExecutionEnvironment
    stream: DataStream
    key: KeySpec
    python_records: bool = False
    record_type: type | None = None
    _outputs: DataStream | None = field(default=None, init=False)
    _answers: DataStream | None = field(default=None, init=False)
    _typed: bool = field(default=False, init=False)
    _output_check: OutputType = field(default_factory=JsonOutputs, init=False)
    _plan_name: str = field(default="", init=False)
    _decisions: AgentInput | None = field(default=None, init=False)
    _event_time: bool = field(default=False, init=False)

    def with_decisions(self, decisions: AgentInput) -> AgentInput:
        """Decision and event records for the runs' waits (docs/waits.md): a second input of
        JSON text (:meth:`AgentsExecutionEnvironment.from_kafka`, ``from_list``...), keyed by
        its own key spec to the same key values as the inputs. Call before :meth:`apply`."""
        if self.python_records or decisions.python_records:
            raise TypeError("decisions go with inputs of JSON text (from_kafka, from_file, ...)")
        self._decisions = decisions
        return self

    def apply(
        self,
        agent: Agent | AgentPlan,
        *,
        output_type: Any = None,
        output_check: OutputType | None = None,
        event_time_lag_ms: int | None = None,
    ) -> AgentInput:
        """Run ``agent`` (or a compiled plan) for every record, one run per key at a time.

        ``output_type`` (else the agent's ``output_type`` attribute, if it has one): a pydantic
        model, dataclass or other type its outputs are validated into; :meth:`to_datastream`
        then gives objects of it, and failed runs, unusable inputs and outputs that do not fit
        go to :meth:`dead_letters`. ``output_check`` is the same for any
        :class:`~flink_agents.runtime.typed_outputs.OutputType` (a job spec's JSON Schema).

        ``event_time_lag_ms``: outputs get their input's timestamp, and watermarks trail the
        largest output timestamp by this much (docs/pipelines.md, "Event time"); None: outputs
        carry no event time and only a bounded input's final watermark passes.
        """
        watermarks = output_watermarks(event_time_lag_ms)
        event_time = event_time_lag_ms is not None
        if output_type is None:
            output_type = getattr(agent, "output_type", None)
        if output_check is None and output_type is not None:
            output_check = PythonOutputType(output_type)
        self._typed = output_check is not None
        plan = check_for_workers(agent if isinstance(agent, AgentPlan) else compile_agent(agent))
        _timer_safe_bundles(self.agents.env)
        settings = self.agents.settings
        if self.python_records:
            function: AgentFunction = PythonRecordsFunction(plan, settings, event_time=event_time)
            selector: Callable[[Any], str] = object_key_selector(self.key)
        else:
            function = AgentFunction(plan.to_json(), settings, event_time=event_time)
            selector = key_selector(self.key, self.record_type)
        stream = self.stream
        if self._decisions is not None:  # united before the one key_by: one owner per key
            decisions = self._decisions
            tag = tagger(key_selector(decisions.key, decisions.record_type))
            stream = stream.union(decisions.stream.map(releasing(tag), output_type=Types.STRING()))
            selector = united_selector(selector)
        keyed = stream.key_by(releasing(selector), key_type=Types.STRING())
        outputs = (
            keyed.process(function, output_type=Types.STRING())
            .name(f"agent:{plan.name}")
            .uid(self.agents.uid(f"agent:{plan.name}"))
        )
        # Before any sink: see OutputTimestamps and flink/event_time.py.
        self._outputs = outputs.assign_timestamps_and_watermarks(watermarks)
        self._output_check = output_check or JsonOutputs()
        self._plan_name = plan.name
        self._event_time = event_time
        return self

    def to_table(self) -> Table:
        """The answers as a table of :attr:`AgentsExecutionEnvironment.table_env`: a column per
        field of the declared output type (a pydantic model or dataclass; the types a column
        can have are in :mod:`flink_agents.flink.tables`), plus a watermarked ``rowtime``
        column under ``event_time_lag_ms``. Failures stay on :meth:`dead_letters`."""
        check = self._output_check
        if not isinstance(check, PythonOutputType):
            raise TypeError(
                "to_table() needs the agent's output type: apply(agent, output_type=Model), a "
                "pydantic model or dataclass whose fields become the table's columns"
            )
        info = row_type(check.output_type)
        return answers_table(
            self.agents.table_env, self._require_answers(), info, event_time=self._event_time
        )

    def to_datastream(self) -> DataStream:
        """The outputs: objects of the declared output type, failures left out (they are
        :meth:`dead_letters`); without a declared type, the JSON envelopes (:meth:`to_envelopes`).
        """
        return self._require_answers() if self._typed else self.to_envelopes()

    def answers(self) -> DataStream:
        """The successful outputs: objects of the declared output type, else their JSON values
        (dicts, lists, strings...); failures are :meth:`dead_letters`."""
        return self._require_answers()

    def dead_letters(self) -> DataStream:
        """One JSON string per failure: a run that failed (error policy ``emit``), an input that
        could not be run, an output that does not fit the output type (see
        :class:`~flink_agents.runtime.typed_outputs.DeadLetter`)."""
        return self._require_answers().get_side_output(DEAD_LETTERS)

    def to_envelopes(self) -> DataStream:
        """Every output as a JSON envelope (agent, key, seq, ``output`` or ``error``), errors
        included: what ``to_datastream`` gave before output types."""
        if self._outputs is None:
            raise RuntimeError("apply(agent) before to_datastream()")
        return self._outputs

    def then(self, key: KeySpec, *, every: int | None = None) -> AgentInput:
        """The answers as the input of a next agent, keyed by ``key`` (a field, or a function
        of the answer: ``key=lambda review: review.product``).

        ``every``: the next agent gets a list of that many answers of one key (of the declared
        output type) per run instead of one answer; a bounded input's end hands on each key's
        last, shorter list (docs/pipelines.md, "Stages that aggregate")."""
        if every is None:
            return self.agents.from_datastream(self.answers(), key)
        uid = self.agents.uid(f"batches:{self._plan_name}")
        batches = in_batches(self.answers(), key, every, self._output_check, uid)
        return self.agents.from_datastream(batches, BatchKey(key))

    def _require_answers(self) -> DataStream:
        # Made on first use: a job reading only the envelopes gets no extra operator.
        if self._answers is None:
            self._answers = (
                self.to_envelopes()
                .process(SplitOutputs(self._output_check), output_type=Types.PICKLED_BYTE_ARRAY())
                .name(f"answers:{self._plan_name}")
                .uid(self.agents.uid(f"answers:{self._plan_name}"))
            )
            # PyFlink routes a (tag, value) pair to a side output only once the tag is asked
            # for: without this, a job not reading the dead letters got them as answers.
            self._answers.get_side_output(DEAD_LETTERS)
        return self._answers

    def to_kafka(
        self, topic: str, *, bootstrap_servers: str, exactly_once: ExactlyOnce | None = None
    ) -> None:
        """Write the outputs to a Kafka topic (see :meth:`AgentsExecutionEnvironment.to_kafka`):
        typed answers as their JSON text, else the envelopes."""
        outputs = self.to_datastream()
        if self._typed:
            outputs = as_json_text(outputs)
        self.agents.to_kafka(
            outputs,
            topic,
            bootstrap_servers=bootstrap_servers,
            exactly_once=exactly_once,
        )


def as_json_text(stream: DataStream) -> DataStream:
    """A stream of Python records (typed answers) as canonical JSON text, for a sink of strings."""
    return stream.map(encode_input, output_type=Types.STRING()).name("as JSON")
