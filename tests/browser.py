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
def streamlit_server(db_url: str, log_path: Path, extra_env: dict | None = None) -> Iterator[str]:
    """Serve app.py against ``db_url``; yields the base URL once the health endpoint answers."""
    port = free_port()
    env = {**os.environ, "JUDGEKIT_DB_URL": db_url, **(extra_env or {})}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.address", "127.0.0.1",
             "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"streamlit exited: {log_path.read_text()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.2)
            SERVERS[base] = proc
            yield base
        finally:
            SERVERS.pop(base, None)
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


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
