"""Security: keys only from the environment and never written anywhere; SQL only with bound
parameters; the app binds 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy.orm import Session

from judgekit import imports
from tests.browser import free_port
from tests.scripted_server import ScriptedServer, ok, status

ROOT = Path(__file__).resolve().parents[1]
FAKE_KEY = "sk-proj-JUDGEKIT-FAKE-KEY-7f3a9c"


def test_api_key_appears_in_no_row_log_export_or_error(engine, db_url, tmp_path):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    env = {**os.environ, "JUDGEKIT_DB_URL": db_url, "JK_FAKE_KEY": FAKE_KEY}
    script = [status(401, message=f"Incorrect API key provided: {FAKE_KEY}"),
              status(500, message=f"upstream said Bearer {FAKE_KEY}")]
    outputs = []
    with ScriptedServer(script, default=ok()) as srv:
        for args in (
            ["run", "--dataset", "demo", "--rubric", "demo", "--harness", "single", "--base-url", srv.base_url,
             "--model", "gpt-4o-mini", "--api-key-env", "JK_FAKE_KEY", "--limit", "5", "--name", "keyed",
             "--judge-kind", "openai", "--concurrency", "1"],
            ["resume", "keyed"],
            ["report", "compare", "keyed", "keyed", "--format", "json"],
            ["report", "runs", "--format", "json"],
            ["export-report", "--out", str(tmp_path / "report.html"), "--run", "keyed", "--no-human"],
            ["export-labels", "--dataset", "demo", "--out", str(tmp_path / "labels.csv")],
        ):
            proc = subprocess.run([sys.executable, "-m", "judgekit.cli", *args], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=120)
            outputs.append(proc.stdout + proc.stderr)
        sent = [r.headers.get("authorization") for r in srv.requests]
    assert sent and all(h == f"Bearer {FAKE_KEY}" for h in sent)  # it was used …
    assert any("401" in o or "Incorrect API key" in o or "keyed" in o for o in outputs)
    for text in outputs:  # … but is in no log line or error message
        assert FAKE_KEY not in text and "JUDGEKIT-FAKE-KEY" not in text
    for path in [*tmp_path.glob("*"), *Path(db_url.removeprefix("sqlite:///")).parent.glob("judgekit.sqlite*")]:
        if path.is_file():
            assert b"JUDGEKIT-FAKE-KEY" not in path.read_bytes(), path
    assert (tmp_path / "report.html").stat().st_size > 0


SQL_BY_STRING = re.compile(
    r"""(?<!st\.)\b(text|exec_driver_sql|execute|executemany)\(\s*f["']|"""
    r"""["'](SELECT|INSERT|UPDATE|DELETE)\b[^"']*["']\s*(%|\.format\()""",
    re.IGNORECASE,
)


def test_sql_pattern_catches_string_built_sql():
    assert SQL_BY_STRING.search('conn.execute(f"SELECT * FROM runs WHERE name = {name}")')
    assert SQL_BY_STRING.search("sa.text(f'DELETE FROM labels')")
    assert SQL_BY_STRING.search('cur.execute("SELECT * FROM t WHERE id = %s" % ident)')
    assert not SQL_BY_STRING.search('st.text(f"Example {ex.ext_id}")')
    assert not SQL_BY_STRING.search('conn.execute(text("SELECT 1 WHERE id = :id"), {"id": 3})')


def test_sql_is_only_built_with_bound_parameters():
    offenders = []
    for path in sorted((ROOT / "judgekit").rglob("*.py")) + sorted((ROOT / "pages").glob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), start=1):
            if SQL_BY_STRING.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert offenders == []


def listening_addresses(port: int) -> set[str]:
    """Local addresses in LISTEN state on ``port`` from /proc/net/tcp{,6}."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            addr, state = fields[1], fields[3]
            host_hex, port_hex = addr.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                if len(host_hex) == 8:
                    found.add(".".join(str(int(host_hex[i:i + 2], 16)) for i in (6, 4, 2, 0)))
                else:
                    found.add("::" if set(host_hex) == {"0"} else host_hex)
    return found


def test_app_binds_loopback_by_default(db_url):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "judgekit.cli", "app", "--port", str(port)], cwd=ROOT,
                            env={**os.environ, "JUDGEKIT_DB_URL": db_url},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not listening_addresses(port):
            time.sleep(0.2)
        assert listening_addresses(port) == {"127.0.0.1"}
    finally:
        proc.terminate()
        proc.wait(10)


def test_child_servers_get_no_keys_and_no_settings(monkeypatch):
    """The local judge's environment: enough to run (PATH, HOME, locale), no API key, no PORT/HOST."""
    from judgekit import config

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-passed-on")
    monkeypatch.setenv("PORT", "8600")
    monkeypatch.setenv("HOST", "0.0.0.0")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = config.child_env()
    assert env["PATH"] == os.environ["PATH"] and env["LC_ALL"] == "C.UTF-8"
    assert not {"OPENAI_API_KEY", "PORT", "HOST", "JUDGEKIT_DB_URL"} & set(env)
    assert "sk-test-never-passed-on" not in " ".join(env.values())
