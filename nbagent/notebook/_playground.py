"""`playground()`: move the retry policy's sliders, see what they do to a crowd of clients.

A teaching tool for notebook 3. On the left: the policy (max attempts, initial delay, cap,
multiplier, jitter), the number of clients and the server they crowd (one request at a time, or
a token bucket that does or does not say how long to wait). On the right: the policy's envelope
(the range each wait is drawn from) and the contention simulation's outcome: how many calls the
server had to handle, when the last client got through, how many gave up, and a small timeline.

Everything runs in virtual time (`nbagent.simulate`), so a recomputation takes a fraction of a
second. Slider moves arrive in bursts (a drag sends dozens), so recomputing waits until the
controls have been still for `debounce` seconds, on the kernel's event loop; without a running
loop (a plain script, a test) it recomputes at once.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import html
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets
import pandas as pd

from .._core._retry import RetryPolicy
from .._core._words import counted
from .._palette import COLORS, SWATCHES
from ..recording import Recording, read_recording
from ..simulate import ContentionJitter, simulate_contention, what_if

_JITTERS = ("full", "equal", "decorrelated", "none")
_SERVERS = {
    "one request at a time": ("single", False),
    "token bucket (10/s), 429 without Retry-After": ("token_bucket", False),
    "token bucket (10/s), 429 with Retry-After": ("token_bucket", True),
}


@dataclass(frozen=True)
class PlaygroundResult:
    """What one setting of the controls gave: the numbers shown, and the simulated frame."""

    calls: int
    failed_calls: int
    makespan_s: float
    gave_up: int
    clients: int
    requests: int  # the clients' requests: one each, or with a recorded server all it holds
    waited_s: float
    frame: pd.DataFrame


def _control(kind: Any, name: str, description: str, **options: Any) -> Any:
    """A labelled control of the left column; `nb-play-<name>` lets a browser test find it."""
    if kind is not ipywidgets.Dropdown:
        options["continuous_update"] = True  # a drag reports as it goes (and is debounced)
    widget = kind(
        description=description,
        style={"description_width": "110px"},
        layout=ipywidgets.Layout(width="400px"),
        **options,
    )
    widget.add_class(f"nb-play-{name}")
    return widget


def _seconds(name: str, description: str, value: float, lowest: float, highest: float) -> Any:
    """A slider over seconds on a log scale: 0.01 s and 3 s both within a finger's reach."""
    return _control(
        ipywidgets.FloatLogSlider,
        name,
        description,
        value=value,
        base=10,
        min=math.log10(lowest),
        max=math.log10(highest),
        step=0.05,
    )


class Playground(ipywidgets.HBox):  # type: ignore[misc]
    """The controls and what they produce; `result` is the latest `PlaygroundResult`.

    Args:
        max_attempts: The policy's `max_attempts`.
        initial_delay: The policy's `initial_delay`, in seconds.
        max_delay: The policy's `max_delay`, in seconds.
        multiplier: The policy's `multiplier`.
        jitter: The jitter strategy ("full", "equal", "decorrelated", "none").
        clients: How many clients race the server.
        server: Which server model they race (a label of the server menu).
        seed: Seeds the simulation.
        debounce: Seconds to wait after a slider moves before recomputing.
        recording: A `Recording` or its path: adds the server it shows as a choice.
    """

    def __init__(
        self,
        *,
        max_attempts: int = 6,
        initial_delay: float = 0.1,
        max_delay: float = 10.0,
        multiplier: float = 2.0,
        jitter: str = "full",
        clients: int = 20,
        server: str = "one request at a time",
        seed: int = 0,
        debounce: float = 0.15,
        recording: Recording | str | Path | None = None,
    ) -> None:
        self.seed = seed
        # recording=: a third kind of server, the one a recording shows (nbagent.simulate.what_if)
        self.recording = (
            recording
            if recording is None or isinstance(recording, Recording)
            else read_recording(recording)
        )
        self.debounce = debounce
        self.max_attempts = _control(
            ipywidgets.IntSlider, "attempts", "max attempts", value=max_attempts, min=1, max=12
        )
        self.initial_delay = _seconds("initial", "initial delay (s)", initial_delay, 0.01, 3.0)
        self.max_delay = _seconds("cap", "cap (s)", max_delay, 0.1, 100.0)
        self.multiplier = _control(
            ipywidgets.FloatSlider, "multiplier", "multiplier", value=multiplier, min=1, max=4
        )
        self.multiplier.step = 0.1
        self.jitter = _control(ipywidgets.Dropdown, "jitter", "jitter", options=_JITTERS)
        self.jitter.value = jitter
        self.clients = _control(
            ipywidgets.IntSlider, "clients", "clients", value=clients, min=1, max=100
        )
        servers = list(_SERVERS)
        if self.recording is not None:
            path = self.recording.path  # the choice is named after the recording's file
            servers.append(f"the server of the recording {path.stem if path else 'a recording'}")
            if server == "one request at a time":
                server = servers[-1]
        self.server = _control(ipywidgets.Dropdown, "server", "server", options=servers)
        self.server.value = server
        self.numbers = ipywidgets.HTML()
        self.numbers.add_class("nb-play-numbers")
        self.envelope = _Picture()
        self.timeline = _Picture()
        controls = [
            self.max_attempts,
            self.initial_delay,
            self.max_delay,
            self.multiplier,
            self.jitter,
            self.clients,
            self.server,
        ]
        self._timer: asyncio.TimerHandle | None = None
        self.result: PlaygroundResult | None = None
        for control in controls:
            control.observe(self._changed, names="value")
        super().__init__(
            children=[
                ipywidgets.VBox(
                    controls, layout=ipywidgets.Layout(width="420px", min_width="420px")
                ),
                ipywidgets.VBox(
                    [
                        self.numbers,
                        self.envelope.view,
                        self.timeline.view,
                        ipywidgets.HTML(_legend_html()),
                        _SliderNames(),
                    ],
                    # not a scrolling box: one the keyboard could not reach (WCAG 2.1.1)
                    layout=ipywidgets.Layout(overflow="visible", width="450px"),
                ),
            ]
        )
        self.add_class("nb-playground")
        self.recompute()

    # -- when to recompute ------------------------------------------------------------------

    def _changed(self, _change: object) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or self.debounce <= 0:
            self.recompute()
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(self.debounce, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self.recompute()

    # -- what to show -----------------------------------------------------------------------

    def policy(self) -> RetryPolicy:
        """The policy the controls describe ("decorrelated" draws like "full" in the policy).

        Returns:
            The `RetryPolicy`.
        """
        jitter = self._jitter()
        return RetryPolicy(
            max_attempts=int(self.max_attempts.value),
            initial_delay=float(self.initial_delay.value),
            max_delay=float(self.max_delay.value),
            multiplier=float(self.multiplier.value),
            jitter="full" if jitter == "decorrelated" else jitter,
            seed=self.seed,
        )

    def _jitter(self) -> ContentionJitter:
        """The jitter strategy chosen ("none": None, plain exponential backoff)."""
        return None if self.jitter.value == "none" else self.jitter.value

    def recompute(self) -> PlaygroundResult:
        """Simulate the current setting and redraw; returns (and keeps) the result.

        Returns:
            The new `PlaygroundResult`.
        """
        policy = self.policy()
        if self.server.value not in _SERVERS and self.recording is not None:
            clients = int(self.clients.value)
            frame = what_if(self.recording, policy, clients, seed=self.seed).attempts
        else:
            kind, retry_after = _SERVERS[self.server.value]
            frame = simulate_contention(
                int(self.clients.value),
                self._jitter(),
                "single" if kind == "single" else "token_bucket",
                policy=policy,
                seed=self.seed,
                send_retry_after=retry_after,
            )
        # a run is one request: the contention simulation's clients send one each, a recorded
        # server's send every request the recording holds ("client-01/003": client 1's third)
        last = frame.groupby("run_id", observed=True).tail(1)
        result = PlaygroundResult(
            calls=len(frame),
            failed_calls=int((frame["outcome"] == "error").sum()),
            makespan_s=float(frame["ended_at"].max()) if len(frame) else 0.0,
            gave_up=int((last["outcome"] != "ok").sum()),
            clients=int(self.clients.value),
            requests=len(last),
            waited_s=float(frame["delay_s"].sum()),
            frame=frame,
        )
        from ..analysis._waits import policy_label

        label = policy_label(policy).replace("jitter 'full'", f"jitter {self.jitter.value!r}")
        self.envelope.show(
            _envelope_png(policy, self.jitter.value, label),
            f"The range each wait is drawn from, retry by retry, for {label}.",
        )
        crowd = _crowd(result)
        self.timeline.show(
            _timeline_png(frame, crowd),
            f"Timeline of {crowd}: {result.calls:,} calls ({result.failed_calls:,} failed), "
            f"gave up: {_gave_up(result)}, the last done at {result.makespan_s:.2f} s.",
        )
        self.numbers.value = _numbers_html(result)
        self.result = result
        return result


class _SliderNames(anywidget.AnyWidget):
    """Names the playground's slider handles after their labels, for screen readers.

    ipywidgets draws a slider's handle as a `role="slider"` element with no accessible name
    (its description is a separate label), so a screen reader says "slider, 3" and no more.
    This invisible helper gives each handle its label's words as `aria-label`, also when
    ipywidgets redraws them."""

    _esm = Path(__file__).parent / "slider_names.js"


class _Picture:
    """A PNG in the page with words for readers who cannot see it: `ipywidgets.Image` has no
    alternative text, so the picture is an <img alt=...> in an HTML widget. `value` keeps the
    PNG's bytes."""

    def __init__(self) -> None:
        self.value = b""
        self.alt = ""
        self.view = ipywidgets.HTML(layout=ipywidgets.Layout(width="448px"))

    def show(self, png: bytes, alt: str) -> None:
        self.value, self.alt = png, alt
        data = base64.b64encode(png).decode("ascii")
        self.view.value = (
            f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}" '
            'style="width:448px;display:block">'
        )


def _crowd(r: PlaygroundResult) -> str:
    """Who sent the calls: "20 clients", or with a recorded server "1 client, 3 requests"."""
    clients = counted(r.clients, "client")
    return clients if r.requests == r.clients else f"{clients}, {counted(r.requests, 'request')}"


def _gave_up(r: PlaygroundResult) -> str:
    """Of what the failures are counted: the clients, or the requests when they are more."""
    whole = "" if r.requests == r.clients else " requests"
    return f"{r.gave_up} of {r.requests}{whole}"


def _numbers_html(r: PlaygroundResult) -> str:
    def item(name: str, label: str, value: str) -> str:
        return (
            f"<span style='margin-right:16px;white-space:nowrap'>{html.escape(label)} "
            f"<b class='nb-play-{name}' style='font-size:15px'>{html.escape(value)}</b></span>"
        )

    per_client = r.calls / r.clients if r.clients else 0.0
    return (
        "<div style='font-family:var(--jp-ui-font-family,sans-serif);line-height:1.8'>"
        + item("calls", "calls", f"{r.calls:,}")
        + item("per-client", "per client", f"{per_client:.1f}")
        + item("makespan", "last done at", f"{r.makespan_s:.2f} s")
        + item("gave-up", "gave up", _gave_up(r))
        + item("waited", "waited in total", f"{r.waited_s:.1f} s")
        + "</div>"
    )


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, pil_kwargs={"compress_level": 1})
    return buf.getvalue()


@functools.lru_cache(maxsize=64)
def _envelope_png(policy: RetryPolicy, jitter: str, label: str) -> bytes:
    """The policy's envelope, titled `label`; cached, since moving the clients or server leaves
    it as it is."""
    from matplotlib.figure import Figure

    from ..analysis._figures import line, style_axes
    from ..analysis._waits import draw_envelope

    # fixed margins: a figure that lays itself out (constrained layout) costs far more to draw
    fig = Figure(figsize=(5.6, 2.7))
    ax = fig.add_axes((0.12, 0.17, 0.85, 0.72))
    style_axes(ax)
    retries = policy.max_attempts - 1
    if retries < 1:
        ax.text(0.5, 0.5, "one attempt: no retry, so no wait", ha="center", va="center")
        ax.set_axis_off()
        return _png(fig)
    handles = draw_envelope(ax, policy, retries)
    if jitter == "decorrelated":  # sleep = min(cap, uniform(base, 3 * previous))
        ns = list(range(1, retries + 1))
        top = [min(policy.max_delay, policy.initial_delay * 3**n) for n in ns]
        ax.plot(ns, top, color=COLORS["paced"], linestyle="-.", linewidth=1)
        handles.append(line(COLORS["paced"], "-.", "decorrelated: the highest"))
    ax.legend(handles=handles, loc="upper left", fontsize=9, frameon=False)
    ax.set_title(label, fontsize=9, loc="left")
    return _png(fig)


def _timeline_png(frame: pd.DataFrame, crowd: str) -> bytes:
    from matplotlib.figure import Figure

    from ..analysis._timeline import draw_timeline

    fig = Figure(figsize=(5.6, 2.9))
    ax = fig.add_axes((0.18, 0.2, 0.79, 0.7))
    runs = frame["run_id"].nunique()  # a row each: a client's request
    shown = min(runs, 25)
    draw_timeline(ax, frame, max_groups=shown, lane_height=2.0 / (shown * 1.5))
    more = f", the first {shown} rows drawn" if runs > shown else ""
    ax.set_title(f"{crowd}{more}: every call and wait", fontsize=9, loc="left")
    ax.set_xlabel("seconds from the start (// : a stretch drawn shorter)")
    return _png(fig)


def _legend_html() -> str:
    """The timeline's legend in HTML (the widget's words and colours; free to draw)."""
    items = []
    for key in ("ok", "failed", "backoff", "retry_after"):
        swatch = SWATCHES[key]
        if swatch.hatch:
            paint = f"repeating-linear-gradient(45deg,{swatch.face} 0 2px,transparent 2px 6px)"
            border = f"1px dashed {swatch.edge}"
        elif swatch.mark:  # crossed out, as the bars are
            cross = "rgba(255,255,255,.45) 0 1px,transparent 1px 4px"
            paint = (
                f"repeating-linear-gradient(45deg,{cross}),"
                f"repeating-linear-gradient(-45deg,{cross}),{swatch.face}"
            )
            border = f"1px solid {swatch.edge}"
        else:
            paint, border = swatch.face, f"1px solid {swatch.edge}"
        box = f"display:inline-block;width:14px;height:10px;margin-right:4px;background:{paint}"
        items.append(
            f"<span style='margin-right:14px;font-size:12px'><i style='{box};border:{border}'>"
            f"</i>{html.escape(swatch.word)}</span>"
        )
    return "<div style='margin-left:100px'>" + "".join(items) + "</div>"


def playground(**settings: Any) -> Playground:
    """The policy playground: sliders for a `RetryPolicy` and a crowd of clients, and what they
    produce, recomputed as the sliders move (see `Playground` for the settings).
    `recording=` (a path or a `Recording`) adds the server that recording shows as a choice.

    Args:
        **settings: The `Playground` settings to start from.

    Returns:
        The playground, displayed as the cell's value.
    """
    return Playground(**settings)
