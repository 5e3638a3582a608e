"""Azure OpenAI chat completions:
``POST {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...``.

The protocol is OpenAI's chat completions, so the request and reply conversions (and any
setting of :class:`OpenAICompatibleChatModelConnection`) are reused; what differs is the address
(a deployment in the path, an ``api-version`` query) and the credential: an ``api-key`` header,
or a Microsoft Entra ID bearer token. The official client's ``AsyncAzureOpenAI`` builds both;
every argument it would otherwise read from ``AZURE_OPENAI_*`` / ``OPENAI_API_VERSION``
variables behind our back is passed explicitly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from pydantic import Field, SecretStr, field_validator, model_validator

from flink_agents.api.refs import import_reference
from flink_agents.api.resources import resolve_env_references
from flink_agents.providers._endpoint import MissingCredentialError
from flink_agents.providers._sdk import sdk_from_extra
from flink_agents.providers.openai_compatible import (
    OpenAICompatibleChatModelConnection,
    openai_http_client,
)

with sdk_from_extra("openai"):
    import openai

DEFAULT_API_VERSION = "2024-10-21"
"""A generally available data-plane API version; newer ones add fields, not shapes we use."""

TokenProvider = Callable[[], "str | Awaitable[str]"]


class AzureOpenAIChatModelConnection(OpenAICompatibleChatModelConnection):
    """An Azure OpenAI resource's chat completions.

    ``base_url`` is the resource endpoint (``https://NAME.openai.azure.com``, no ``/openai``).
    ``deployment`` names the deployment; without it, the request's model (the setup's ``model``)
    is the deployment name, as in the official client. Exactly one credential: ``api_key`` (sent
    as ``api-key``), ``entra_token`` (a bearer token; both environment references) or
    ``entra_credential`` (``module:function`` returning a fresh token, for tokens that expire).
    """

    provider: ClassVar[str] = "azure-openai"
    default_base_url: ClassVar[str] = ""
    api_key_hint: ClassVar[str] = "AZURE_OPENAI_API_KEY"

    deployment: str | None = Field(
        default=None, description="Deployment name; default: the request's model."
    )
    api_version: str = Field(default=DEFAULT_API_VERSION, min_length=1)
    entra_token: SecretStr | None = Field(
        default=None,
        exclude=True,
        repr=False,
        description='A Microsoft Entra ID bearer token as an environment reference {"env": NAME}.',
    )
    entra_credential: str | None = Field(
        default=None,
        pattern=r"^[\w.]+:[\w.]+$",
        description="module:function returning an Entra ID token (str or awaitable), called "
        "for each request, e.g. one made by azure.identity.get_bearer_token_provider.",
    )

    @field_validator("entra_token", mode="before")
    @classmethod
    def _resolve_token_reference(cls, value: Any) -> Any:
        return resolve_env_references(value)

    @model_validator(mode="after")
    def _endpoint_and_one_credential(self) -> AzureOpenAIChatModelConnection:
        if not self.base_url:
            raise ValueError(
                "azure-openai connection needs base_url: the resource endpoint, "
                "e.g. https://NAME.openai.azure.com"
            )
        given = [n for n in ("api_key", "entra_token", "entra_credential") if getattr(self, n)]
        if len(given) > 1:
            raise ValueError(
                f"azure-openai connection takes one credential, got {' and '.join(given)}"
            )
        if self.model is None and self.deployment is not None:
            # The call's label (and the body's model) name the deployment then.
            self.model = self.deployment
        return self

    def open(self) -> None:
        """Fail at start-up when no credential is given or ``entra_credential`` does not import."""
        if self.api_key is None and self.entra_token is None and self.entra_credential is None:
            raise MissingCredentialError(
                "azure-openai connection needs a credential: api_key as an environment "
                f'reference, e.g. {{"env": "{self.api_key_hint}"}}, entra_token likewise, or '
                "entra_credential (module:function returning a token)"
            )
        self._token_provider()

    def _token_provider(self) -> TokenProvider | None:
        if self.entra_credential is None:
            return None
        provider = import_reference(self.entra_credential)
        if not callable(provider):
            raise TypeError(f"entra_credential {self.entra_credential!r} is not callable")
        return provider

    def _make_client(self) -> openai.AsyncAzureOpenAI:
        self.open()  # never let the client fall back to AZURE_OPENAI_* variables
        token = self.entra_token.get_secret_value() if self.entra_token is not None else None
        return openai.AsyncAzureOpenAI(
            azure_endpoint=self.url,
            azure_deployment=self.deployment,
            api_version=self.api_version,
            api_key=self.secret() or None,
            azure_ad_token=token,
            azure_ad_token_provider=self._token_provider(),
            timeout=self.timeout_seconds,
            max_retries=0,
            http_client=openai_http_client(self),
        )
