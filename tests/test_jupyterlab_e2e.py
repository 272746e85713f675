"""End to end: JupyterLab on 127.0.0.1, a notebook run in headless Chromium, the live widget.

A real JupyterLab server (no network: news, update checks and the PyPI extension manager are off,
and the page may only talk to 127.0.0.1) runs tests/notebooks/e2e.ipynb cell by cell, as a user
would with Shift+Enter. The agent runs in a background task (`agent.start`) against a mock server
that fails twice and then asks for a 30 s wait; the test watches the widget's status line change
while the run is in progress, runs another cell meanwhile (the kernel stays responsive), presses
the Stop button, and checks the run ended cancelled: in the widget and in the next cell, where
awaiting the handle raises `Aborted`. Then `%%agent` shows its widget under its own cell.

Chromium is Debian's (/usr/bin/chromium), never a Playwright download: when it is missing the
test fails and says so, because CI installs it. The screenshot goes to tests/artifacts/.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NOTEBOOK = Path(__file__).parent / "notebooks" / "e2e.ipynb"
ARTIFACTS = Path(__file__).parent / "artifacts"
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_text(locator: Any, ok: Callable[[str], bool], timeout: float) -> str:
    """Poll a locator's text (the timeline redraws, so element handles go stale)."""
    deadline = time.monotonic() + timeout
    while True:
        text = str(locator.inner_text()).strip()
        if ok(text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"still {text!r} after {timeout} s")
        time.sleep(0.05)


def listening_on(port: int) -> set[str]:
    """The local addresses with a socket listening on `port` (Linux: /proc/net/tcp, tcp6)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for row in f.read().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                address, _, hex_port = local.partition(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    found.add(address)
    return found


class Lab:
    def __init__(self, url: str, token: str, root: Path, proc: subprocess.Popen[bytes]) -> None:
        self.url, self.token, self.root, self.proc = url, token, root, proc

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server and everything it started (kernels), whatever happened."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):  # kernels that outlived the server
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    root = tmp_path / "root"
    root.mkdir()
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    assert all(not c.get("outputs") for c in cells), "commit the fixture without outputs"
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)  # the committed file is never written to
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    # Fresh config, data and runtime folders. The data *path* still holds sys.prefix's
    # share/jupyter, where the installed lab extensions (ipywidgets, anywidget) and kernels are.
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        env[name] = str(tmp_path / name.lower())
    env.pop("JUPYTER_PATH", None)
    # No "get notified about Jupyter news?" toast (nothing is fetched anyway: news_url=None).
    labconfig = tmp_path / "jupyter_config_dir" / "labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    assert (Path(sys.prefix) / "share/jupyter/labextensions/anywidget").is_dir()
    log = (tmp_path / "lab.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--ServerApp.ip={HOST}",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            *(["--allow-root"] if os.geteuid() == 0 else []),  # CI containers run as root
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so teardown can end it all
    )
    server = Lab(f"http://{HOST}:{port}", token, root, proc)
    try:
        deadline = time.monotonic() + 60  # a first start writes settings and workspaces
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"JupyterLab exited:\n{(tmp_path / 'lab.log').read_text()}")
            try:
                server.get("/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"JupyterLab did not start:\n{(tmp_path / 'lab.log').read_text()}"
                    ) from None
                time.sleep(0.25)
        if Path("/proc/net/tcp").exists():
            assert listening_on(port) == {"0100007F"}, listening_on(port)  # 127.0.0.1 only
        yield server
    finally:
        stop(proc)
        log.close()
        print((tmp_path / "lab.log").read_text()[-3000:])


@pytest.fixture
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); "
            "the JupyterLab end-to-end test needs it and never downloads a browser",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # launch() gives each run a fresh temporary --user-data-dir (and deletes it after)
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def test_widget_updates_live_and_stop_cancels_the_background_run(lab: Lab, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    try:
        drive(lab, page)
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab-failure.png"), full_page=True)
        raise
    finally:
        context.close()


def drive(lab: Lab, page: Any) -> None:
    started = time.monotonic()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(30_000)
    page.goto(f"{lab.url}/lab/tree/{NOTEBOOK.name}?token={lab.token}")

    page.wait_for_selector(".jp-Notebook .jp-Cell")
    # the kernel has started and is connected: the status bar says so
    page.locator(".jp-StatusBar-TextItem", has_text="| Idle").wait_for(timeout=60_000)
    cells = page.locator(".jp-Notebook .jp-Cell")

    def run(index: int) -> Any:
        cell = cells.nth(index)
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        return cell

    def wait_done(cell: Any, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            prompt = cell.locator(".jp-InputArea-prompt").inner_text()
            if prompt.strip() not in ("[*]:", "[ ]:", ""):
                return
            time.sleep(0.1)
        raise AssertionError(f"cell did not finish: {cell.inner_text()}")

    def output(cell: Any) -> str:
        return str(cell.locator(".jp-OutputArea").inner_text())

    setup = run(0)
    wait_done(setup)
    assert "ready" in output(setup), output(setup)

    start = run(1)
    wait_done(start, 10)  # start() returns at once: the run goes on in the background
    widget = start.locator(".nb-root")
    widget.wait_for(timeout=30_000)
    status = start.locator(".nb-status")

    seen: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = status.inner_text().strip()
        if not seen or seen[-1] != text:
            seen.append(text)
        if "asked to wait" in text:
            break
        time.sleep(0.05)
    print("status line while running:", seen)
    assert any("retrying in" in s for s in seen), seen
    assert "asked to wait 30" in seen[-1], seen
    # The status line moved with the run, pushed from the kernel attempt after attempt (the
    # countdowns between them tick in the browser).
    numbers = {int(m.group(1)) for s in seen if (m := re.search(r"attempt (\d)/6", s))}
    assert {2, 3, 4} <= numbers, seen
    assert any(s.startswith("requesting demo (attempt 3/6)") for s in seen), seen
    assert start.locator(".nb-bar.nb-error").count() >= 3

    # The kernel is free while the agent waits: another cell runs and answers at once.
    responsive = run(2)
    wait_done(responsive, 10)
    assert "responsive: 3 attempts, done=False" in output(responsive), output(responsive)

    ARTIFACTS.mkdir(exist_ok=True)
    stop_button = start.locator("button.jupyter-button", has_text="Stop")
    stop_button.click()
    wait_text(status, lambda text: text.startswith("cancelled"), 10)
    assert start.locator("button.jupyter-button", has_text="Stop").count() == 0
    assert start.locator("button.jupyter-button", has_text="Finished").count() == 1
    start.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "jupyterlab.png"), full_page=True)

    after = run(3)
    wait_done(after, 10)
    text = output(after)
    assert "done=True cancelled=True" in text, text
    assert "Aborted: the run was cancelled" in text, text
    assert "history unchanged: True" in text, text

    # %%agent: the widget appears under its cell and the run finishes there.
    run(4)
    magic = run(5)
    magic.locator(".nb-root").wait_for(timeout=20_000)
    wait_text(magic.locator(".nb-status"), lambda text: text.startswith("done"), 20)
    assert "12*12 = 144" in magic.locator(".nb-root").inner_text()
    magic.screenshot(path=str(ARTIFACTS / "jupyterlab-magic.png"))

    assert errors == [], errors
    remote = [u for u in requests if not u.startswith((f"{lab.url}/", "data:", "blob:"))]
    assert remote == [], remote  # nothing but the local server
    assert time.monotonic() - started < 90
