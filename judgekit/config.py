"""Configuration in one place, read lazily so tests (and Streamlit's AppTest) can repoint it.

``JUDGEKIT_DB_URL`` — any SQLAlchemy URL; default ``sqlite:///<home>/db/judgekit.sqlite``.
``JUDGEKIT_HOME``   — the workspace folder holding ``db/``; default the current directory.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
MIGRATIONS_DIR = REPO_DIR / "db" / "migrations"


def home() -> Path:
    return Path(os.environ.get("JUDGEKIT_HOME") or Path.cwd())


def db_url(override: str | None = None) -> str:
    """The database URL: an explicit override, else ``JUDGEKIT_DB_URL``, else the workspace SQLite file."""
    if override:
        return override
    env = os.environ.get("JUDGEKIT_DB_URL")
    if env:
        return env
    path = home() / "db" / "judgekit.sqlite"
    return f"sqlite:///{path}"


def app_command(host: str = "127.0.0.1", port: int = 8501) -> list[str]:
    """The command that serves the dashboard (used by `judgekit app` and `make demo`)."""
    import sys

    return [sys.executable, "-m", "streamlit", "run", str(REPO_DIR / "app.py"), "--server.address", host,
            "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"]
