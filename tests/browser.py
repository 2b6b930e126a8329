"""Real-browser plumbing: `streamlit run app.py` on 127.0.0.1 and a free port, and Debian's Chromium.

Used by the browser tests; Playwright drives /usr/bin/chromium (no downloaded browser).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


SERVERS: dict[str, subprocess.Popen] = {}  # base URL → the streamlit process serving it


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving(cmd: list[str], env: dict, log_path: Path, base: str, cwd: Path = ROOT) -> Iterator[subprocess.Popen]:
    """Run a server command in ``cwd``; yields the process once ``base``'s Streamlit health endpoint answers."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180  # start-up on a crowded machine, not a performance bound
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited: {log_path.read_text()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.2)
            SERVERS[base] = proc
            yield proc
        finally:
            SERVERS.pop(base, None)
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextlib.contextmanager
def streamlit_server(db_url: str, log_path: Path, extra_env: dict | None = None) -> Iterator[str]:
    """Serve app.py against ``db_url``; yields the base URL once the health endpoint answers."""
    port = free_port()
    env = {**os.environ, "JUDGEKIT_DB_URL": db_url, **(extra_env or {})}
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.address", "127.0.0.1",
           "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    base = f"http://127.0.0.1:{port}"
    with serving(cmd, env, log_path, base):
        yield base


@contextlib.contextmanager
def judgekit_app(db_url: str, log_path: Path, *args: str, port: int | None = None,
                 extra_env: dict | None = None) -> Iterator[str]:
    """`judgekit app --port P ARGS…` (the launcher users run, with its sign-in rules) on 127.0.0.1 unless
    ARGS pass --host; yields the base URL (via 127.0.0.1) once the health endpoint answers."""
    port = port or free_port()
    env = {**os.environ, "JUDGEKIT_DB_URL": db_url, **(extra_env or {})}
    cmd = [sys.executable, "-m", "judgekit.cli", "app", "--port", str(port), *args]
    base = f"http://127.0.0.1:{port}"
    with serving(cmd, env, log_path, base):
        yield base


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 2400) -> Iterator:
    """A Playwright page in Debian's Chromium; a tall viewport so screenshots hold the whole page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(30_000)
            yield page
        finally:
            browser.close()


def wait_for_app(page) -> None:
    """Wait until Streamlit has finished the current script run."""
    page.wait_for_selector("[data-testid='stApp']")
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText.includes('Running')",
        timeout=30_000,
    )


def goto(page, link: str, heading: str) -> None:
    """Follow the menu link ``link`` and wait for the page's ``heading`` and the end of its script run."""
    page.get_by_role("link", name=link).first.click()
    page.get_by_role("heading", name=heading).first.wait_for()
    wait_for_app(page)


def settle(page, quiet_s: float = 1.5, timeout_s: float = 90.0) -> None:
    """Wait until the app is idle: no script running and no placeholder (skeleton) left, for ``quiet_s``."""
    deadline = time.monotonic() + timeout_s
    calm_since = None
    while time.monotonic() < deadline:
        try:  # read without waiting: during a navigation there may be no app yet (that is "busy" too)
            busy = page.evaluate("""() => { const app = document.querySelector('[data-testid="stApp"]');
                return !app || app.getAttribute('data-test-script-state') !== 'notRunning'
                    || !!document.querySelector('[data-testid="stSkeleton"]'); }""")
        except Exception:  # noqa: BLE001 - the page is between documents
            busy = True
        if busy:
            calm_since = None
        elif calm_since is None:
            calm_since = time.monotonic()
        elif time.monotonic() - calm_since >= quiet_s:
            return
        time.sleep(0.25)
    raise AssertionError("the app did not settle")


def screenshot(page, name: str, tmp_path: Path, **kwargs) -> Path:
    """Save a screenshot as ``name``.png: into $JUDGEKIT_SCREENSHOTS_DIR when set (the README's pictures,
    docs/screenshots), else into the test's tmp folder."""
    folder = Path(os.environ.get("JUDGEKIT_SCREENSHOTS_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), **kwargs)
    return path


def choose_option(page, box_label: str, option: str, attempts: int = 5) -> None:
    """Pick ``option`` in the select box labelled ``box_label``. A script run that finishes while the list is
    open redraws the box and closes the list, so open it again until the option shows."""
    box = page.locator("[data-testid=stSelectbox]").filter(has_text=box_label)
    for _ in range(attempts):
        box.click()
        choice = page.get_by_role("option", name=option, exact=True)
        try:
            choice.wait_for(state="visible", timeout=3_000)
        except Exception:  # noqa: BLE001 - the list closed under a rerun: open it again
            page.keyboard.press("Escape")
            continue
        choice.click()
        return
    raise AssertionError(f"option {option!r} never showed in {box_label!r}")


def fill_field(page, field, value: str, attempts: int = 5) -> None:
    """Type ``value`` into the input ``field`` and commit it (Enter), then wait until the app has finished
    the rerun and the field still holds it. A value typed while an earlier rerun is in flight can be
    overwritten when that rerun's reply arrives, so type it again until it sticks."""
    for _ in range(attempts):
        field.fill(value)
        field.press("Enter")
        wait_for_app(page)
        settle(page, quiet_s=0.5)
        if field.input_value() == value:
            return
    raise AssertionError(f"the field never kept {value!r} (it shows {field.input_value()!r})")
