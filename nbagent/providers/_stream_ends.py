"""What a 200 stream ends in, for every HTTP wire format: its one `Completed`, or the error
an answer that streamed ended in (a content filter, a full context window)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._core._budget import Usage
from .._core._messages import Block, Message
from ..errors import ProviderError
from ._base import Completed
from ._event_stream import Events
from ._http_errors import error_from_payload, kept_headers, redact
from ._pricing import estimate_cost

__all__ = ["StreamEnds"]


class StreamEnds:
    """The end of a stream, shared by `HTTPProvider`'s formats (their `read_events`)."""

    name: str
    model: str

    if TYPE_CHECKING:

        @property
        def _secrets(self) -> tuple[str, ...]: ...

    def _completed(
        self,
        blocks: list[Block],
        stop_reason: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read: int = 0,
        cache_write: int = 0,
        stream: Events,
        model: str | None = None,
        response_id: str | None = None,
        note: str = "",
    ) -> Completed:
        """The one `Completed` of a stream: the message, usage priced with genai-prices (input
        counts cached tokens too, as every provider's total does), and what the answer came
        with (`stream`'s request id, status and rate-limit headers)."""
        usage = Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            requests=1,
        )
        answered = model or self.model
        return Completed(
            message=Message("assistant", tuple(blocks)),
            usage=usage.with_cost(estimate_cost(self.name, answered, usage)),
            stop_reason=stop_reason,
            request_id=stream.request_id,
            response_id=response_id,
            model=answered,
            headers=kept_headers(stream.headers, self._secrets),
            note=note,
            status_code=stream.status_code,
        )

    def _refusal(
        self,
        cls: type[ProviderError],
        message: str,
        *,
        code: str,
        request_id: str | None,
        headers: Mapping[str, str],
        **fields: Any,
    ) -> ProviderError:
        """An error a 200 stream ended in (a content filter, a full context window)."""
        return cls(
            redact(message, self._secrets),
            provider=self.name,
            code=code,
            request_id=request_id,
            headers=kept_headers(headers, self._secrets),
            **fields,
        )

    def _error_event(self, payload: Any, es: Events, **options: Any) -> ProviderError:
        """The typed error of an error event of the answer (`options` as `error_from_payload`
        takes them: a `fallback_message`)."""
        return error_from_payload(
            self.name, payload, es.headers, secrets=self._secrets, model=self.model, **options
        )
