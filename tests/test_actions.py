"""Roles are enforced where the dashboard's writes are done (judgekit.actions), not only by hidden
buttons: a refused action raises Forbidden and writes nothing — on SQLite and PostgreSQL."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import actions, labeling, lease, runner, store
from judgekit.auth import LOCAL, Action, Forbidden, Identity, Role
from judgekit.harness import parse_harness
from tests.conftest import DATA

BACKENDS = ("sqlite", "postgresql")

VIEWER = Identity("vic", Role.VIEWER, "token")
ANNOTATOR = Identity("ana", Role.ANNOTATOR, "token")
ADMIN = Identity("ada", Role.ADMIN, "oidc")
SIM = runner.JudgeSpec(base_url="http://127.0.0.1:8765/v1", model="judgekit-sim", kind="simulated")
PAID = runner.JudgeSpec(base_url="https://api.openai.com/v1", model="gpt-4o-mini", kind="openai",
                        api_key_env="JK_ACTIONS_TEST_KEY")


def label_rows(engine, name: str) -> list[tuple]:
    with Session(engine) as s:
        return s.execute(select(store.Label.example_id, store.Label.criterion, store.Label.value)
                         .join(store.Annotator, store.Annotator.id == store.Label.annotator_id)
                         .where(store.Annotator.name == name).order_by(store.Label.criterion)).all()


def counts(engine) -> dict[str, int]:
    with Session(engine) as s:
        return {"runs": s.scalar(select(func.count()).select_from(store.Run)),
                "labels": s.scalar(select(func.count()).select_from(store.Label)),
                "datasets": s.scalar(select(func.count()).select_from(store.Dataset)),
                "label_sets": len(labeling.list_label_sets(s))}


@pytest.fixture
def setup(demo, engine, monkeypatch):
    """The demo (30 examples) with one pending simulated run and one pending paid run."""
    monkeypatch.setenv("JK_ACTIONS_TEST_KEY", "sk-not-a-real-key")  # never sent: these runs are not executed
    with Session(engine) as s, s.begin():
        runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness("single"), judge=SIM, name="free")
        runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness("single"), judge=PAID, name="paid")
        rubric = store.rubric_value(s, store.get_rubric_row(s, "demo"))
        example = sorted(store.example_ids(s, store.get_dataset(s, "demo").id).values())[0]
    return engine, rubric.criteria, example


def test_a_viewer_writes_nothing(setup, db_url):
    engine, criteria, example = setup
    before = counts(engine)
    attempts = [
        lambda s: actions.save_labels(VIEWER, s, example, {criteria[0].key: 1}, criteria),
        lambda s: actions.create_label_set(VIEWER, s, "v", dataset="demo", rubric="demo",
                                           spec=labeling.SampleSpec("random", size=3)),
        lambda s: actions.set_adjudicator(VIEWER, s, True),
        lambda s: actions.delete_run(VIEWER, s, "free"),
        lambda s: actions.import_dataset(VIEWER, s, DATA / "good" / "dataset.jsonl", "more"),
        lambda s: actions.load_demo(VIEWER, s, n_examples=10),
        lambda s: actions.create_comparison(VIEWER, s, dataset="demo", rubric="demo",
                                            harnesses=[parse_harness("split")], judge=SIM),
    ]
    for attempt in attempts:
        with pytest.raises(Forbidden, match="vic's role is viewer"), Session(engine) as s, s.begin():
            attempt(s)
    for name in ("free", "paid"):
        with pytest.raises(Forbidden, match="needs annotator" if name == "free" else "needs admin"):
            actions.start_runs(VIEWER, db_url, [name])
    assert counts(engine) == before


def test_an_annotator_labels_as_themselves_and_runs_only_free_judges(setup, db_url):
    engine, criteria, example = setup
    before = counts(engine)
    values = {c.key: (1 if i % 2 else 0) if not c.is_scale else 4 for i, c in enumerate(criteria)}
    with Session(engine) as s, s.begin():
        assert actions.save_labels(ANNOTATOR, s, example, values, criteria, note="ok") == len(criteria)
    assert label_rows(engine, "ana") == sorted((example, k, v) for k, v in values.items())
    with pytest.raises(Forbidden, match="signed in as ana: cannot save labels as 'bo'"), \
            Session(engine) as s, s.begin():
        actions.save_labels(ANNOTATOR, s, example, values, criteria, annotator="bo")
    assert label_rows(engine, "bo") == []
    with Session(engine) as s, s.begin():
        actions.set_adjudicator(ANNOTATOR, s, True)
        actions.adjudicate(ANNOTATOR, s, example, criteria[0], 1)
        names = actions.create_comparison(ANNOTATOR, s, dataset="demo", rubric="demo",
                                          harnesses=[parse_harness("split")], judge=SIM, sample=5)
        rerun = actions.create_rerun(ANNOTATOR, s, "free", few_shot=0).name  # run B of a prompt A/B, free judge
        assert labeling.annotator_role(s, "ana") == "adjudicator"
        assert actions.run_needs(s, ["free", "paid", *names]) == {
            "free": Action.RUN_FREE, "paid": Action.RUN_PAID, names[0]: Action.RUN_FREE}
    for doomed in (lambda s: actions.delete_run(ANNOTATOR, s, "free"),
                   lambda s: actions.create_comparison(ANNOTATOR, s, dataset="demo", rubric="demo",
                                                       harnesses=[parse_harness("split")], judge=PAID),
                   lambda s: actions.import_labels(ANNOTATOR, s, DATA / "good" / "labels.jsonl", "demo"),
                   lambda s: actions.create_rerun(ANNOTATOR, s, "paid", few_shot=0)):
        with pytest.raises(Forbidden, match="needs admin"), Session(engine) as s, s.begin():
            doomed(s)
    with pytest.raises(Forbidden, match="not allowed to start paid: ana's role is annotator, and it needs admin"):
        actions.start_runs(ANNOTATOR, db_url, ["paid"])
    with pytest.raises(Forbidden, match="cancel paid"):
        actions.cancel_run(ANNOTATOR, db_url, "paid")
    with pytest.raises(store.NotFound, match="no run named 'nope'"):
        actions.start_runs(ANNOTATOR, db_url, ["nope"])
    after = counts(engine)
    assert after["runs"] == before["runs"] + 2 and after["datasets"] == before["datasets"]
    assert rerun == "free-b"


def test_a_run_a_live_process_executes_is_not_deleted_until_it_stops(setup):
    engine, _, _ = setup
    with Session(engine) as s:
        run_id = store.get_run(s, "free").id
    held = lease.acquire(engine, run_id)  # this process: alive, so the lease is live
    try:
        with pytest.raises(ValueError, match=r"run 'free' is being executed \(pid \d+ on .+, last heartbeat \d+ s ago\)"
                                             r": cancel it .* nothing was deleted"), Session(engine) as s, s.begin():
            actions.delete_run(ADMIN, s, "free")
        with Session(engine) as s:
            assert store.get_run(s, "free") and s.get(store.RunLease, run_id)
    finally:
        held.release()
    with Session(engine) as s, s.begin():  # a lease left by a process that died is no obstacle
        s.add(store.RunLease(run_id=run_id, owner="gone", host=socket.gethostname()[:200], pid=dead_pid(),
                             acquired_at=store.utcnow(), heartbeat_at=store.utcnow()))
    with Session(engine) as s, s.begin():
        assert actions.delete_run(ADMIN, s, "free") == "free"
    with Session(engine) as s:
        assert s.get(store.RunLease, run_id) is None and "free" not in [r["name"] for r in store.list_runs(s)]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_an_admin_deletes_imports_and_runs_paid_judges(setup, db_url):
    engine, criteria, example = setup
    with Session(engine) as s, s.begin():
        assert actions.delete_run(ADMIN, s, "free") == "free"
        names = actions.create_comparison(ADMIN, s, dataset="demo", rubric="demo",
                                          harnesses=[parse_harness("split")], judge=PAID, sample=5)
        actions.import_dataset(ADMIN, s, DATA / "good" / "dataset.jsonl", "more")
    with Session(engine) as s:
        assert sorted(r["name"] for r in store.list_runs(s)) == sorted(["paid", *names])
        assert store.get_dataset(s, "more")
    assert actions.cancel_run(ADMIN, db_url, "paid") is False  # allowed; nothing is executing it here


def test_labels_imported_by_a_signed_in_admin_default_to_their_name(setup, tmp_path):
    engine, criteria, example = setup
    with Session(engine) as s:
        ext = s.scalar(select(store.Example.ext_id).where(store.Example.id == example))
    path = tmp_path / "labels.jsonl"
    path.write_text(f'{{"example_id": "{ext}", "criterion": "{criteria[0].key}", "value": true}}\n')
    with pytest.raises(Forbidden, match="signed in as ada: cannot save labels as 'bo'"), \
            Session(engine) as s, s.begin():
        actions.import_labels(ADMIN, s, path, "demo", annotator="bo")
    with Session(engine) as s, s.begin():
        actions.import_labels(ADMIN, s, path, "demo")
        actions.import_labels(LOCAL, s, path, "demo", annotator="kim")  # loopback: the typed name
    assert label_rows(engine, "ada") == [(example, criteria[0].key, 1)]
    assert label_rows(engine, "kim") == [(example, criteria[0].key, 1)]


def test_the_planners_recommended_run_starts_only_for_who_may_run_the_pilots_judge(engine):
    """The Compare page's "Start the recommended run" goes through actions: a paid pilot judge needs an admin,
    a free one an annotator; a viewer starts neither (and nothing is created)."""
    from types import SimpleNamespace

    paid = SimpleNamespace(run={"judge_kind": "openai", "base_url": "https://api.example.com/v1",
                                "api_key_env": "OPENAI_API_KEY"})
    free = SimpleNamespace(run={"judge_kind": "simulated", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None})
    assert actions.plan_needs(paid) == Action.RUN_PAID and actions.plan_needs(free) == Action.RUN_FREE
    with Session(engine) as s:
        for who, plan in ((VIEWER, free), (VIEWER, paid), (ANNOTATOR, paid)):
            with pytest.raises(Forbidden, match="start the planned run"):
                actions.start_planned_run(who, s, plan)  # type: ignore[arg-type]
        assert s.scalar(select(func.count()).select_from(store.Run)) == 0
