"""Shared fixtures: every test gets its own workspace folder and SQLite file (never a real workspace)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from judgekit import store

DATA = Path(__file__).parent / "data"


def pytest_generate_tests(metafunc):
    """A module that sets ``BACKENDS = ("sqlite", "postgresql")`` runs each test on both databases,
    except tests marked ``sqlite_only`` (they check SQLite's own settings or files)."""
    backends = getattr(metafunc.module, "BACKENDS", None)
    if backends and "backend" in metafunc.fixturenames:
        if metafunc.definition.get_closest_marker("sqlite_only"):
            backends = ("sqlite",)
        metafunc.parametrize("backend", backends, indirect=True)


@pytest.fixture
def backend(request) -> str:
    return getattr(request, "param", "sqlite")


@pytest.fixture(scope="session")
def postgres_server():
    from tests.pg import PostgresServer

    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def workspace(tmp_path, monkeypatch, backend, request) -> Path:
    """An empty workspace folder; JUDGEKIT_DB_URL points at a fresh SQLite file inside it — or at a
    fresh database on the session's PostgreSQL server for the ``postgresql`` backend."""
    monkeypatch.setenv("JUDGEKIT_HOME", str(tmp_path))
    if backend == "postgresql":
        url = request.getfixturevalue("postgres_server").new_database()
    else:
        url = f"sqlite:///{tmp_path / 'db' / 'judgekit.sqlite'}"
    monkeypatch.setenv("JUDGEKIT_DB_URL", url)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    store.dispose_engines()


@pytest.fixture
def db_url() -> str:
    return os.environ["JUDGEKIT_DB_URL"]


@pytest.fixture
def engine(db_url):
    return store.engine_for(db_url)


@pytest.fixture
def session(engine):
    with Session(engine) as s:
        yield s


class Cli:
    """Runs `judgekit …` in-process through typer's runner; returns (exit code, stdout, stderr)."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str):
        from judgekit.cli import app

        result = self.runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
        return result


@pytest.fixture
def cli() -> Cli:
    return Cli()


@pytest.fixture
def base_workspace(cli):
    """Dataset `base` (q-001..q-003) and rubric `support` (answers_question binary, safety 1–5 with K.O.)."""
    assert cli("import-dataset", DATA / "good" / "dataset.jsonl", "--name", "base").exit_code == 0
    assert cli("import-rubric", DATA / "good" / "rubric.yaml").exit_code == 0


def load_demo(engine, n_examples: int):
    """The demo workspace with ``n_examples`` answers in the test's database."""
    from judgekit import imports

    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=n_examples)
    return engine


@pytest.fixture
def demo(engine):
    """The demo workspace with 30 answers."""
    return load_demo(engine, 30)


def simulated_runs(engine, db_url: str, specs=("single", "split"), name="harness-{spec}-call") -> list[str]:
    """Runs of the simulated judge (one per harness spec) over the whole demo dataset, executed."""
    from judgekit import runner, simjudge
    from judgekit.harness import parse_harness

    srv = simjudge.start_in_thread(db_url, simjudge.SimParams())
    names = []
    try:
        for spec in specs:
            judge = runner.JudgeSpec(base_url=srv.base_url, model=simjudge.SIM_MODEL, kind="simulated")
            with Session(engine) as s, s.begin():
                runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness(spec), judge=judge,
                                  name=name.format(spec=spec))
            assert runner.run_sync(engine, name.format(spec=spec), concurrency=8).status == "done"
            names.append(name.format(spec=spec))
    finally:
        srv.stop()
    return names


def verdict_keys(engine, run_name: str) -> list[tuple[int, int]]:
    """The (example, criterion) pairs a run has verdicts for, sorted."""
    from sqlalchemy import select

    with Session(engine) as s:
        run = store.get_run(s, run_name)
        return sorted(s.execute(select(store.Verdict.example_id, store.Verdict.criterion_id)
                                .where(store.Verdict.run_id == run.id)).all())


def all_pairs(engine, run_name: str) -> list[tuple[int, int]]:
    """Every (example, criterion) pair a run should end with, sorted."""
    with Session(engine) as s:
        run = store.get_run(s, run_name)
        crits = [c.id for c in store.criterion_rows(s, run.rubric_id)]
        return sorted((e, c) for e in store.run_example_ids(s, run.id) for c in crits)
