"""The store on a real SQLite file: migrations, connection settings, uniqueness rules."""

from __future__ import annotations

import pytest
from sqlalchemy import func, insert, inspect, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from judgekit import store
from judgekit.rubric import Criterion, KORule, Rubric

BACKENDS = ("sqlite", "postgresql")

TABLES = {
    "datasets",
    "examples",
    "rubrics",
    "criteria",
    "judges",
    "runs",
    "run_examples",
    "calls",
    "verdicts",
    "annotators",
    "labels",
    "label_sets",
    "label_set_items",
    "run_leases",
    "database_identity",
}


def test_migrates_blank_database_and_second_init_is_noop(cli, db_url):
    url = db_url
    first = cli("init", "--db", url)
    assert first.exit_code == 0 and first.stdout.startswith("migrated")
    second = cli("init", "--db", url)
    assert second.exit_code == 0 and second.stdout.startswith("up to date")
    engine = store.engine_for(url)
    assert set(inspect(engine).get_table_names()) >= TABLES
    assert store.current_revision(engine) == store.head_revision()


def test_downgrade_to_base_and_upgrade_again(db_url):
    from alembic import command

    engine = store.make_engine(db_url)
    assert store.upgrade(engine) is True
    command.downgrade(store._alembic_config(engine), "base")
    assert not (TABLES & set(inspect(engine).get_table_names()))
    assert store.upgrade(engine) is True
    assert set(inspect(engine).get_table_names()) >= TABLES


def test_first_use_migrates_automatically(db_url):
    engine = store.engine_for(db_url)
    assert store.current_revision(engine) == store.head_revision()


@pytest.mark.sqlite_only
def test_sqlite_connection_settings(engine):
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000


def _dataset(s: Session, name: str = "d", n: int = 3) -> store.Dataset:
    return store.insert_dataset(s, name, [{"id": f"e{i}", "answer": f"a{i}"} for i in range(n)])


def test_example_ids_unique_per_dataset(engine):
    with Session(engine) as s, s.begin():
        ds_id = _dataset(s).id
        other = _dataset(s, "other")
        assert len(store.example_ids(s, other.id)) == 3  # the same user ids in another dataset are fine
    with pytest.raises(IntegrityError), Session(engine) as s, s.begin():
        s.execute(insert(store.Example).values(dataset_id=ds_id, ext_id="e0", answer="dup", meta={}))


def test_verdict_unique_per_run_example_criterion(engine):
    with Session(engine) as s, s.begin():
        ds = _dataset(s)
        rubric = store.save_rubric(s, Rubric("r", (Criterion("c", "q?"),)))
        judge = store.get_or_create_judge(s, kind="imported", name="f")
        run = store.create_run(
            s,
            name="run",
            dataset=ds,
            rubric=rubric,
            judge=judge,
            harness={},
            example_ids=list(store.example_ids(s, ds.id).values()),
        )
        crit = store.criterion_rows(s, rubric.id)[0]
        ex = store.run_example_ids(s, run.id)[0]
        row = {"run_id": run.id, "example_id": ex, "criterion_id": crit.id, "value": 1, "red_flags": []}
        store.insert_verdicts(s, [row])
    with pytest.raises(IntegrityError), Session(engine) as s, s.begin():
        store.insert_verdicts(s, [row])


def test_foreign_keys_enforced(engine):
    with pytest.raises(IntegrityError), Session(engine) as s, s.begin():
        s.execute(insert(store.Example).values(dataset_id=999, ext_id="x", answer="a", meta={}))


def test_label_unique_key_upserts(engine):
    with Session(engine) as s, s.begin():
        ds = _dataset(s)
        ex = store.example_ids(s, ds.id)["e0"]
        store.upsert_labels(s, [{"example_id": ex, "criterion": "c", "annotator": "ana", "value": 1}])
        store.upsert_labels(
            s, [{"example_id": ex, "criterion": "c", "annotator": "ana", "value": 0, "note": "n"}]
        )
        store.upsert_labels(s, [{"example_id": ex, "criterion": "c", "annotator": "ben", "value": 1}])
        rows = store.labels_for_dataset(s, ds.id)
    assert [(r["annotator"], r["value"], r["note"]) for r in rows] == [("ana", 0, "n"), ("ben", 1, None)]


def test_rubric_value_roundtrip(engine):
    rubric = Rubric(
        "r",
        (Criterion("a", "A?"), Criterion("s", "S?", "scale", {i: f"level {i}" for i in range(1, 6)}, 4)),
        KORule("s", 2),
        "desc",
    )
    with Session(engine) as s, s.begin():
        store.save_rubric(s, rubric)
    with Session(engine) as s:
        assert store.load_rubric(s, "r") == rubric
        with pytest.raises(ValueError, match="already exists"):
            store.save_rubric(s, rubric)


def test_delete_run_removes_its_rows_only(engine):
    with Session(engine) as s, s.begin():
        ds = _dataset(s)
        rubric = store.save_rubric(s, Rubric("r", (Criterion("c", "q?"),)))
        judge = store.get_or_create_judge(s, kind="imported", name="f")
        ids = list(store.example_ids(s, ds.id).values())
        keep = store.create_run(
            s, name="keep", dataset=ds, rubric=rubric, judge=judge, harness={}, example_ids=ids
        )
        drop = store.create_run(
            s, name="drop", dataset=ds, rubric=rubric, judge=judge, harness={}, example_ids=ids
        )
        crit = store.criterion_rows(s, rubric.id)[0].id
        store.insert_verdicts(
            s,
            [
                {"run_id": r.id, "example_id": e, "criterion_id": crit, "value": 1, "red_flags": []}
                for r in (keep, drop)
                for e in ids
            ],
        )
    with Session(engine) as s, s.begin():
        store.delete_run(s, store.get_run(s, "drop"))
    with Session(engine) as s:
        counts = store.row_counts(s)
        assert counts["runs"] == 1 and counts["verdicts"] == 3 and counts["run_examples"] == 3
        with pytest.raises(store.NotFound):
            store.get_run(s, "drop")


def test_unknown_names_raise_not_found(session):
    with pytest.raises(store.NotFound, match="no dataset named 'x'"):
        store.get_dataset(session, "x")
    with pytest.raises(store.NotFound, match="no rubric named 'x'"):
        store.get_rubric_row(session, "x")


def test_upgrade_from_previous_schema_keeps_data(db_url):
    """0001 → head on a database that already holds labels: rows survive, new columns get defaults."""
    engine = store.make_engine(db_url)
    store.upgrade(engine, "0001_initial")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO annotators (name) VALUES ('ana')"))
    assert store.upgrade(engine) is True
    with engine.connect() as conn:
        assert conn.execute(text("SELECT name, role FROM annotators")).all() == [("ana", "annotator")]
    assert store.current_revision(engine) == store.head_revision()


def test_0005_from_the_previous_schema_with_data_and_back(db_url):
    """0004 → 0005 on a database holding a run and a call: rows survive, the reply gets its (empty) length and
    hash columns, the database its identity, runs their lease table; 0005 → 0004 → 0005 again works."""
    from alembic import command

    engine = store.make_engine(db_url)
    store.upgrade(engine, "0004_rubric_prompt_template")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO datasets (name, created_at) VALUES ('d', CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO examples (dataset_id, ext_id, question, context, answer, metadata) "
                          "VALUES (1, 'e1', '', '', 'a', '{}')"))
        conn.execute(text("INSERT INTO rubrics (name, description, created_at) VALUES ('r', '', CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO judges (name, kind, params, suppress_thinking) VALUES ('j', 'openai', '{}', "
                          "false)"))
        conn.execute(text("INSERT INTO runs (name, dataset_id, rubric_id, judge_id, harness, sample, status, "
                          "created_at, wall_s, totals) VALUES ('run', 1, 1, 1, '{}', '{}', 'done', CURRENT_TIMESTAMP, "
                          "0, '{}')"))
        conn.execute(text("INSERT INTO calls (run_id, example_id, criteria, attempts, status, request, "
                          "response_text, created_at) VALUES (1, 1, '[]', 1, 'ok', '{}', 'the reply', "
                          "CURRENT_TIMESTAMP)"))
    assert store.upgrade(engine) is True
    assert store.current_revision(engine) == store.head_revision()
    with Session(engine) as s:
        call = s.scalars(select(store.Call)).one()
        assert (call.response_text, call.response_chars, call.response_sha256) == ("the reply", None, None)
        first = store.database_identity(s)
        assert len(first) == 32
        assert s.scalar(select(func.count()).select_from(store.RunLease)) == 0
    command.downgrade(store._alembic_config(engine), "0004_rubric_prompt_template")
    assert "run_leases" not in inspect(engine).get_table_names()
    assert {c["name"] for c in inspect(engine).get_columns("calls")}.isdisjoint({"response_chars", "response_sha256"})
    assert store.upgrade(engine) is True
    with Session(engine) as s:
        assert s.scalars(select(store.Call.response_text)).one() == "the reply"
        assert store.database_identity(s) not in ("", first)  # a new schema, a new identity
    engine.dispose()
