"""Configuration in one place, read lazily so tests (and Streamlit's AppTest) can repoint it.

``JUDGEKIT_DB_URL`` — any SQLAlchemy URL; default ``sqlite:///<home>/db/judgekit.sqlite``.
``JUDGEKIT_HOME``   — the workspace folder holding ``db/``; default the current directory.
``JUDGEKIT_TEAM_FILE`` — who may sign in to a server bound beyond loopback; default ``<home>/team.toml``.
``JUDGEKIT_AUTH``   — the sign-in the dashboard requires: auto (default) | none | token | oidc.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
# app.py, pages/ and db/ sit at the top of a checkout; an installed wheel carries them in judgekit/resources/
# (pyproject.toml, force-include). A checkout has no resources/, so it always serves its own files.
SHIPPED_DIR = PACKAGE_DIR / "resources"
TOP_DIR = SHIPPED_DIR if (SHIPPED_DIR / "app.py").is_file() else REPO_DIR
APP_FILE = TOP_DIR / "app.py"
MIGRATIONS_DIR = TOP_DIR / "db" / "migrations"


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


def team_file(override: str | Path | None = None) -> Path:
    """The team file (members, roles, token hashes): an override, else ``JUDGEKIT_TEAM_FILE``, else
    ``<home>/team.toml``."""
    return Path(override or os.environ.get("JUDGEKIT_TEAM_FILE") or home() / "team.toml")


def auth_choice() -> str:
    """The sign-in the dashboard was asked for (``judgekit app --auth``); see :mod:`judgekit.auth`."""
    return os.environ.get("JUDGEKIT_AUTH") or "auto"


def app_command(host: str = "127.0.0.1", port: int = 8501, secrets_file: str | Path | None = None) -> list[str]:
    """The command that serves the dashboard (used by `judgekit app` and `make demo`)."""
    import sys

    # the settings of the checkout's .streamlit/config.toml, given here too: outside a checkout there is none
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP_FILE), "--server.address", host,
           "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "minimal"]
    if secrets_file:
        cmd += ["--secrets.files", str(Path(secrets_file).resolve())]
    return cmd


CHILD_ENV_KEEP = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
                  "SYSTEMROOT", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "VIRTUAL_ENV")
"""What a child server inherits of our environment (plus ``LC_*``): enough to run, nothing that configures it."""


def child_env(**extra: str) -> dict[str, str]:
    """A clean environment for a child server (the bundled local judge).

    Servers read their settings from the environment too, and ahead of their command line:
    llama-cpp-python's server takes ``PORT``, ``HOST``, ``MODEL``, ``N_CTX`` … from it, so ``make demo
    PORT=8600`` (which exports ``PORT``) moved the local judge onto the dashboard's port. Only the
    variables a process needs to run are passed on — no settings, and no API keys either.
    """
    env = {k: v for k, v in os.environ.items() if k in CHILD_ENV_KEEP or k.startswith("LC_")}
    return {**env, **extra}
