"""The console's web app (Starlette): server-rendered pages, no script; the one thing it
changes -- a decision for a waiting run -- needs the console's token."""

from __future__ import annotations

import contextlib
import hmac
import json
import math
import threading
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from flink_agents.cli.json_topic import TopicError
from flink_agents.cli.trace_tree import ExecutionGroups, RunExecution
from flink_agents.cli.wait_records_io import key_value, open_waits
from flink_agents.console.console_sources import ConsoleSources, RecordFeed, output_lines
from flink_agents.console.decisions import VERDICTS, DecisionRefused, ToolSchemas, parse_arguments
from flink_agents.console.decisions import write_decision as _write
from flink_agents.console.health import flink_jobs, rate_series, svg_chart
from flink_agents.console.runs import STATES, RunRow, interrupted, run_row, select
from flink_agents.durable.identity import canonical_json
from flink_agents.observability import PayloadWriter

PAGE_ROWS = 200
"""Runs shown per page of the Runs page (10,000 rows would be a page no one reads)."""
_SHOWN_CHARS = 4000
_TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


class Console:
    """The pages over one set of sources; ``token`` (none: deciding is off) guards decisions.

    The pages read files, topics and the REST API: they are plain functions, which Starlette
    runs on its thread pool, so one slow read does not hold up the other pages."""

    def __init__(self, sources: ConsoleSources, token: str | None = None) -> None:
        self.sources = sources
        self._token = token or None
        self.feed = RecordFeed(sources)
        self._schemas = ToolSchemas(sources.plan())
        # Payloads are the event log's (already cut and scrubbed) or the store's and outputs':
        # shown through the same writer, so no secret-named field and no resolved secret shows.
        self._shown = PayloadWriter(_SHOWN_CHARS)
        self._groups = ExecutionGroups()
        self._grouped_at = (-1, 0)  # the feed's generation and records grouped
        self._row_of: dict[tuple[str, str, int], RunRow] = {}
        self._rows: list[RunRow] = []
        self._lock = threading.Lock()

    def _group(self) -> tuple[list[RunExecution], list[RunRow]]:
        """The event log's run executions and rows, most recently started first: the records
        added since the last load are grouped and their runs' rows made again (all of them
        only if the feed was built again)."""
        records = self.feed.records()
        with self._lock:
            generation, grouped = self._grouped_at
            if generation != self.feed.generation:
                self._groups, self._row_of, grouped = ExecutionGroups(), {}, 0
            added = records[grouped:]  # the feed may append meanwhile: group what was taken
            if added or generation != self.feed.generation:
                runs = self._groups.runs
                for run in self._groups.add(added):
                    if run in runs:  # not a run_admitted alone
                        self._row_of[run] = run_row(runs[run])
                self._rows = sorted(self._row_of.values(), key=_started, reverse=True)
                self._grouped_at = (self.feed.generation, grouped + len(added))
            return self._groups.found, self._rows

    def warm(self) -> None:
        """Read and group the event log now (at start, on a thread of its own), so that the
        first page does not wait for a long log to be parsed. A log that cannot be read is
        reported by the page that reads it."""
        if self.feed.configured:
            with contextlib.suppress(OSError, ValueError):
                self._group()

    def rows(self) -> list[RunRow]:
        """Every run of the event log, most recently started first."""
        return self._group()[1]

    def json_text(self, value: Any) -> str:
        """``value`` as indented JSON for a page, secrets out."""
        return json.dumps(self._shown(value), indent=1, ensure_ascii=False)

    def token_ok(self, given: str | None) -> bool:
        """Whether ``given`` is the console's token (none set: nothing is)."""
        if self._token is None or not given:
            return False
        return hmac.compare_digest(given.encode(), self._token.encode())

    @property
    def deciding(self) -> bool:
        return self._token is not None

    # --- pages --------------------------------------------------------------------------------

    def page(self, request: Request, template: str, status: int = 200, **context: Any) -> Response:
        context.update(
            request=request,
            sources=self.sources,
            when=_when,
            ms=_ms,
            short_type=_short_type,
            json_text=self.json_text,
            shown=self._shown,
        )
        return _TEMPLATES.TemplateResponse(request, template, context, status_code=status)

    def runs(self, request: Request) -> Response:
        query = request.query_params
        state, agent, key = query.get("state", ""), query.get("agent", ""), query.get("key", "")
        page = max(int(query.get("page", "1") or 1), 1)
        error = None
        try:
            rows = self.rows() if self.feed.configured else []
        except (OSError, ValueError) as exc:
            rows, error = [], str(exc)
        shown = select(rows, state=state, agent=agent, key=key)
        pages = max(math.ceil(len(shown) / PAGE_ROWS), 1)
        counts: dict[str, int] = {
            name: sum(1 for row in rows if row.state == name) for name in STATES
        }
        counts["replayed"] = sum(1 for row in rows if row.replayed)
        return self.page(
            request,
            "runs.html",
            rows=shown[(page - 1) * PAGE_ROWS : page * PAGE_ROWS],
            total=len(rows),
            matching=len(shown),
            counts=counts,
            agents=sorted({row.agent for row in rows}),
            states=(*STATES, "replayed"),
            state=state,
            agent=agent,
            key=key,
            page=page,
            pages=pages,
            error=error,
        )

    def trace(self, request: Request) -> Response:
        query = request.query_params
        agent, key_json, seq = query.get("agent", ""), query.get("key", ""), query.get("seq", "")
        found: list[RunExecution] = []
        if self.feed.configured and seq.lstrip("-").isdigit():
            found = [
                execution
                for execution in self._group()[0]
                if execution.run == (agent, key_json, int(seq))
            ]
        status = 200 if found else 404
        return self.page(
            request,
            "trace.html",
            status,
            agent=agent,
            key_json=key_json,
            seq=seq,
            executions=found,
            interrupted=interrupted,
        )

    def store(self, request: Request) -> Response:
        from flink_agents.durable.store import StoreError
        from flink_agents.durable.store.inspect import (
            key_states,
            open_store,
            payload_text,
            recorded_spend,
        )

        key = request.query_params.get("key", "")
        states, corrupt, error = [], 0, None
        if key and self.sources.store_topic is not None:
            try:
                store, corrupt = open_store(
                    self.sources.bootstrap_servers,
                    self.sources.store_topic,
                    self.sources.secret_env,
                )
            except StoreError as exc:
                error = str(exc)
            else:
                try:
                    states = key_states(store, key)
                finally:
                    store.close()
        return self.page(
            request,
            "store.html",
            key=key,
            states=states,
            corrupt=corrupt,
            error=error,
            spend=recorded_spend(states),
            payload=lambda call: payload_text(call, self._shown),
        )

    def health(self, request: Request) -> Response:
        jobs, error = [], None
        if self.sources.flink_rest is not None:
            try:
                jobs = flink_jobs(self.sources.flink_rest)
            except (OSError, ValueError) as exc:
                error = f"Flink's REST API at {self.sources.flink_rest}: {exc}"
        charts = []
        if self.feed.configured:
            charts = [svg_chart(series) for series in rate_series(self.feed.records())]
        in_flight = sum(1 for row in self.rows() if row.state == "running") if charts else 0
        return self.page(
            request, "health.html", jobs=jobs, error=error, charts=charts, in_flight=in_flight
        )

    def waits(self, request: Request, message: str = "", status: int = 200) -> Response:
        error = None
        try:
            waits = open_waits(output_lines(self.sources))
        except (OSError, TopicError) as exc:  # outputs that cannot be read: said on the page
            waits, error = [], str(exc)
        return self.page(
            request,
            "waits.html",
            status,
            waits=waits,
            error=error,
            message=message,
            deciding=self.deciding,
            canonical=canonical_json,
        )

    async def decide(self, request: Request) -> Response:
        form = await request.form()
        field: Callable[[str], str] = lambda name: str(form.get(name) or "").strip()  # noqa: E731
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not self.token_ok(field("token") or bearer):
            reason = (
                "deciding is off: start the console with --token"
                if not self.deciding
                else "a decision needs the console's token"
            )
            return await run_in_threadpool(self.waits, request, f"refused: {reason}", 403)
        verdict, wait_id = field("verdict"), field("wait_id")
        try:
            if verdict not in VERDICTS:
                raise DecisionRefused(f"verdict must be one of {', '.join(VERDICTS)}")
            if not field("by"):
                raise DecisionRefused("say who decides (your name is recorded with it)")
            key = key_value(field("key"))
            arguments = None
            if verdict == "edit":
                arguments = parse_arguments(field("arguments"))
                self._schemas.check(field("tool"), arguments)
            where = await run_in_threadpool(
                _write,
                self.sources,
                key,
                wait_id,
                verdict,
                by=field("by"),
                message=field("message") or None,
                arguments=arguments,
            )
        except DecisionRefused as exc:
            return await run_in_threadpool(self.waits, request, f"refused: {exc}", 400)
        return RedirectResponse(
            request.url_for("waits").include_query_params(
                done=f"{verdict} of wait {wait_id[:12]} by {field('by')} written to {where}"
            ),
            status_code=303,
        )

    def waits_page(self, request: Request) -> Response:
        return self.waits(request, request.query_params.get("done", ""))


def build_app(sources: ConsoleSources, token: str | None = None) -> Starlette:
    """The console's app over ``sources``; decisions need ``token`` (none: deciding is off)."""
    console = Console(sources, token)

    async def home(request: Request) -> Response:
        return RedirectResponse(request.url_for("runs"), status_code=307)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        threading.Thread(target=console.warm, name="console-warm", daemon=True).start()
        yield

    app = Starlette(
        lifespan=lifespan,
        routes=[
            Route("/", home),
            Route("/runs", console.runs, name="runs"),
            Route("/trace", console.trace, name="trace"),
            Route("/store", console.store, name="store"),
            Route("/health", console.health, name="health"),
            Route("/waits", console.waits_page, name="waits"),
            Route("/waits/decide", console.decide, methods=["POST"], name="decide"),
        ],
    )
    app.state.console = console
    return app


def _started(row: RunRow) -> float:
    return row.started


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _short_type(event_type: str) -> str:
    return event_type.rpartition(":")[2]
