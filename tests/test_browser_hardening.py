"""The pages this round touched, in a real browser (Debian's Chromium) against `streamlit run app.py`: the
Data page leaves no upload folder behind, and the Run page's Resume continues a batched run as a batch.
Screenshots at 1400 × 1000."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from sqlalchemy.orm import Session

from judgekit import batch, imports, runner, store
from judgekit.harness import parse_harness
from tests.browser import chromium_page, fill_field, goto, streamlit_server, wait_for_app
from tests.conftest import DATA, all_pairs, verdict_keys
from tests.scripted_server import ScriptedServer

pytestmark = pytest.mark.browser


def test_data_page_uploads_leave_no_temporary_folder(engine, db_url, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with streamlit_server(db_url, tmp_path / "streamlit.log", extra_env={"TMPDIR": str(scratch)}) as base, \
            chromium_page(1400, 1000) as page:
        page.goto(base)
        page.get_by_role("heading", name="Workspace").wait_for()
        goto(page, "Data", "Data")
        upload = page.locator("input[type=file]")
        upload.set_input_files(str(DATA / "good" / "dataset.jsonl"))
        page.get_by_text("Preview of dataset.jsonl").wait_for()
        fill_field(page, page.get_by_label("Dataset name"), "uploaded")
        page.get_by_role("button", name="Import").click()
        try:
            page.get_by_text("imported dataset 'uploaded': 3 rows").wait_for()
        finally:
            page.screenshot(path=tmp_path / "data-imported.png")
        upload.set_input_files(str(DATA / "malformed" / "duplicate_id.jsonl"))
        page.get_by_text("duplicate_id.jsonl:3: field 'id': duplicate id 'q-001' (first on line 1)").wait_for()
        wait_for_app(page)
        page.screenshot(path=tmp_path / "data-refused.png")
        leftovers = sorted(p.name for p in scratch.iterdir() if p.name.startswith("judgekit-upload-"))
    assert leftovers == []
    with Session(engine) as s:
        assert store.row_counts(s)["examples"] == 3
    assert (tmp_path / "data-refused.png").stat().st_size > 10_000


def test_run_page_resume_continues_a_batched_run_as_a_batch(engine, db_url, tmp_path):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    with ScriptedServer() as srv:
        srv.batch.polls_to_complete = 1
        judge = runner.JudgeSpec(base_url=srv.base_url, model="gpt-test", timeout_s=10.0)
        with Session(engine) as s, s.begin():
            name = runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness("split"), judge=judge,
                                     limit=5, name="batched").name
        asyncio.run(batch.submit(engine, name))  # sent as a batch, then the process went away
        with streamlit_server(db_url, tmp_path / "streamlit.log") as base, chromium_page(1400, 1000) as page:
            page.goto(base)
            page.get_by_role("heading", name="Workspace").wait_for()
            goto(page, "Run", "Run")
            page.get_by_text(re.compile(r"batched — split.*batching")).wait_for()
            page.get_by_role("button", name="Resume").scroll_into_view_if_needed()
            page.screenshot(path=tmp_path / "run-batching.png")
            page.get_by_role("button", name="Resume").click()
            page.get_by_text(re.compile(r"batched — split.*done: 30/30 verdicts")).wait_for(timeout=90_000)
            time.sleep(1.2)  # the progress fragment refreshes every second
            wait_for_app(page)
            page.screenshot(path=tmp_path / "run-resumed.png")
        assert srv.requests == []  # no live call: the batch's results were imported
        assert srv.count("POST", "/batches") == 1
    assert verdict_keys(engine, name) == all_pairs(engine, name)
