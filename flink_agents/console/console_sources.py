"""Where the console reads and writes: the event log, the store topic, Flink's REST API, the
job's outputs (its ``waiting`` records) and decisions input -- given one by one, or taken from a
job spec.

Every read goes through the reader the command line uses for the same thing (``trace``'s
:func:`~flink_agents.observability.parse_record` / ``read_topic``, ``store inspect``'s
:func:`~flink_agents.durable.store.inspect.open_store`, ``waits``'
:func:`~flink_agents.cli.wait_records_io.open_waits` and its topic reader); this module only
keeps the last answer so that a page does not read a whole log again when nothing was added.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flink_agents.observability import KafkaEventLogConfig, LogRecord, parse_record

if TYPE_CHECKING:
    from flink_agents.flink.job import JobSpec
    from flink_agents.plan import AgentPlan

TOPIC_REFRESH_S = 2.0
"""A topic is read again from its start at most this often (a page load in between reuses the
last read)."""
_SUBTASK = "{subtask}"


@dataclass(frozen=True)
class ConsoleSources:
    """What the console shows and where a decision goes; a missing one leaves its page saying
    which option gives it."""

    event_log: str | None = None
    """An event log file (``{subtask}`` in it: every subtask's file)."""
    event_log_topic: str | None = None
    store_topic: str | None = None
    bootstrap_servers: str = "127.0.0.1:9092"
    secret_env: str = "FLINK_AGENTS_STORE_SECRET"
    flink_rest: str | None = None
    outputs: str | None = None
    """The job's outputs: a JSON lines file, or a file sink's folder of part files."""
    outputs_topic: str | None = None
    decisions_topic: str | None = None
    decisions_file: str | None = None
    key_field: str | None = None
    """The job's key field: a decision record names its run's key under it."""
    agent: str | None = None
    """The agent (plan, YAML file or ``module:attr``): its tools' schemas check an edit."""
    agent_name: str | None = None

    @classmethod
    def from_job(
        cls, spec: JobSpec, default_servers: str = "127.0.0.1:9092", **given: Any
    ) -> ConsoleSources:
        """The sources a job spec names (its event log, Kafka store, sink and decisions
        input); ``given`` (options not None) override them; ``default_servers``: the Kafka brokers
        when the spec's store names none."""
        from flink_agents.flink.job import FileSinkSpec, KafkaSinkSpec, KafkaSourceSpec

        found: dict[str, Any] = {"key_field": spec.key, "agent_name": spec.agent_name}
        found["bootstrap_servers"] = default_servers
        found["agent"] = spec.agent if ":" in spec.agent else str(spec.resolve(spec.agent))
        log = spec.event_log_config()
        if log is not None:
            found["event_log"] = log.path
            if log.kafka is not None:
                found["event_log_topic"] = log.kafka.topic
        store = spec.store
        if store is not None and store.kind == "kafka":
            found["store_topic"] = store.topic
            found["secret_env"] = store.secret_env
            servers = store.bootstrap_servers
            if servers:
                found["bootstrap_servers"] = (
                    servers if isinstance(servers, str) else ",".join(servers)
                )
        if isinstance(spec.sink, FileSinkSpec):
            found["outputs"] = str(spec.resolve(spec.sink.path))
        elif isinstance(spec.sink, KafkaSinkSpec):
            found["outputs_topic"] = spec.sink.topic
        decisions = spec.decisions
        if isinstance(decisions, KafkaSourceSpec):
            found["decisions_topic"] = decisions.topic
        elif decisions is not None:
            found["decisions_file"] = str(spec.resolve(decisions.path))
        found.update({name: value for name, value in given.items() if value is not None})
        return cls(**found)

    def plan(self) -> AgentPlan | None:
        """The agent's plan, when the console was told the agent."""
        if self.agent is None:
            return None
        from flink_agents.plan.sources import load_plan

        return load_plan(self.agent, self.agent_name)


@dataclass
class _FileTail:
    offset: int = 0
    records: list[LogRecord] = field(default_factory=list)


class RecordFeed:
    """The event log's records, kept between page loads.

    A file is append-only: only what was added since the last load is parsed (by the parser of
    ``flink-agents trace``). A topic is read again from its start, at most every
    :data:`TOPIC_REFRESH_S`. :meth:`records` grows by appending; when it cannot (a file was
    replaced, the topic changed) it is built again and :attr:`generation` grows.
    """

    def __init__(self, sources: ConsoleSources) -> None:
        self._sources = sources
        self._lock = threading.Lock()
        self._files: dict[Path, _FileTail] = {}
        self._topic: list[LogRecord] = []
        self._topic_read_at = -TOPIC_REFRESH_S
        self._all: list[LogRecord] = []
        self.generation = 0
        """Grows whenever the records were built again rather than appended to."""

    @property
    def configured(self) -> bool:
        return self._sources.event_log is not None or self._sources.event_log_topic is not None

    def records(self) -> list[LogRecord]:
        """Every record read so far: the files' (each in order; the records of one run are
        in one file), then the topic's. Read again, the list only grows, unless
        :attr:`generation` grew."""
        with self._lock:
            rebuild = False
            for path in self._paths():
                rebuild |= self._read_file(path)
            if self._sources.event_log_topic is not None:
                rebuild |= self._read_topic()
            if rebuild:
                self._all = [r for tail in self._files.values() for r in tail.records]
                self._all.extend(self._topic)
                self.generation += 1
            return self._all

    def _paths(self) -> list[Path]:
        pattern = self._sources.event_log
        if pattern is None:
            return []
        if _SUBTASK not in pattern:
            return [Path(pattern)]
        path = Path(pattern)
        return sorted(path.parent.glob(path.name.replace(_SUBTASK, "*")))

    def _read_file(self, path: Path) -> bool:
        """Parse what was appended to ``path``; whether the records must be built again."""
        tail = self._files.setdefault(path, _FileTail())
        size = path.stat().st_size if path.exists() else 0
        replaced = size < tail.offset
        if replaced:  # the file was replaced: read it again
            tail.offset, tail.records = 0, []
        if size > tail.offset:
            with path.open("rb") as log:
                log.seek(tail.offset)
                added = log.read(size - tail.offset)
            complete = added[: added.rfind(b"\n") + 1]  # a line being written waits
            if complete:
                parsed = list(_parsed(complete, path))
                tail.records.extend(parsed)
                tail.offset += len(complete)
                if not replaced:
                    self._all.extend(parsed)
        return replaced

    def _read_topic(self) -> bool:
        """Read the topic again if it is time; whether its records changed."""
        now = time.monotonic()
        if now - self._topic_read_at < TOPIC_REFRESH_S:
            return False
        from flink_agents.observability.sinks.kafka_log import read_topic

        topic = self._sources.event_log_topic
        assert topic is not None
        config = KafkaEventLogConfig(topic=topic, bootstrap_servers=self._sources.bootstrap_servers)
        records = list(read_topic(config))
        self._topic_read_at = now
        if len(records) == len(self._topic):
            return False
        self._topic = records
        return True


def _parsed(lines: bytes, path: Path) -> Iterator[LogRecord]:
    """The records of whole lines of an event log file, parsed as ``trace`` parses them."""
    for line in lines.splitlines():
        if line.strip():
            yield parse_record(line, str(path))


def output_lines(sources: ConsoleSources) -> Iterator[str]:
    """The job's output records as JSON lines: of a file, of a file sink's folder (its part
    files in name order), or of the output topic (``waits list``'s reader)."""
    if sources.outputs_topic is not None:
        from flink_agents.cli.json_topic import read

        yield from read(sources.bootstrap_servers, sources.outputs_topic)
        return
    if sources.outputs is None:
        return
    place = Path(sources.outputs)
    files = sorted(p for p in place.rglob("*") if p.is_file()) if place.is_dir() else [place]
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as lines:
            yield from lines
