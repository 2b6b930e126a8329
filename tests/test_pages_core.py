"""AppTest over the Workspace, Data and Run pages on a real SQLite file."""

from __future__ import annotations

import re
import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from judgekit import imports, jobs, lease, store
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


def load_demo_engine(engine, n: int):
    from tests.conftest import load_demo

    return load_demo(engine, n)


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
    for name in ("ext", "ext2"):
        assert cli("import-run", DATA / "good" / "run.jsonl", "--dataset", "base", "--rubric", "support",
                   "--name", name).exit_code == 0
    at = goto(app(), "pages/workspace.py")
    runs = frame(at, "harness")
    assert runs["name"].tolist() == ["ext", "ext2"] and runs["judge"].tolist() == ["run.jsonl (imported)"] * 2
    assert {"usd", "wall_s"} <= set(runs.columns)
    assert at.button(key="ws_delete").disabled
    at.checkbox(key="ws_delete_confirm|ext").check().run()
    at.button(key="ws_delete").click().run()
    assert not at.exception
    with Session(engine) as s:
        assert [r["name"] for r in store.list_runs(s)] == ["ext2"]
    # the next run asks again: nothing is left ticked
    assert at.selectbox(key="ws_delete_run").value == "ext2"
    assert not at.checkbox(key="ws_delete_confirm|ext2").value and at.button(key="ws_delete").disabled
    # a run some live process is executing is kept, and the page says why
    with Session(engine) as s:
        held = lease.acquire(engine, store.get_run(s, "ext2").id)
    try:
        at.checkbox(key="ws_delete_confirm|ext2").check().run()
        at.button(key="ws_delete").click().run()
        assert not at.exception
        assert any("is being executed" in e.value and "nothing was deleted" in e.value for e in at.error)
        with Session(engine) as s:
            assert [r["name"] for r in store.list_runs(s)] == ["ext2"]
    finally:
        held.release()


def test_workspace_leads_with_findings_that_open_their_pages(engine, db_url):
    from tests.conftest import simulated_runs

    simulated_runs(load_demo_engine(engine, 60), db_url)
    at = goto(app(), "pages/workspace.py")
    said = texts(at).replace("\\", "")
    # no second annotator: the reference truth is the human column, so the audit and agreement are there
    induced = re.search(r"(Associations a harness shows that the humans do not|No harness shows an association the "
                        r"humans do not see).* (\d+) criterion pairs", said)
    assert induced and induced[2] == "15"  # the audit's finding, over the 6 criteria's pairs
    assert "cost 6.0× the tokens" not in said  # tokens are measured, not assumed …
    assert "360 calls against 60." in said  # … split made 360 calls, single 60
    assert "Agreement with the humans" in said
    assert [link.proto.page for link in at.get("page_link")] == ["associations", "compare", "agreement", "label"]


def test_empty_workspace_says_the_two_steps(engine):
    at = goto(app(), "pages/workspace.py")
    said = texts(at).replace("\\", "")
    assert "1. Load the demo workspace" in said and "2. Start a single + split pair" in said
    assert at.button(key="ws_load_demo")


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
    assert estimate["cost (USD)"].tolist() == ["$0.0000", "$0.0000"]
    assert estimate["time"].tolist()[0].startswith("≈ ") and estimate["time"].tolist()[0].endswith(" s")
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


def test_run_page_keeps_the_form_names_runs_and_asks_before_copies(engine, db_url):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=30)
        store.save_rubric(s, store.rubric_value(s, store.get_rubric_row(s, "demo")).__class__(
            name="critique:demo", criteria=store.load_rubric(s, "demo").criteria))
    at = goto(app(), "pages/run.py")
    assert "critique:demo" not in at.selectbox(key="run_rubric").options  # internal rubrics are not offered
    assert at.selectbox(key="run_rubric").value == "demo"
    at.number_input(key="run_sample").set_value(12)
    at.text_input(key="run_name").input("first-try")
    at.multiselect(key="run_variants").set_value(["single"]).run()
    # leave the page and come back: the form is as it was
    goto(at, "pages/workspace.py")
    goto(at, "pages/run.py")
    assert at.number_input(key="run_sample").value == 12
    assert at.text_input(key="run_name").value == "first-try"
    assert at.multiselect(key="run_variants").value == ["single"]
    at.button(key="run_start").click().run()
    assert "Started first-try-single — 12 examples (seed" in texts(at).replace("\\", "")  # says what it started
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and jobs.active(db_url):
        time.sleep(0.2)
    at.run()
    # the same comparison again: a warning names the runs, and Start waits for a yes
    said = texts(at).replace("\\", "") + " ".join(str(w.value) for w in at.warning).replace("\\", "")
    assert "Runs named first-try-single already exist" in said
    assert at.button(key="run_start").disabled
    at.checkbox(key="run_again").check().run()
    at.button(key="run_start").click().run()
    with Session(engine) as s:
        assert [r["name"] for r in store.list_runs(s)] == ["first-try-single", "first-try-single-2"]


def test_run_page_warns_about_the_simulated_judge_without_planted_truth(engine, cli):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    assert cli("import-dataset", DATA / "good" / "dataset.jsonl", "--name", "mine").exit_code == 0
    at = goto(app(), "pages/run.py")
    at.selectbox(key="run_dataset").set_value("demo").run()
    assert not [w for w in at.warning if "no planted truth" in str(w.value)]
    at.selectbox(key="run_dataset").set_value("mine").run()
    assert any("has no planted truth" in str(w.value) for w in at.warning)


def test_run_page_tests_an_endpoint_and_keeps_the_simulated_tag(engine):
    from judgekit import simjudge

    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    srv = simjudge.start_in_thread(None, simjudge.SimParams())
    try:
        at = goto(app(), "pages/run.py")
        at.radio(key="run_judge_kind").set_value("OpenAI-compatible endpoint").run()
        at.text_input(key="run_base_url").input(srv.base_url)
        at.text_input(key="run_model").input(simjudge.SIM_MODEL)
        at.text_input(key="run_key_env").input("").run()
        at.button(key="run_test_endpoint").click().run()
        oks = [str(x.value).replace("\\", "") for x in at.success]
        assert any(o.startswith("models: judgekit-sim is listed") for o in oks)
        assert any(o.startswith("structured output: json_schema") for o in oks)
        assert any(o.startswith("one tiny call: a verdict") for o in oks)
        assert any("judgekit's simulated judge" in str(i.value) for i in at.info)
        at.number_input(key="run_sample").set_value(5)
        at.multiselect(key="run_variants").set_value(["single"]).run()
        at.button(key="run_start").click().run()
        with Session(engine) as s:
            run = store.get_run(s, store.list_runs(s)[0]["name"])
            assert s.get(store.Judge, run.judge_id).kind == "simulated"  # "(simulated)" wherever it is named
    finally:
        srv.stop()
