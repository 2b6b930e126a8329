"""A database deleted and recreated at the same path never shows the old database's numbers: every cache key
(the matrix cache, the pages' st.cache entries) includes the database's identity, written when its schema is
created, and a SQLite file replaced under a running process is reopened.

The recreation is done the way another process would do it — a separate engine on the same URL — while this
process keeps its engine, its matrix cache and (for the page) its Streamlit caches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from judgekit import config, imports, reports, store

RUBRIC = "name: r\ncriteria:\n  - key: a\n    question: A?\n  - key: b\n    question: B?\n"


def build(db_url: str, folder: Path, ids: list[str], a: list[bool], b: list[bool]) -> None:
    """A database at ``db_url`` (created by its own engine, as another process would): dataset ``d`` with
    ``ids``, rubric ``r`` (a, b) and an imported run ``x`` with the given verdicts."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "d.jsonl").write_text("".join(json.dumps({"id": i, "answer": f"answer {i}"}) + "\n" for i in ids))
    (folder / "r.yaml").write_text(RUBRIC)
    lines = [{"example_id": i, "criterion": k, "verdict": v} for i, va, vb in zip(ids, a, b, strict=True)
             for k, v in (("a", va), ("b", vb))]
    (folder / "x.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    engine = store.make_engine(db_url)
    store.upgrade(engine)
    with Session(engine) as s, s.begin():
        imports.import_dataset(s, folder / "d.jsonl", "d")
        imports.import_rubric(s, folder / "r.yaml")
        imports.import_run(s, folder / "x.jsonl", dataset="d", rubric="r", name="x")
    engine.dispose()


def delete_sqlite(db_url: str) -> None:
    path = Path(db_url.removeprefix("sqlite:///"))
    for p in path.parent.glob(path.name + "*"):
        p.unlink()


def test_recreated_database_gets_a_new_identity(db_url, tmp_path):
    engine = store.engine_for(db_url)
    with Session(engine) as s:
        first = store.database_identity(s)
    assert len(first) == 32
    delete_sqlite(db_url)
    build(db_url, tmp_path / "new", ["n1"], [True], [True])
    with Session(store.engine_for(db_url)) as s:
        second = store.database_identity(s)
    assert second and second != first


def test_matrix_cache_never_serves_the_old_databases_matrices(db_url, tmp_path):
    build(db_url, tmp_path / "old", ["a1", "a2", "a3", "a4"], [True, True, False, False], [True, True, False, False])
    engine = store.engine_for(db_url)
    with Session(engine) as s:
        old = reports.load_run(s, "x")
    assert list(old.index.ext) == ["a1", "a2", "a3", "a4"]
    delete_sqlite(db_url)  # same path, same ids, same counts, other contents
    build(db_url, tmp_path / "new", ["b1", "b2", "b3", "b4"], [True, False, True, False], [False, True, False, True])
    with Session(store.engine_for(db_url)) as s:
        new = reports.load_run(s, "x")
    assert list(new.index.ext) == ["b1", "b2", "b3", "b4"]
    assert new.raw[:, 0].tolist() == [1, 0, 1, 0] and new.raw[:, 1].tolist() == [0, 1, 0, 1]


@pytest.fixture
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(config.REPO_DIR)


def phi_metric(at: AppTest) -> str:
    return next(m.value for m in at.metric if m.label == "phi")


def test_page_shows_the_recreated_databases_numbers(db_url, tmp_path, _repo_cwd):
    build(db_url, tmp_path / "old", ["a1", "a2", "a3", "a4"], [True, True, False, False], [True, True, False, False])
    at = AppTest.from_file(str(config.REPO_DIR / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/crosstabs.py")
    at.run()
    assert not at.exception, at.exception
    assert phi_metric(at) == "1.000"
    delete_sqlite(db_url)
    build(db_url, tmp_path / "new", ["a1", "a2", "a3", "a4"], [True, False, True, False], [False, True, False, True])
    at.run()
    assert not at.exception, at.exception
    assert phi_metric(at) == "-1.000"
