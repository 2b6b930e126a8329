"""A real PostgreSQL server for the tests: Debian's binaries, 127.0.0.1, a temporary data directory.

Started once per test session (``initdb`` + ``pg_ctl``; as root it runs as the ``postgres`` user, since
PostgreSQL refuses to run as root); every test that asks for the PostgreSQL backend gets a fresh
database on it. `make test` installs the package when it is missing.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from tests.browser import free_port


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"PostgreSQL's {name} is not installed: `apt-get install postgresql` (make test does)")
    return found[-1]


class PostgresServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="judgekit-pg-"))
        self.data = self.dir / "data"
        self.as_root = os.geteuid() == 0

    def _run(self, *cmd: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        subprocess.run([*prefix, *cmd], check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> PostgresServer:
        if self.as_root:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--locale=C.UTF-8")
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off"
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "start")
        deadline = time.monotonic() + 30
        while subprocess.run([_bin("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                             capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError((self.dir / "log").read_text()[-2000:])
            time.sleep(0.1)
        return self

    def new_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL."""
        import psycopg

        name = f"jk_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # a generated identifier, not user input
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
