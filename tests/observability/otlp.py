"""A local OTLP/HTTP receiver for the trace tests: accepts ``POST /v1/traces`` on 127.0.0.1
and decodes each body with the ``opentelemetry-proto`` classes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# The otel extra: tests that need it are skipped where it is not installed (the Flink 1.20 line,
# whose Beam pins a protobuf the OTLP exporter does not take).
pytest.importorskip("opentelemetry.proto", reason="the otel extra is not installed")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span


class Receiver:
    """What the receiver was sent: the request paths and the decoded export requests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.paths: list[str] = []
        self.requests: list[ExportTraceServiceRequest] = []

    def spans(self) -> list[Span]:
        """Every span received, all resources and scopes (each scope must be ours)."""
        found: list[Span] = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    assert scope_spans.scope.name == "flink_agents"
                    found.extend(scope_spans.spans)
        return found

    def services(self) -> set[str]:
        """The ``service.name`` of every resource received."""
        return {
            attribute.value.string_value
            for request in self.requests
            for resource_spans in request.resource_spans
            for attribute in resource_spans.resource.attributes
            if attribute.key == "service.name"
        }


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver serving on a free port until the block ends."""

    class Handler(BaseHTTPRequestHandler):
        receiver: Receiver

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            self.receiver.paths.append(self.path)
            if self.path == "/v1/traces":
                self.receiver.requests.append(ExportTraceServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Handler.receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}/v1/traces")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Handler.receiver
    finally:
        server.shutdown()
        server.server_close()
