"""Prompt templates and few-shot on the pages: the Run page's prompt choice (AppTest and real Chromium)
and the Prompt A/B page's re-judge with another template."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from judgekit import config, imports, jobs, store

OWN = "my template"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(config.REPO_DIR)


def page(name: str) -> AppTest:
    at = AppTest.from_file(str(config.REPO_DIR / "app.py"), default_timeout=60)
    at.run()
    at.switch_page(name)
    at.run()
    assert not at.exception, at.exception
    return at


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [e.value for e in at.error]
    parts += [i.value for i in at.info]
    return "\n".join(str(p) for p in parts + [s.value for s in at.success])


def wait_for_jobs(db_url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and jobs.active(db_url):
        time.sleep(0.2)
    assert not jobs.active(db_url)


def test_run_page_starts_a_templated_few_shot_run_and_refuses_a_bad_template(engine, db_url):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=40)
    at = page("pages/run.py")
    at.multiselect(key="run_variants").set_value(["split"]).run()
    at.number_input(key="run_sample").set_value(12).run()
    at.radio(key="run_prompt_template_choice").set_value(OWN).run()
    at.text_area(key="run_prompt_template").input("Answer: {{ answer }}\n{{ verdict_scale }}\n{{ criteria }}").run()
    # messages are inert Markdown (ui.md escapes _ : ( …): compare the text a reader sees
    assert "page template:2: field 'verdict_scale': unknown template field 'verdict_scale'" in texts(at).replace("\\", "")
    assert not [b for b in at.button if b.key == "run_start"]  # nothing can start with a bad template
    template = "Q: {{ question }}\nA: {{ answer }}\n\n{{ criteria }}"
    at.text_area(key="run_prompt_template").input(template).run()
    at.number_input(key="run_few_shot").set_value(2).run()
    assert "Valid: template page template (" in texts(at).replace("\\", "")
    at.button(key="run_start").click().run()
    assert not at.exception, at.exception
    wait_for_jobs(db_url)
    with Session(engine) as s:
        (run,) = s.scalars(select(store.Run)).all()
        assert run.status == "done"
        assert run.harness["prompt_template"] == template and run.harness["few_shot"] == 2
        assert run.name == "demo-split-template-fewshot2"
        request = s.scalars(select(store.Call.request).where(store.Call.run_id == run.id)).first()
    assert request["messages"][1]["content"].startswith("Q: ")
    assert "## Labelled examples" in request["messages"][1]["content"]


A = "scale-a **b** [x](javascript:alert(1))"  # a run name is user text


def test_prompt_ab_page_rejudges_a_run_with_another_template(engine, db_url):
    """… and shows run names as text: a name holding Markdown stays inert in every caption and message."""
    from judgekit import runner, simjudge
    from judgekit.harness import parse_harness

    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=30)
    srv = simjudge.start_in_thread(db_url)
    try:
        with Session(engine) as s, s.begin():
            runner.create_run(s, dataset="demo", rubric="demo-scale", harness=parse_harness("single"),
                              judge=runner.JudgeSpec(srv.base_url, simjudge.SIM_MODEL, kind="simulated"),
                              sample=10, seed=4, name=A)
        assert runner.run_sync(engine, A).status == "done"
    finally:
        srv.stop()
    at = page("pages/prompt_ab.py")
    assert "needs two runs" in texts(at)
    at.text_area(key="ab_template").input("{{ answer }}\n{{ criteria }}").run()
    at.button(key="ab_rejudge").click().run()
    assert not at.exception, at.exception
    assert f"Started {A}-b" in texts(at).replace("\\", "")
    assert "**b**" not in texts(at) and "[x](" not in texts(at)  # escaped, not live
    wait_for_jobs(db_url)
    with Session(engine) as s:
        a, b = store.get_run(s, A), store.get_run(s, f"{A}-b")
        assert b.status == "done" and store.run_example_ids(s, a.id) == store.run_example_ids(s, b.id)
    at = page("pages/prompt_ab.py")
    at.selectbox(key="ab_a").set_value(A).run()
    at.selectbox(key="ab_b").set_value(f"{A}-b").run()
    assert not at.exception, at.exception
    assert f"B = run:{A}-b (prompt default + template page template (" in texts(at).replace("\\", "")
    assert "**b**" not in texts(at) and "[x](" not in texts(at)
    assert all("**b**" not in str(tab.label) for tab in at.tabs)
    assert any("{{ answer }}" in c.value for c in at.code)


@pytest.mark.browser
def test_run_page_template_option_in_chromium(engine, db_url, tmp_path):
    from tests.browser import chromium_page, streamlit_server, wait_for_app

    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=40)
    shots = Path(os.environ.get("JUDGEKIT_SCREENSHOTS", tmp_path))
    with streamlit_server(db_url, tmp_path / "streamlit.log") as base, chromium_page(1400, 1000) as pw:
        pw.goto(base)
        pw.get_by_role("link", name="Run").first.click()
        pw.get_by_role("heading", name="Run").first.wait_for()
        wait_for_app(pw)
        pw.get_by_text(OWN, exact=True).click()
        wait_for_app(pw)
        area = pw.get_by_label("Template (Jinja2; {{ criteria }} last, after the answer)")
        area.fill("Customer: {{ question }}\nReply: {{ answer }}\n{{ tone_guide }}\n{{ criteria }}")
        area.press("Control+Enter")
        wait_for_app(pw)
        pw.get_by_text("field 'tone_guide': unknown template field 'tone_guide'").wait_for()
        heading = pw.get_by_role("heading", name="Prompt").first
        heading.evaluate("e => e.scrollIntoView({block: 'start'})")
        pw.screenshot(path=shots / "run_template_error.png")
        area.fill("Customer: {{ question }}\nReply: {{ answer }}\n\n{{ criteria }}")
        area.press("Control+Enter")
        wait_for_app(pw)
        pw.get_by_text("Valid: template page template (").wait_for()
        heading.evaluate("e => e.scrollIntoView({block: 'start'})")
        pw.screenshot(path=shots / "run_template.png")
    assert (shots / "run_template.png").stat().st_size > 10_000
