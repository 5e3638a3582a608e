"""A cap on the bytes of a response body a model client reads (``max_response_bytes``).

A server (or a proxy in front of it) answering with an endless or huge body would otherwise be
read whole into memory before anything could refuse it. The cap is an httpx response hook: a
declared ``Content-Length`` over it fails at once, and the body is counted as it is read, so a
chunked body fails as soon as it passes the cap. The failure is final (another attempt would
read the same body) and names the endpoint and the setting.

The OpenAI and Anthropic SDKs run on ``httpx2``, a fork of httpx with the same interfaces; the
hook is built for whichever library's client it is given to.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from flink_agents.providers.retry_loop import AttemptFailure

#: Default cap: far above a chat reply, room for a large batch of embeddings.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class ResponseTooLargeError(AttemptFailure):
    """A response body went past ``max_response_bytes``: final, not retried."""

    def __init__(self, limit: int, target: str) -> None:
        super().__init__(
            f"the response body from {target} is larger than {limit} bytes (max_response_bytes)",
            retryable=False,
        )


def response_cap(limit: int, byte_stream: type[Any]) -> Callable[[Any], Awaitable[None]]:
    """A ``response`` event hook for an httpx-style client that fails a body over ``limit``
    bytes; ``byte_stream`` is that library's ``AsyncByteStream`` (its responses accept only
    one)."""

    class CappedBody(byte_stream):
        def __init__(self, inner: Any, target: str) -> None:
            self._inner = inner
            self._target = target

        async def __aiter__(self) -> AsyncIterator[bytes]:
            read = 0
            async for chunk in self._inner:
                read += len(chunk)
                if read > limit:
                    raise ResponseTooLargeError(limit, self._target)
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    async def cap(response: Any) -> None:
        url = response.request.url
        target = f"{url.scheme}://{url.host}{f':{url.port}' if url.port else ''}{url.path}"
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ResponseTooLargeError(limit, target)
        response.stream = CappedBody(response.stream, target)

    return cap


def byte_stream_of(client_class: type[Any]) -> type[Any]:
    """The ``AsyncByteStream`` of the httpx-style library ``client_class`` (an SDK's default
    client) is built on: httpx, or the SDKs' fork httpx2."""
    for base in client_class.__mro__:
        library = importlib.import_module(base.__module__.partition(".")[0])
        stream = getattr(library, "AsyncByteStream", None)
        if isinstance(stream, type):
            return stream
    raise TypeError(f"{client_class.__qualname__} is not an httpx-style client")
