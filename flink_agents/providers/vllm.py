"""vLLM's OpenAI-compatible server (``vllm serve``), named: chat completions with vLLM's defaults
and its quirks explained.

* The base URL defaults to a local ``vllm serve`` (``http://127.0.0.1:8000/v1``).
* vLLM treats tools without a ``tool_choice`` as ``auto``, and refuses ``auto`` with HTTP 400
  unless the server was started with ``--enable-auto-tool-choice --tool-call-parser NAME``; that
  400 becomes an error naming the flags. (``required`` and a named tool need no flags: vLLM
  forces them with guided decoding.)
* A model name the server does not serve is a 404; the error says which name it must be.
* Structured output: ``response_format`` with a JSON schema by default; ``structured_output``
  selects vLLM's own request field instead (``structured_outputs``, vLLM 0.10.2 and later, or
  ``guided_json``, removed in 0.12).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.providers._http_errors import AttemptFailure
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection

StructuredOutputField = Literal["response_format", "structured_outputs", "guided_json"]

_AUTO_TOOLS_FLAG = "--enable-auto-tool-choice"
_UNKNOWN_MODEL = "does not exist"


def _schema_fields(field: StructuredOutputField, schema: dict[str, Any]) -> dict[str, Any]:
    """vLLM's own request field carrying a JSON schema for guided decoding."""
    if field == "structured_outputs":
        return {"structured_outputs": {"json": schema}}
    return {"guided_json": schema}


def explain(failure: AttemptFailure) -> AttemptFailure:
    """``failure`` with what to do about it when it is one of vLLM's known refusals."""
    if failure.status == 400 and _AUTO_TOOLS_FLAG in failure.reason:
        hint = (
            "the vLLM server refuses tool calls with tool_choice auto (the default when tools "
            "are offered): start it with `vllm serve MODEL --enable-auto-tool-choice "
            "--tool-call-parser PARSER` (the parser of the model's family, e.g. hermes for "
            "Qwen2.5/Hermes, llama3_json for Llama 3.1+, mistral), or set tool_choice to "
            "required or a named tool"
        )
    elif failure.status == 404 and _UNKNOWN_MODEL in failure.reason:
        hint = (
            "the vLLM server serves another model name: use the one it was started with "
            "(--served-model-name, else the model path); GET /v1/models lists it"
        )
    else:
        return failure
    return AttemptFailure(
        f"{hint}; the server said {failure.reason}",
        retryable=failure.retryable,
        status=failure.status,
        retry_after=failure.retry_after,
        request_id=failure.request_id,
    )


class VllmChatModelConnection(OpenAICompatibleChatModelConnection):
    """A vLLM server's chat completions. ``base_url`` includes the ``/v1`` prefix."""

    provider: ClassVar[str] = "vllm"
    default_base_url: ClassVar[str] = "http://127.0.0.1:8000/v1"
    api_key_hint: ClassVar[str] = "VLLM_API_KEY"

    structured_output: StructuredOutputField = Field(
        default="response_format",
        description="Request field carrying a response schema: response_format (OpenAI's), "
        "structured_outputs (vLLM >= 0.10.2) or guided_json (vLLM < 0.12).",
    )

    async def _attempt(self, client: Any, request: ChatRequest, model: str) -> ChatMessage:
        try:
            return await super()._attempt(client, self._with_schema_field(request), model)
        except AttemptFailure as failure:
            raise explain(failure) from None

    def _with_schema_field(self, request: ChatRequest) -> ChatRequest:
        """``request`` with its response schema moved to vLLM's own field, when one is chosen."""
        schema = request.response_schema
        if schema is None or self.structured_output == "response_format":
            return request
        extra = {**request.extra, **_schema_fields(self.structured_output, schema)}
        return request.model_copy(update={"response_schema": None, "extra": extra})
