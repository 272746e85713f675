"""What a wire format implements, beside the one request path `HTTPProvider` gives it.

A format names its endpoint (`url`), builds its request's body (`build_body`), reads its
answer's events (its `_reading`, which `read_events` drives), and, with a batch API, names that
API's client (`batch_api`), the endpoint its items name (`batch_endpoint`) and how a whole
answer replays as its events (`whole_events`). `stream_markers` let a watcher decode only the
events that say how an answer ends.
"""

from __future__ import annotations

from typing import Any

from ._base import ModelRequest, ProviderBase


class WireFormat(ProviderBase):
    """The part of an `HTTPProvider` its wire format fills in (the module docstring).

    Attributes:
        name: The provider's name.
        base_url: The endpoint.
        batch_endpoint: The endpoint an item of an OpenAI-style batch names (its `url`),
            "" for a format without one.
        stream_markers: What the events that say how an answer ends hold (usage, the stop
            reason, an error, the end marker): a watcher decodes only those, for `read_events`.
    """

    name: str
    base_url: str
    batch_endpoint = ""  # the endpoint an item of a batch API names (OpenAI's Batch API)
    stream_markers: tuple[bytes, ...] = ()  # what the events that end an answer hold (_watch)
    # the `BatchClient` class of the format's batch API, None without one; with
    # `_batch_home_only`, only the provider of the format's own name has it (OpenAI's batch
    # API is OpenAI's: OpenRouter, Ollama and local servers speak the format without it)
    _batch_class: type[Any] | None = None
    _batch_home_only = False
    # the API versions a base URL may end in (the first is put under one that names none)
    _versions: tuple[str, ...] = ()
    _path = ""  # the format's endpoint under the API's root

    @property
    def api_base(self) -> str:
        """The API's root: `base_url`, or the versioned root a format puts under it (the first
        of its versions, unless `base_url` ends in one)."""
        base, versions = self.base_url, self._versions
        if versions and not base.endswith(versions):
            base += versions[0]
        return base

    def api_url(self, path: str) -> str:
        """The URL of `path` under this provider's API root (a batch API's endpoints).

        Args:
            path: The path under the root, without a leading slash ("files", "batches").

        Returns:
            `{api_base}/{path}`.
        """
        return f"{self.api_base}/{path}"

    @classmethod
    def batch_api(cls, name: str) -> type[Any] | None:
        """The `BatchClient` class of the batch API a provider of this format named `name` has
        (`_models.batch_client`).

        Args:
            name: The provider's name ("openai", "openrouter").

        Returns:
            `_batch_class`, or None when the format has none or it is not this provider's.
        """
        home = getattr(cls, "default_name", "")
        return None if cls._batch_home_only and name != home else cls._batch_class

    def whole_events(self, body: dict[str, Any]) -> list[tuple[str, dict[str, Any] | str]]:
        """The events a live stream would have carried for the whole answer `body` (a batch
        item's), for `read_events` to read (`_whole_body.whole_body`).

        Args:
            body: The whole answer, as the format's non-streaming API gives it.

        Returns:
            The events, each (event name, its data).

        Raises:
            NotImplementedError: The format has no batch API.
        """
        raise NotImplementedError(f"{type(self).__name__} does not read a whole answer")

    @property
    def url(self) -> str:
        """The endpoint a request of this format is posted to: its path under the API's root
        (`/messages`, `/chat/completions`, `/responses`)."""
        return self.api_base + self._path

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of `request` in this format, asking for a stream.

        Args:
            request: The conversation, system prompt, tools and settings.

        Returns:
            The body, before encoding.

        Raises:
            NotImplementedError: The subclass does not build one.
        """
        raise NotImplementedError(f"{type(self).__name__} does not build a request body")
