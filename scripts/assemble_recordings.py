"""Assemble the two recordings shipped in nbagent/demo/recordings/ from real provider answers.

Each answer (status, body) is a real one, copied from tests/fixtures/providers/ (each file names
its source on its first line); the order, the times, the request ids and the digests are made
up, in a plausible order, and the header of each file says so. They are teaching material, not
one real session. Run from the repository root:

    python scripts/assemble_recordings.py            # write them
    python scripts/assemble_recordings.py --check    # exit 1 if the shipped files differ

tests/test_recording_assembled.py checks that the shipped files are what this script makes.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "providers"
OUT = ROOT / "nbagent" / "demo" / "recordings"
T0 = 1_770_800_000.0  # a made-up start: the files are assembled, not recorded

sys.path.insert(0, str(ROOT))
from nbagent.recording import RecordedExchange, Recording, write_recording  # noqa: E402


def _fixture(name: str) -> tuple[str, str]:
    """(its source line, the rest of the file)."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    return first.removeprefix("# source: ").strip(), rest


def _json_tail(text: str) -> str:
    """The pretty-printed JSON body at the end of a run log, as the server sent it."""
    return text[text.index("{") :].strip() + "\n"


def _events(sse: str) -> list[bytes]:
    """An SSE body cut into its events, as a server flushes them one by one."""
    sep = "\r\n\r\n" if "\r\n\r\n" in sse else "\n\n"
    parts = [p for p in sse.split(sep) if p.strip()]
    return [(p + sep).encode() for p in parts]


class _Session:
    def __init__(self, model: str, path: str) -> None:
        self.model, self.path = model, path
        self.exchanges: list[RecordedExchange] = []

    def add(
        self,
        at: float,
        prompt: int,
        status: int,
        headers: dict[str, str],
        chunks: list[bytes],
        *,
        first_byte_s: float,
        gap_s: float = 0.08,
    ) -> None:
        n = len(self.exchanges) + 1
        times = [first_byte_s + i * gap_s for i in range(len(chunks))]
        digest = hashlib.sha256(f"assembled request {prompt}".encode()).hexdigest()
        rid = {**headers}
        self.exchanges.append(
            RecordedExchange(
                number=n,
                at=round(T0 + at, 3),
                method="POST",
                path=self.path,
                model=self.model,
                body_sha256=digest,
                body_bytes=0,
                status=status,
                headers=rid,
                response_after_s=round(first_byte_s, 3),
                chunks=[(round(t, 3), c) for t, c in zip(times, chunks, strict=True)],
                end_after_s=round((times[-1] if times else first_byte_s) + 0.001, 3),
                complete=True,
            )
        )


def gemini_free_tier() -> Recording:
    """Twenty prompts on a free tier of 5 requests a minute and 20 a day: each sixth request in
    a minute gets the per-minute 429 (RetryInfo 58 s), one 503 on the way, then the day's quota."""
    ok_src, ok_yaml = _fixture("pydantic-ai__gemini-stream-text.txt")
    minute_src, minute = _fixture("mes-knowledge-base__gemini-429-per-minute.txt")
    day_src, day = _fixture("mes-knowledge-base__gemini-429-per-day.txt")
    busy_src, busy = _fixture("mes-knowledge-base__gemini-503-high-demand.txt")
    doc = yaml.safe_load(ok_yaml)
    ok_chunks = _events(doc["interactions"][0]["response"]["body"]["string"])
    s = _Session("gemini-3-flash", "/v1beta/models/gemini-3-flash:streamGenerateContent?alt=sse")
    sse = {"content-type": "text/event-stream"}
    err = {"content-type": "application/json; charset=UTF-8"}
    minute_body, day_body = _json_tail(minute).encode(), _json_tail(day).encode()
    t, prompt, served, window_start, in_window = 0.0, 1, 0, 0.0, 0
    while served < 20:
        if t - window_start >= 60.0:
            window_start, in_window = t, 0
        if in_window == 5:  # the sixth in this minute
            s.add(t, prompt, 429, err, [minute_body], first_byte_s=0.21)
            t += 0.21 + 58.22  # the client waits the RetryInfo it was given
            window_start, in_window = t, 0
            continue
        if prompt == 9 and not any(e.status == 503 for e in s.exchanges):
            s.add(t, prompt, 503, err, [_json_tail(busy).encode()], first_byte_s=1.6)
            t += 1.6 + 0.9  # a backoff
            continue
        s.add(t, prompt, 200, sse, ok_chunks, first_byte_s=0.46, gap_s=0.21)
        in_window += 1
        served += 1
        prompt += 1
        t += 0.46 + 0.21 * len(ok_chunks) + 5.5  # the next prompt a few seconds later
    s.add(t, prompt, 429, err, [day_body], first_byte_s=0.18)
    note = (
        "ASSEMBLED, not one real session: real Gemini answers (a streamed reply, the per-minute "
        "429 with RetryInfo 58s, a 503 'high demand', the per-day 429) put in a plausible order "
        "for a free tier of 5 requests a minute and 20 a day, with made-up times, digests and "
        "no request ids (Gemini sends none)."
    )
    return Recording(None, _header(note, [ok_src, minute_src, busy_src, day_src]), s.exchanges)


def anthropic_overload_storm() -> Recording:
    """Three prompts in an overload storm: 529s, a stream that breaks off with an error event
    after message_start, and answers once the storm passes."""
    ok_src, ok_text = _fixture("anthropic-sdk-python__stream-text.txt")
    mid_src, mid_text = _fixture("aibridge__anthropic-midstream-error.txt")
    ok_chunks = _events(ok_text)
    mid_chunks = _events(mid_text.split("-- streaming --\n", 1)[1])
    overloaded = (
        b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},'
        b'"request_id":"req_%s"}'
    )
    s = _Session("claude-sonnet-4-0", "/v1/messages")
    plan = [  # (seconds from the start, prompt, what came back)
        (0.0, 1, "529"),
        (0.9, 1, "529"),
        (2.6, 1, "mid"),
        (6.4, 1, "529"),
        (13.1, 1, "ok"),
        (21.0, 2, "529"),
        (22.2, 2, "529"),
        (24.9, 2, "ok"),
        (33.5, 3, "mid"),
        (34.4, 3, "ok"),
    ]
    for i, (at, prompt, kind) in enumerate(plan, start=1):
        rid = f"req_011CAssembled{i:02d}"
        if kind == "529":
            headers = {
                "content-type": "application/json",
                "request-id": rid,
                "x-should-retry": "true",
            }
            body = overloaded % rid.removeprefix("req_").encode()
            s.add(at, prompt, 529, headers, [body], first_byte_s=0.31)
        else:
            headers = {"content-type": "text/event-stream; charset=utf-8", "request-id": rid}
            chunks = ok_chunks if kind == "ok" else mid_chunks
            s.add(at, prompt, 200, headers, chunks, first_byte_s=0.62, gap_s=0.07)
    note = (
        "ASSEMBLED, not one real session: real Anthropic streams (a reply, and one that ends "
        "in an error event 'Overloaded' after message_start) with 529 overloaded_error answers "
        "between them, in a plausible order with made-up times, request ids and digests. The "
        "529 bodies follow Anthropic's documented error shape: the fixtures hold no recorded "
        "529 body."
    )
    return Recording(None, _header(note, [ok_src, mid_src]), s.exchanges)


def _header(note: str, sources: list[str]) -> dict[str, object]:
    return {
        "made_by": "scripts/assemble_recordings.py (assembled from real provider answers)",
        "created_at": "assembled",
        "record_bodies": False,
        "assembled": True,
        "note": note,
        "sources": sources,
    }


BUILDERS = {
    "gemini-free-tier": gemini_free_tier,
    "anthropic-overload-storm": anthropic_overload_storm,
}


def build(out: Path) -> list[Path]:
    """Write every recording into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    return [write_recording(out / f"{name}.nbrec", make()) for name, make in BUILDERS.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped files")
    args = parser.parse_args()
    if not args.check:
        for path in build(OUT):
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        differ = [p.name for p in build(Path(tmp)) if p.read_bytes() != (OUT / p.name).read_bytes()]
    for name in differ:
        print(f"{name} differs from what the script makes", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
