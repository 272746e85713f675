"""Recordings of HTTP exchanges with a model provider: a versioned file of JSON lines.

A recording keeps, for each request, what a retry policy and a rate limiter act on, with its
timing, so that a session (a 529 storm, an afternoon of per-minute 429s) can be replayed over a
real socket (`MockServer(replay=...)`), shared, and asked "what would another policy have done"
(`nbagent.simulate.what_if`). This module uses the standard library only and imports nothing
else of nbagent, so the mock server and any transport can write recordings.

The format (``nbagent-recording``, version 1): one JSON object per line, UTF-8 (written as
ASCII), each with ``kind`` and ``exchange`` (0 for the header)::

    {"kind":"header","exchange":0,"format":"nbagent-recording","version":1,
     "made_by":"nbagent 0.1.0: Agent(record=...)","created_at":"2026-...Z",
     "record_bodies":false,"note":""}
    {"kind":"request","exchange":1,"at":1764581234.5,"method":"POST","path":"/v1/messages",
     "model":"claude-sonnet-4-0","body_sha256":"9f2c...","body_bytes":812}
    {"kind":"response","exchange":1,"after_s":0.412,"status":529,
     "headers":{"content-type":"application/json","request-id":"req_01...","x-should-retry":"true"}}
    {"kind":"chunk","exchange":1,"after_s":0.413,"data":"{\\"type\\":\\"error\\",..."}
    {"kind":"end","exchange":1,"after_s":0.413,"error":null}

- ``at`` is the request's wall-clock time (Unix seconds); every ``after_s`` is seconds after
  that request was sent, on a monotonic clock.
- ``chunk`` lines hold the body as it came off the network, one line per read: ``data`` when
  the bytes are UTF-8 text, ``data_b64`` (base64) otherwise (a gzip body, a character cut in
  two by the read).
- ``end.error`` names how an exchange broke (a reset, no answer), or is null. An exchange with
  no ``response`` got no answer; one with no ``end`` was cut off by the recorder's death.
- ``body`` (the request's JSON) is written only with ``record_bodies=True``; the digest always
  is: a retry sends the same snapshot, so its digest tells retries from new requests.
- Kept response headers (an allow-list, `KEPT_HEADERS` and `KEPT_FAMILIES`): content type
  and encoding, ``retry-after``, ``retry-after-ms``, ``x-should-retry``, request ids, the
  ``anthropic-ratelimit-*`` and ``x-ratelimit-*`` families, and a gateway's ``llm_provider-``
  copies of those. Request headers are never written, nor any other response header (keys,
  auth headers, cookies, MCP headers); the path keeps only the ``alt`` and ``api-version``
  query parameters (Gemini's ``?key=`` is dropped). API keys handed to `Recorder.exchange` as
  ``secrets`` are masked wherever a server reflects them into the body.
- Appendable: a `Recorder` on an existing recording checks its header and numbers its
  exchanges after the last one. ``pd.read_json(path, lines=True)`` gives one row per line.
- Each line is written and handed to the operating system at once, so a killed process keeps
  everything before its last line; the reader skips a torn last line.

The recorder API, called per exchange by whatever sits at the HTTP boundary (the providers,
the mock server, a transport wrapper)::

    rec = Recorder("storm.nbrec", record_bodies=False, made_by="nbagent.watch")
    ex = rec.exchange("POST", url, request_headers, body_bytes, secrets=(api_key,))
    ex.response(status, response_headers)   # when the status line and headers arrive
    ex.chunk(data)                          # per piece of body, as it arrives
    ex.end(error=None)                      # once: None, or how it broke ("ReadError")
    rec.close()

`write_recording(path, recording)` writes a whole one (assembled, trimmed) at once.
`read_recording(path)` gives a `Recording` (its ``header`` and ``exchanges``, each a
`RecordedExchange` with its status, kept headers and timed chunks). A file that is missing,
damaged, not a recording, or written by a newer nbagent raises `RecordingError` with one
sentence; inside nbagent that error is also an `nbagent.errors.ConfigError`.
"""

from ._format import (
    FORMAT,
    KEPT_FAMILIES,
    KEPT_HEADERS,
    SUFFIX,
    VERSION,
    clean_path,
    kept_header,
    kept_headers,
    model_of,
)
from ._reader import (
    RecordedExchange,
    Recording,
    RecordingError,
    read_header,
    read_recording,
    set_error_type,
)
from ._writer import Exchange, Recorder, write_recording

__all__ = [
    "FORMAT",
    "KEPT_FAMILIES",
    "KEPT_HEADERS",
    "SUFFIX",
    "VERSION",
    "Exchange",
    "RecordedExchange",
    "Recorder",
    "Recording",
    "RecordingError",
    "clean_path",
    "kept_header",
    "kept_headers",
    "model_of",
    "read_header",
    "read_recording",
    "set_error_type",
    "write_recording",
]
