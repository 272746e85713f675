"""Azure OpenAI: Chat Completions and Responses against a deployment.

The wire formats are OpenAI's (`_openai_chat`, `_openai_responses`); what differs is where the
request goes and how the key travels (the `api-key` header). Two endpoint styles:

* the v1 endpoint (default): `{endpoint}/openai/v1/chat/completions` and `.../v1/responses`, the
  deployment named as the body's `model`;
* the dated one (`api_version="2024-10-21"`, or `AZURE_OPENAI_API_VERSION`):
  `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...` and
  `{endpoint}/openai/responses?api-version=...`.

Azure runs a content filter over prompt and answer: results ride along in the chunks (the first
may hold only `prompt_filter_results` and no choices), `finish_reason: content_filter` or a
filtered category stops the answer (`ContentFiltered`), and since output is buffered through the
filter the stream arrives in bursts (parsed like any other).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ..errors import ConfigError
from ._base import Dialect
from ._http import HTTPProvider
from ._openai_batch import AzureBatches
from ._openai_chat import OpenAIProvider
from ._openai_responses import ResponsesProvider


def azure_root(endpoint: str) -> str:
    """The resource's root URL, whether given as `https://x.openai.azure.com`, `.../openai` or
    `.../openai/v1`."""
    root = endpoint.rstrip("/")
    for suffix in ("/openai/v1", "/openai"):
        if root.endswith(suffix):
            return root[: -len(suffix)]
    return root


def _check_version(api_version: str | None) -> str | None:
    if api_version is None:
        return None
    version = api_version.strip()
    if not version or version in ("v1", "latest", "preview"):
        return None  # the v1 endpoint
    if any(c.isspace() or c in "/?&#" for c in version):
        raise ConfigError(
            f"api_version {api_version!r} is not an Azure API version: write it like "
            "'2024-10-21', or leave it out for the v1 endpoint."
        )
    return version


class _Azure(HTTPProvider):
    """What both Azure formats share: the resource's endpoint, the `api-key` header, the
    endpoint style (`api_version`)."""

    default_base_url = ""
    default_name = "azure"
    auth_header, auth_prefix = "api-key", ""
    output_dialect: Dialect = "openai"  # OpenAI's strict schemas (its deployment names the model)

    def __init__(self, model: str, *, api_version: str | None = None, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.api_version = _check_version(api_version)

    def _azure_url(self, dated_path: str, v1_path: str) -> str:
        root = azure_root(self.base_url)
        if self.api_version is None:
            return f"{root}/openai/v1/{v1_path}"
        return f"{root}/openai/{dated_path}?api-version={quote(self.api_version)}"

    def api_url(self, path: str) -> str:
        """The URL of `path` under the resource's root (v1, or dated with `api_version`).

        Args:
            path: The path under the root ("files", "batches").

        Returns:
            The URL.
        """
        return self._azure_url(path, path)


class AzureChatProvider(_Azure, OpenAIProvider):
    """Chat Completions against an Azure OpenAI deployment.

    Attributes:
        batch_endpoint: "/chat/completions", the `url` each item of a batch names.
    """

    batch_endpoint = "/chat/completions"
    _max_tokens_key = "max_completion_tokens"  # the output cap's field, as Azure wants it
    _batch_class = AzureBatches
    _batch_home_only = False

    @property
    def url(self) -> str:
        """The deployment's Chat Completions endpoint (v1, or dated with `api_version`)."""
        deployment = quote(self.model, safe="")
        return self._azure_url(f"deployments/{deployment}/chat/completions", "chat/completions")


class AzureResponsesProvider(_Azure, ResponsesProvider):
    """The Responses API against an Azure OpenAI deployment (no batch API)."""

    _batch_class = None  # batches go through `AzureChatProvider`

    @property
    def url(self) -> str:
        """The resource's Responses endpoint (v1, or dated with `api_version`)."""
        return self._azure_url("responses", "responses")
