"""The dashboard in a real browser (Debian's Chromium via Playwright) against `streamlit run app.py`:
the main flow, an upload refused with file/line/field, untrusted text that must never execute, and the
server killed during a background run."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import imports, runner, store
from tests.browser import SERVERS, chromium_page, fill_field, goto, streamlit_server, wait_for_app
from tests.conftest import DATA, wait_until
from tests.scripted_server import ScriptedServer, slow

pytestmark = pytest.mark.browser


def crosstab_from_store(engine, run_name: str, row: str, col: str) -> list[list[int]]:
    """counts[row pass/fail][col pass/fail] straight from the verdict rows (independent of reports.py)."""
    with Session(engine) as s:
        run = store.get_run(s, run_name)
        crit = {c.key: c.id for c in store.criterion_rows(s, run.rubric_id)}
        values: dict[int, dict[int, int]] = {}
        for ex, cid, v in s.execute(select(store.Verdict.example_id, store.Verdict.criterion_id, store.Verdict.value)
                                    .where(store.Verdict.run_id == run.id, store.Verdict.value.is_not(None))):
            values.setdefault(ex, {})[cid] = v
    counts = [[0, 0], [0, 0]]
    for v in values.values():
        if crit[row] in v and crit[col] in v:
            counts[1 - v[crit[row]]][1 - v[crit[col]]] += 1
    return counts


def test_main_flow(engine, db_url, tmp_path):
    with streamlit_server(db_url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        page.goto(base)
        page.get_by_role("heading", name="Workspace").wait_for()
        page.get_by_role("button", name="Load the demo workspace").click()
        page.get_by_text("demo", exact=True).first.wait_for(state="attached")
        wait_for_app(page)
        page.screenshot(path=tmp_path / "workspace.png")
        with Session(engine) as s:
            assert store.row_counts(s)["examples"] == 600

        # Data: a malformed upload is refused with the CLI's message, naming file, line and field
        goto(page, "Data", "Data")
        page.locator("input[type=file]").set_input_files(str(DATA / "malformed" / "duplicate_id.jsonl"))
        page.get_by_text("duplicate_id.jsonl:3: field 'id': duplicate id 'q-001' (first on line 1)").wait_for()
        page.screenshot(path=tmp_path / "data.png")

        # Run: a single + split pair on the simulated judge over the same 40 examples
        goto(page, "Run", "Run")
        fill_field(page, page.get_by_label("Examples (seeded sample)"), "40")
        page.get_by_role("button", name="Start").click()
        page.get_by_text(re.compile(r"Started demo-single, demo-split — 40 examples each \(seed 1\)")).wait_for()

        def both_done() -> bool:
            with Session(engine) as s:
                runs = s.scalars(select(store.Run)).all()
                return len(runs) == 2 and all(r.status == "done" for r in runs)

        wait_until(both_done, message="both runs to finish")
        page.get_by_text(re.compile(r"demo-split — split.*done: 240/240 verdicts")).wait_for()
        page.get_by_text(re.compile(r"demo-single — single.*done: 240/240 verdicts")).wait_for()
        page.screenshot(path=tmp_path / "run.png")

        # Cross-tabs: the table's counts equal the database's
        goto(page, "Cross-tabs", "Cross-tabs")
        page.get_by_text("As plain text").click()  # seed 003's layout
        code = page.locator("[data-testid='stCode']").first.inner_text()
        source = code.splitlines()[0].split()[0].removeprefix("run:")
        row_line, fail_line = (ln for ln in code.splitlines() if re.search(r"\s(pass|fail)\s+\d+\s+\d+\s+\(", ln))
        shown = [[int(x) for x in re.findall(r"\s(\d+)\s+(\d+)\s+\(", ln)[0]] for ln in (row_line, fail_line)]
        assert source in ("demo-single", "demo-split")
        assert shown == crosstab_from_store(engine, source, "cites_source", "answers_question")
        page.screenshot(path=tmp_path / "crosstabs.png")

        # Associations: phi heatmaps side by side (at least two), the audit
        goto(page, "Associations", "Associations")
        page.locator("[data-testid='stPlotlyChart']").nth(1).wait_for()
        assert page.locator("[data-testid='stPlotlyChart']").count() >= 2
        page.screenshot(path=tmp_path / "associations.png")

        goto(page, "Compare", "Compare")
        page.locator("[data-testid='stPlotlyChart']").first.wait_for()
        page.screenshot(path=tmp_path / "compare.png")
        goto(page, "Agreement", "Agreement")
        page.screenshot(path=tmp_path / "agreement.png")
        errors = page.locator("[data-testid='stException']").count()
        assert errors == 0
    assert all((tmp_path / f"{p}.png").stat().st_size > 10_000 for p in
               ("workspace", "data", "run", "crosstabs", "associations", "compare", "agreement"))


PAYLOADS = [
    '<script>window.__pwned = "script"</script>',
    '<img src=x onerror="window.__pwned = \'img\'">',
    "[click me](javascript:window.__pwned='link')",
    '<svg onload="window.__pwned=\'svg\'"></svg>',
]


def test_untrusted_text_never_executes(engine, db_url, tmp_path, cli):
    rows = [{"id": f"x-{i}", "question": f"Q {i} {p}", "context": p, "answer": f"Answer {i}: {p}"}
            for i, p in enumerate(PAYLOADS)]
    (tmp_path / "xss.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    assert cli("import-dataset", tmp_path / "xss.jsonl", "--name", "xss").exit_code == 0
    for name, flip in (("xss-a", 0), ("xss-b", 1)):
        lines = [json.dumps({"example_id": f"x-{i}", "criterion": k, "verdict": bool((i + j + flip) % 2),
                             "rationale": f"Because {p}"})
                 for i, p in enumerate(PAYLOADS) for j, k in enumerate(["answers_question", "cites_source"])]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        assert cli("import-run", tmp_path / f"{name}.jsonl", "--dataset", "xss", "--rubric", "demo",
                   "--name", name).exit_code == 0
    with streamlit_server(db_url, tmp_path / "streamlit.log") as base, chromium_page() as page:
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        for link, heading in (("Cross-tabs", "Cross-tabs"), ("Compare", "Compare")):
            page.goto(base)
            page.get_by_role("heading", name="Workspace").wait_for()
            goto(page, link, heading)
            page.get_by_role("combobox").first.click()  # the dataset picker (two datasets)
            page.get_by_role("option", name=re.compile("^xss")).click()
            wait_for_app(page)
            page.get_by_text("window.__pwned", exact=False).first.wait_for(state="attached")
            for link_el in page.locator("a[href^='javascript:']").all():
                raise AssertionError(f"a javascript: link was rendered: {link_el.get_attribute('href')}")
            page.screenshot(path=tmp_path / f"xss-{link}.png")
            assert page.evaluate("() => window.__pwned === undefined"), page.evaluate("() => window.__pwned")
        assert dialogs == []


def test_server_killed_during_background_run_resumes_exactly(engine, db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("JK_TEST_KEY", "sk-test-not-a-real-key")  # the resume below runs in this process
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=60)
    concurrency = 4
    with ScriptedServer(default=slow(0.1)) as srv:
        env = {"JK_TEST_KEY": "sk-test-not-a-real-key"}
        with streamlit_server(db_url, tmp_path / "streamlit.log", extra_env=env) as base, \
                chromium_page() as page:
            page.goto(base)
            page.get_by_role("heading", name="Workspace").wait_for()
            goto(page, "Run", "Run")
            page.get_by_text("OpenAI-compatible endpoint").click()
            wait_for_app(page)
            fill_field(page, page.get_by_label("Base URL"), srv.base_url)
            fill_field(page, page.get_by_label("Model"), "scripted")
            key_env = page.get_by_role("textbox", name="Name of the environment variable holding the key")
            fill_field(page, key_env, "JK_TEST_KEY")
            fill_field(page, page.get_by_label("Examples (seeded sample)"), "40")
            fill_field(page, page.get_by_label("Concurrency"), str(concurrency))
            page.get_by_role("button", name="Start").click()

            def both_created() -> bool:
                with Session(engine) as s:
                    return len(s.scalars(select(store.Run)).all()) == 2

            wait_until(both_created, message="the two runs to be created")
            with Session(engine) as s:  # the sample typed on the page is the sample the runs were created with
                for run in s.scalars(select(store.Run)):
                    assert len(store.run_example_ids(s, run.id)) == 40, run.name

            def some_stored() -> bool:
                with Session(engine) as s:
                    return s.scalar(select(func.count()).select_from(store.Call)) >= 30

            wait_until(some_stored, message="calls to be stored")
            os.kill(SERVERS[base].pid, signal.SIGKILL)
        with Session(engine) as s:
            names = [r.name for r in s.scalars(select(store.Run).order_by(store.Run.id))]
            stored = s.scalar(select(func.count()).select_from(store.Call))
        assert len(names) == 2 and stored < 40 + 240, "the kill must land mid-run"
        served_before = len(srv.requests)
        for name in names:
            assert runner.run_sync(engine, name, concurrency=concurrency).status == "done"
        served = len(srv.requests)
    with Session(engine) as s:
        for name in names:
            run = store.get_run(s, name)
            n = s.scalar(select(func.count()).select_from(store.Verdict).where(store.Verdict.run_id == run.id))
            assert n == 40 * 6
    lost = served_before - stored
    assert 0 <= lost <= 2 * concurrency  # two runs in flight, each repeats at most `concurrency` calls
    assert served - (40 + 240) == lost

