"""Shared fixtures: every test gets its own workspace folder and SQLite file (never a real workspace)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from judgekit import store

DATA = Path(__file__).parent / "data"
DEMO_KEYS = [
    "answers_question",
    "cites_source",
    "grounded",
    "no_fabrication",
    "refuses_when_unanswerable",
    "concise",
]
"""Rubric ``demo``'s six binary criteria, in order (seed 003's support-answer checks)."""


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


@pytest.fixture(autouse=True, scope="session")
def streamlit_on_loopback():
    """Streamlit reads .streamlit/config.toml from the working directory once per process, and every test
    runs in its own temporary folder: pin the served address to loopback (as the repo's config does) so an
    AppTest page never depends on which test happened to load the config first. Tests of other addresses
    set it themselves and put it back."""
    from streamlit import config as st_config

    st_config.set_option("server.address", "127.0.0.1")


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


def labelled_pilot(engine, db_url: str, n_examples: int, n_labelled: int, annotator: str = "ana"):
    """The demo (``n_examples`` answers) judged by ``single`` and ``split`` on the simulated judge, its first
    ``n_labelled`` answers labelled by ``annotator`` (the planted truth); returns (single, split, the three
    sources: single, split, the human column)."""
    from judgekit import reports

    load_demo(engine, n_examples)
    single, split = simulated_runs(engine, db_url)
    with Session(engine) as s:
        first = sorted(store.example_ids(s, store.get_dataset(s, "demo").id).values())[:n_labelled]
    copy_reference_labels(engine, annotator, first)
    with Session(engine) as s:
        return single, split, reports.load_sources(s, [single, split], human=True, dataset="demo")


def copy_reference_labels(engine, annotator: str, example_ids) -> None:
    """``annotator`` labels the given demo examples (internal ids) with the planted truth of ``reference``:
    a perfect human."""
    with Session(engine) as s, s.begin():
        ds = store.get_dataset(s, "demo")
        ids = store.example_ids(s, ds.id)
        wanted = set(example_ids)
        rows = [{"example_id": ids[r["example_id"]], "criterion": r["criterion"], "annotator": annotator,
                 "value": r["value"], "note": None}
                for r in store.labels_for_dataset(s, ds.id)
                if r["annotator"] == "reference" and ids[r["example_id"]] in wanted]
        store.upsert_labels(s, rows)


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


def wait_until(predicate, timeout: float = 90.0, message: str = "condition", poll: float = 0.25) -> None:
    """Poll ``predicate`` until it holds; fail naming ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {message}")


def private_copy(built: str, db_url: str) -> str:
    """A private copy of a module's once-built SQLite workspace (the file ``built``) at this test's
    ``db_url``, so each test may write to it; returns ``db_url``."""
    import sqlite3

    from sqlalchemy.engine import make_url

    target = make_url(db_url).database
    os.makedirs(os.path.dirname(target), exist_ok=True)
    src, dst = sqlite3.connect(built), sqlite3.connect(target)
    with dst:
        src.backup(dst)
    src.close()
    dst.close()
    return db_url


def demo_world(engine):
    """The demo in ``engine`` as the simulated judge sees it: rubric ``demo``, every example's texts
    (``prompts.ExampleText``, example-id order) and the planted truth as an (examples, criteria) 0/1 array."""
    import numpy as np
    from sqlalchemy import select

    from judgekit import prompts

    with Session(engine) as s:
        rubric = store.load_rubric(s, "demo")
        ds = store.get_dataset(s, "demo")
        rows = s.execute(select(store.Example.id, store.Example.question, store.Example.context, store.Example.answer)
                         .where(store.Example.dataset_id == ds.id).order_by(store.Example.id)).all()
        ids = store.example_ids(s, ds.id)
        index = {r[0]: i for i, r in enumerate(rows)}
        truth = np.zeros((len(rows), len(rubric.keys)))
        for r in store.labels_for_dataset(s, ds.id):
            if r["annotator"] == "reference" and r["criterion"] in rubric.keys:
                truth[index[ids[r["example_id"]]], rubric.keys.index(r["criterion"])] = r["value"]
    return rubric, [prompts.ExampleText(q, c, a) for _, q, c, a in rows], truth


@pytest.fixture(scope="module")
def demo600(tmp_path_factory):
    """``(engine, rubric, texts, truth)`` of a 600-answer demo in a module's own SQLite file (outside the
    per-test workspace, for in-process runs of the simulated judge's model; see :func:`demo_world`)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('demo600') / 'world.sqlite'}"
    engine = store.make_engine(url)
    store.upgrade(engine)
    load_demo(engine, 600)
    yield (engine, *demo_world(engine))
    engine.dispose()
