"""Shared by the browser end-to-end tests (JupyterLab 4, Notebook 7): server, browser, scenario.

`serve` starts a Jupyter server (JupyterLab or Notebook 7) on 127.0.0.1 with a random port and
token and fresh config, data and runtime folders, with nothing fetched from the network (news,
update checks and the PyPI extension manager are off), and always ends it and its kernels.
`launch_chromium` is Debian's /usr/bin/chromium, never a Playwright download: when it is missing
the test fails and says so, because CI installs it. `drive` runs tests/notebooks/e2e.ipynb cell by
cell with Shift+Enter, as a user would, and checks the live widget; both front ends build their
notebooks from the same JupyterLab components, so only the URL and the kernel-ready check differ.
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
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.axe import violations

from nbagent._axis import _SLIVER as SLIVER

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
# The jupyterlab server extension is loaded by Notebook 7 as well, so these apply to both.
NO_NETWORK = [
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
]


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


class Server:
    def __init__(self, url: str, token: str, root: Path, proc: subprocess.Popen[bytes]) -> None:
        self.url, self.token, self.root, self.proc = url, token, root, proc

    def get(self, path: str, *, attempts: int = 20) -> Any:
        """GET a JSON API path. jupyter_server answers 500 now and then while a kernel is
        starting (a race inside it, seen on /api/kernels): such an answer is asked again."""
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"token {self.token}"}
        )
        for attempt in range(attempts):
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                exc.close()
                if exc.code < 500 or attempt == attempts - 1:
                    raise
                time.sleep(0.1)
        raise AssertionError("unreachable")


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


def serve(tmp_path: Path, module: str, name: str) -> Iterator[Server]:
    """`python -m <module>` (jupyterlab, notebook) serving a copy of e2e.ipynb; for fixtures."""
    root = tmp_path / "root"
    root.mkdir()
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    assert all(not c.get("outputs") for c in cells), "commit the fixture without outputs"
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)  # the committed file is never written to
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    # Fresh config, data and runtime folders. The data *path* still holds sys.prefix's
    # share/jupyter, where the installed lab extensions (ipywidgets, anywidget) and kernels are.
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        env[var] = str(tmp_path / var.lower())
    env.pop("JUPYTER_PATH", None)
    # No "get notified about Jupyter news?" toast (nothing is fetched anyway: news_url=None).
    labconfig = tmp_path / "jupyter_config_dir" / "labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    assert (Path(sys.prefix) / "share/jupyter/labextensions/anywidget").is_dir()
    log_path = tmp_path / f"{module}.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            module,
            "--no-browser",
            f"--ServerApp.ip={HOST}",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            *NO_NETWORK,
            *(["--allow-root"] if os.geteuid() == 0 else []),  # CI containers run as root
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so teardown can end it all
    )
    server = Server(f"http://{HOST}:{port}", token, root, proc)
    try:
        deadline = time.monotonic() + 60  # a first start writes settings and workspaces
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited:\n{log_path.read_text()}")
            try:
                server.get("/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{name} did not start:\n{log_path.read_text()}") from None
                time.sleep(0.25)
        if Path("/proc/net/tcp").exists():
            assert listening_on(port) == {"0100007F"}, listening_on(port)  # 127.0.0.1 only
        yield server
    finally:
        stop(proc)
        log.close()
        print(log_path.read_text()[-3000:])


def launch_chromium(what: str) -> Iterator[Any]:
    """Debian's headless Chromium under Playwright; for fixtures. Missing: the test fails."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); "
            f"the {what} end-to-end test needs it and never downloads a browser",
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


def in_page(browser: Any, name: str, steps: Callable[[Any], None]) -> None:
    """Run `steps(page)` in a fresh page; on failure, save tests/artifacts/<name>-failure.png."""
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    try:
        steps(page)
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}-failure.png"), full_page=True)
        raise
    finally:
        context.close()


def use_theme(page: Any, name: str) -> None:
    """Switch the front end's theme from its Settings menu, as a reader would, and wait until
    it took effect ("JupyterLab Light" or "JupyterLab Dark")."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{name}$")).click()
    light = "false" if "Dark" in name else "true"
    page.locator(f'body[data-jp-theme-light="{light}"][data-jp-theme-name="{name}"]').wait_for(
        state="attached"  # the body has no box of its own: JupyterLab's shell is positioned
    )
    page.keyboard.press("Escape")  # no menu left open


def accessible_in_both_themes(page: Any, include: str) -> None:
    """axe-core finds no WCAG 2.1 A/AA violation in `include`, in the light and the dark
    theme (the page is left in the light one)."""
    found = violations(page, include)
    assert found == [], f"light theme: {found}"
    use_theme(page, "JupyterLab Dark")
    try:
        found = violations(page, include)
        assert found == [], f"dark theme: {found}"
    finally:
        use_theme(page, "JupyterLab Light")


def drive(
    server: Server,
    page: Any,
    url: str,
    kernel_ready: Callable[[Any], None],
    name: str,
    known_load_error: Callable[[str], bool] = lambda error: False,
) -> float:
    """The e2e.ipynb scenario at `url`; screenshots <name>.png and <name>-magic.png; seconds.

    Any uncaught error in the page fails the test, except those `known_load_error` accepts that
    happen while the page loads (before `kernel_ready` returns): the front end's own.
    """
    started = time.monotonic()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.on("pageerror", lambda exc: errors.append(f"{exc}\n{exc.stack}"))
    page.set_default_timeout(30_000)
    page.goto(url)

    page.wait_for_selector(".jp-Notebook .jp-Cell")
    kernel_ready(page)
    for error in [e for e in errors if known_load_error(e)]:
        print("known front-end error while the page loaded:", error)
        errors.remove(error)
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
    widget.wait_for(timeout=30_000)  # the anywidget front end loaded and rendered
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
    waiting_since = time.monotonic()
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
    answer = output(responsive)
    assert "responsive: 3 attempts, done=False" in answer, answer
    # Stop is pressed once the 30 s wait has run long enough that, by the widget's rule
    # (nbagent._axis.picture_axis), its cut part must be drawn shorter: the picture's span must
    # make the typical attempt a sliver. On a loaded machine attempts are slower, so the wait
    # needed is longer; an attempt too slow for the 30 s to do it fails here, not at random.
    median = float(re.search(r"median attempt ([\d.]+) s", answer).group(1))  # type: ignore[union-attr]
    needed = 1.25 * median / SLIVER
    assert needed < 25, f"the demo's attempts took {median:.3f} s (median) on loopback"
    print(
        f"median attempt {median:.3f} s: Stop pressed no sooner than {needed:.1f} s into the wait"
    )
    time.sleep(max(0.0, waiting_since + needed - time.monotonic()))

    ARTIFACTS.mkdir(exist_ok=True)
    stop_button = start.locator("button.jupyter-button", has_text="Stop")
    stop_button.click()
    wait_text(status, lambda text: text.startswith("cancelled"), 10)
    assert start.locator("button.jupyter-button", has_text="Stop").count() == 0
    assert start.locator("button.jupyter-button", has_text="Finished").count() == 1
    # the 30 s wait the run was cut in is drawn shorter, and marked as on the PNGs
    assert start.locator(".nb-axis .nb-break").count() >= 1
    accessible_in_both_themes(page, ".jp-OutputArea-output:has(.nb-root)")
    start.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

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
    magic.screenshot(path=str(ARTIFACTS / f"{name}-magic.png"))

    assert errors == [], errors
    remote = [u for u in requests if not u.startswith((f"{server.url}/", "data:", "blob:"))]
    assert remote == [], remote  # nothing but the local server
    return time.monotonic() - started
