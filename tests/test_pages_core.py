"""AppTest over the Workspace, Data and Run pages on a real SQLite file."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from judgekit import imports, jobs, store
from tests.conftest import DATA


def app() -> AppTest:
    from judgekit import config

    at = AppTest.from_file(str(config.REPO_DIR / "app.py"), default_timeout=60)
    at.run()
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    from judgekit import config

    monkeypatch.chdir(config.REPO_DIR)


def frame(at: AppTest, column: str):
    """The first table on the page that has ``column`` (AppTest does not expose dataframe keys)."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no table with column {column!r}")


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]
    parts += [e.value for e in at.error] + [s.value for s in at.success]
    return "\n".join(str(p) for p in parts)


def test_workspace_empty_state_then_load_demo(engine):
    at = app()
    assert not at.exception
    assert "No datasets yet" in texts(at)
    at.button(key="ws_load_demo").click().run()
    assert not at.exception
    with Session(engine) as s:
        assert store.get_dataset(s, "demo")
        assert store.row_counts(s)["examples"] == 600
    names = frame(at, "examples")["name"].tolist()
    assert names == ["demo"]


def test_workspace_lists_runs_and_deletes_one_with_confirmation(engine, cli):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=30)
    assert cli("import-dataset", DATA / "good" / "dataset.jsonl", "--name", "base").exit_code == 0
    assert cli("import-rubric", DATA / "good" / "rubric.yaml").exit_code == 0
    assert cli("import-run", DATA / "good" / "run.jsonl", "--dataset", "base", "--rubric", "support",
               "--name", "ext").exit_code == 0
    at = goto(app(), "pages/workspace.py")
    runs = frame(at, "harness")
    assert runs["name"].tolist() == ["ext"] and runs["judge"].tolist() == ["run.jsonl (imported)"]
    assert at.button(key="ws_delete").disabled
    at.checkbox(key="ws_delete_confirm").check().run()
    at.button(key="ws_delete").click().run()
    assert not at.exception
    with Session(engine) as s:
        assert store.row_counts(s)["runs"] == 0 and store.row_counts(s)["verdicts"] == 0


def test_data_page_rejects_bad_file_with_file_line_field(engine):
    at = goto(app(), "pages/data.py")
    # AppTest cannot drive st.file_uploader; the page's import path is the library's, tested on files here
    assert at.radio(key="data_kind").options[0].startswith("Dataset")
    from judgekit.datasets import InputError

    with pytest.raises(InputError, match=r"duplicate_id.jsonl:3: field 'id'"), Session(engine) as s, s.begin():
        imports.import_dataset(s, DATA / "malformed" / "duplicate_id.jsonl", "x")
    with Session(engine) as s:
        assert store.row_counts(s)["examples"] == 0


def test_run_page_estimates_and_runs_a_pair_on_the_simulated_judge(engine, db_url):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=60)
    at = goto(app(), "pages/run.py")
    at.number_input(key="run_sample").set_value(20).run()
    estimate = frame(at, "calls")
    assert estimate["calls"].tolist() == [20, 120]  # single: one call per example; split: six
    assert estimate["usd"].tolist() == ["$0.0000", "$0.0000"]
    at.button(key="run_start").click().run()
    assert not at.exception, at.exception
    assert "Started" in texts(at)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and jobs.active(db_url):
        time.sleep(0.2)
    assert not jobs.active(db_url)
    with Session(engine) as s:
        runs = s.scalars(select(store.Run).order_by(store.Run.id)).all()
        assert [r.status for r in runs] == ["done", "done"]
        assert [r.harness["kind"] for r in runs] == ["single", "split"]
        samples = [set(store.run_example_ids(s, r.id)) for r in runs]
        assert samples[0] == samples[1] and len(samples[0]) == 20  # the same examples under both harnesses
        assert s.scalar(select(func.count()).select_from(store.Verdict)) == 2 * 20 * 6
        judge = s.get(store.Judge, runs[0].judge_id)
        assert judge.kind == "simulated"
    at.run()
    assert not at.exception


def test_run_page_bad_grouped_spec_is_one_clear_error(engine):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    at = goto(app(), "pages/run.py")
    at.text_input(key="run_grouped").input("grouped:tone+concise").run()
    assert "'tone', which is not a criterion" in texts(at)
    with Session(engine) as s:
        assert store.row_counts(s)["runs"] == 0


def test_pages_have_empty_states(engine):
    for page in ("pages/workspace.py", "pages/run.py", "pages/data.py"):
        at = goto(app(), page)
        assert not at.exception
    assert "Nothing to judge yet" in texts(goto(app(), "pages/run.py"))
