"""AWS Bedrock, its Converse API (``POST {endpoint}/model/{modelId}/converse``).

Uses the official ``boto3`` client (``bedrock-runtime``): it resolves the regional endpoint,
validates the request and signs it (SigV4) with credentials from the worker's standard AWS chain
(environment, profile, container or instance role) or a Bedrock API key in
``AWS_BEARER_TOKEN_BEDROCK``. No credential is ever an argument, so none can reach a plan.
botocore's own retries are off (one attempt): every attempt goes through
:func:`~flink_agents.providers._retry.call_with_retries` so it counts against the durable call's
budget. boto3 is synchronous, so each attempt runs in a thread of the client's own pool
(``max_concurrent_calls`` threads, 32 without a cap).

botocore reads a reply it cannot parse (a gateway's HTML page, a body cut short) as an empty
one, so :func:`response_check` reads every raw reply before it does and turns errors, bodies cut
short and bodies that are not JSON into attempt failures.

The protocol: system prompts are a top-level ``system`` list, tool calls and results are
``toolUse``/``toolResult`` content blocks (results in a user turn), roles must alternate, and
structured output is a forced call of a tool whose input schema is the response schema.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field, SecretStr, field_validator

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, ToolCall, ToolSpec
from flink_agents.providers._connection import (
    STRUCTURED_TOOL_PREFIX,
    HttpChatModelConnection,
    MissingCredentialError,
    alternating_turns,
    structured_tool_name,
)
from flink_agents.providers._http_errors import AttemptFailure, _body_message, what_was_sent
from flink_agents.providers._response_cap import ResponseTooLargeError
from flink_agents.providers._sdk import sdk_from_extra

with sdk_from_extra("boto3", "flink-agents-py[bedrock]"):
    import boto3
    import botocore.config
    import botocore.exceptions

_BEARER_TOKEN_VARIABLE = "AWS_BEARER_TOKEN_BEDROCK"
_CONVERSE_REPLY = "before-parse.bedrock-runtime.Converse"
_DEFAULT_PARALLEL_CALLS = 32
"""Threads and pooled HTTP connections of a client whose connection sets no
``max_concurrent_calls`` (asyncio's shared pool has only ``cpu_count + 4`` threads)."""


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        result = {"toolUseId": message.tool_call_id, "content": [{"text": message.content}]}
        return [{"toolResult": result}]
    # Bedrock refuses blank text blocks.
    blocks: list[dict[str, Any]] = [{"text": message.content}] if message.content else []
    blocks += [
        {"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.arguments}}
        for call in message.tool_calls
    ]
    return blocks


def to_converse_messages(
    messages: list[ChatMessage],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The system blocks and the user/assistant turns (consecutive same-role turns merged: the
    API wants them alternating, and a step's tool results answer it together)."""
    system = [{"text": m.content} for m in messages if m.role == "system" and m.content]
    return system, alternating_turns(messages, _blocks)


def to_converse_tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool spec as a Converse ``toolSpec``."""
    return {
        "toolSpec": {
            "name": spec.name,
            "description": spec.description,
            "inputSchema": {"json": spec.parameters},
        }
    }


def tool_choice(choice: str) -> dict[str, Any]:
    """``toolChoice`` for a tool choice: auto, required, or the name of one tool."""
    if choice == "auto":
        return {"auto": {}}
    if choice == "required":
        return {"any": {}}
    return {"tool": {"name": choice}}


def converse_body(request: ChatRequest, model: str, choice: str | None) -> dict[str, Any]:
    """The keyword arguments of ``converse``, ``extra`` merged in (e.g.
    ``additionalModelRequestFields`` for a model's own parameters)."""
    system, turns = to_converse_messages(request.messages)
    body: dict[str, Any] = {"modelId": model, "messages": turns}
    if system:
        body["system"] = system
    tools = [to_converse_tool(t) for t in request.tools]
    if request.response_schema is not None:
        name = structured_tool_name(request.response_schema)
        structured = ToolSpec(
            name=name,
            description="Give the final answer in this structure.",
            parameters=request.response_schema,
        )
        tools.append(to_converse_tool(structured))
        choice = name
    if tools:
        body["toolConfig"] = {"tools": tools}
        if choice is not None:
            body["toolConfig"]["toolChoice"] = tool_choice(choice)
    inference: dict[str, Any] = {}
    if request.max_tokens is not None:
        inference["maxTokens"] = request.max_tokens
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    if inference:
        body["inferenceConfig"] = inference
    return {**body, **request.extra}


def from_converse(response: dict[str, Any], structured: bool) -> ChatMessage:
    """The assistant reply; with ``structured``, the forced tool's input becomes the content."""
    reply = {k: v for k, v in response.items() if k != "ResponseMetadata"}
    try:
        blocks = reply["output"]["message"]["content"]
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in blocks:
            if "text" in block:
                texts.append(block["text"])
            elif "toolUse" in block:
                use = block["toolUse"]
                if structured and use["name"].startswith(STRUCTURED_TOOL_PREFIX):
                    texts = [json.dumps(use["input"])]
                    continue
                if not isinstance(use["input"], dict):
                    raise TypeError(f"input of tool call {use['name']!r} is not an object")
                calls.append(
                    ToolCall(id=use["toolUseId"], name=use["name"], arguments=use["input"])
                )
            # reasoningContent and other blocks are not part of the answer.
        usage = reply.get("usage") or {}
        tokens = TokenUsage(
            input_tokens=usage.get("inputTokens", 0), output_tokens=usage.get("outputTokens", 0)
        )
    except (KeyError, TypeError) as exc:
        raise AttemptFailure.malformed(
            f"not a Converse reply (missing or bad {exc}); the server sent {what_was_sent(reply)}"
        ) from None
    return ChatMessage(role="assistant", content="".join(texts), tool_calls=calls, usage=tokens)


def response_check(max_response_bytes: int) -> Callable[..., None]:
    """botocore's ``before-parse`` hook: raise the attempt's failure for a body over
    ``max_response_bytes``, an HTTP error, a body cut short or a body that is not JSON; let a
    good reply through to the parser. botocore has read the body by then: the cap keeps a huge
    reply from being parsed and recorded, not from being read."""

    def check(response_dict: dict[str, Any], **_: Any) -> None:
        if len(response_dict["body"]) > max_response_bytes:
            raise ResponseTooLargeError(max_response_bytes, "the Bedrock Converse endpoint")
        check_response(response_dict)

    return check


def check_response(response_dict: dict[str, Any]) -> None:
    """Raise the attempt's failure for an HTTP error, a body cut short or a body that is not
    JSON (see `response_check`)."""
    status: int = response_dict["status_code"]
    headers = response_dict["headers"]
    body: bytes = response_dict["body"]
    announced = headers.get("content-length")
    if announced is not None and announced.isdigit() and len(body) < int(announced):
        raise AttemptFailure(
            f"request failed: the body was cut short ({len(body)} of {announced} bytes)",
            retryable=True,
        )
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if status >= 300:
        # The error's type is a header (x-amzn-ErrorType: "ThrottlingException:<namespace>").
        kind = (headers.get("x-amzn-errortype") or "").partition(":")[0]
        message = (
            data.get("message") or data.get("Message") or _body_message(data)
            if isinstance(data, dict)
            else body.decode(errors="replace")[:200]
        )
        reason = f"{kind}: {message}" if kind and message else kind or message
        raise AttemptFailure.from_status(
            status, headers, reason, request_id=headers.get("x-amzn-requestid")
        )
    if not isinstance(data, dict):
        raise AttemptFailure.malformed(f"the server sent {what_was_sent(body)}")


def _converse(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    """One attempt, in a worker thread."""
    try:
        reply: dict[str, Any] = client.converse(**body)
        return reply
    except (botocore.exceptions.HTTPClientError, botocore.exceptions.ConnectionError) as exc:
        raise AttemptFailure.transport("request failed", exc) from None
    except botocore.exceptions.ParamValidationError as exc:
        raise AttemptFailure(f"request refused by boto3: {exc}", retryable=False) from None
    except botocore.exceptions.NoCredentialsError:
        raise AttemptFailure(_no_credentials(), retryable=False) from None
    except botocore.exceptions.BotoCoreError as exc:  # configuration: the same on every attempt
        raise AttemptFailure(f"{type(exc).__name__}: {exc}", retryable=False) from None


def _no_credentials() -> str:
    return (
        "bedrock connection found no AWS credentials: set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_PROFILE or the connection's "
        f"profile, or {_BEARER_TOKEN_VARIABLE}, or run with an IAM role"
    )


@dataclass(frozen=True)
class BedrockClient:
    """A boto3 client and the threads its (blocking) calls run in, as many as it pools
    connections."""

    client: Any
    threads: ThreadPoolExecutor


class BedrockChatModelConnection(HttpChatModelConnection):
    """Models on AWS Bedrock through the Converse API. ``model`` is a model or inference
    profile id (``anthropic.claude-3-5-haiku-20241022-v1:0``, ``us.amazon.nova-lite-v1:0``).
    ``base_url``, when set, replaces the regional endpoint (a VPC endpoint, a local server)."""

    provider: ClassVar[str] = "bedrock"
    default_base_url: ClassVar[str] = ""  # boto3 derives the regional endpoint
    api_key_hint: ClassVar[str] = _BEARER_TOKEN_VARIABLE
    # A forced tool carries the answer; forcing it keeps the model from the other tools.
    native_schema: ClassVar[bool] = True
    native_schema_with_tools: ClassVar[bool] = False

    region: str | None = Field(
        default=None, description="AWS region; the chain's (AWS_REGION, the profile) if unset."
    )
    profile: str | None = Field(
        default=None, description="A profile of the worker's AWS config (its name only)."
    )
    tool_choice: str | None = Field(
        default=None,
        min_length=1,
        description='"auto", "required" or a tool name to force (Converse has no "none"); '
        "the model's default (auto) when unset.",
    )

    @field_validator("api_key")
    @classmethod
    def _no_api_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            raise ValueError(
                "Bedrock takes no api_key: requests are signed with the worker's AWS "
                f"credentials, or use a Bedrock API key by setting {_BEARER_TOKEN_VARIABLE}"
            )
        return value

    @field_validator("tool_choice")
    @classmethod
    def _no_none_choice(cls, value: str | None) -> str | None:
        if value == "none":
            raise ValueError(
                'the Converse API has no tool choice "none": offer no tools to get none called'
            )
        return value

    def unsupported_tool_settings(
        self, tool_choice: str | None, parallel_tool_calls: bool | None
    ) -> str | None:
        if tool_choice == "none":
            return 'the Converse API has no tool choice "none": offer no tools to get none called'
        if parallel_tool_calls is False:
            return "the Converse API cannot turn parallel tool calls off; leave it unset"
        return None

    def _session(self) -> boto3.session.Session:
        return boto3.session.Session(profile_name=self.profile, region_name=self.region)

    def open(self) -> None:
        """Fail now, not at the first record, when no credentials or no region can be found."""
        session = self._session()
        if session.get_credentials() is None and not os.environ.get(_BEARER_TOKEN_VARIABLE):
            raise MissingCredentialError(_no_credentials())
        if session.region_name is None:
            raise ValueError(
                "bedrock connection has no region: set its region argument or AWS_REGION"
            )

    def _make_client(self) -> BedrockClient:
        parallel = self.max_concurrent_calls or _DEFAULT_PARALLEL_CALLS
        client = self._session().client(
            "bedrock-runtime",
            endpoint_url=self.base_url or None,
            config=botocore.config.Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                connect_timeout=self.timeout_seconds,
                read_timeout=self.timeout_seconds,
                max_pool_connections=parallel,
            ),
        )
        client.meta.events.register(_CONVERSE_REPLY, response_check(self.max_response_bytes))
        return BedrockClient(client, ThreadPoolExecutor(parallel, thread_name_prefix="bedrock"))

    async def _attempt(
        self, client: BedrockClient, request: ChatRequest, model: str
    ) -> ChatMessage:
        choice = request.tool_choice or self.tool_choice  # the setup's, else the connection's
        body = converse_body(request, model, choice)
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(client.threads, _converse, client.client, body)
        return from_converse(reply, structured=request.response_schema is not None)
