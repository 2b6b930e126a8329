"""The dashboard's views in a real Chromium at 1400 × 1000 against `streamlit run app.py`: the phi matrices
(measured), the examples × runs grid, the first screen, the newcomer's steps (Data, Run, Workspace), the
words and numbers of Agreement / Compare / Cross-tabs, and choices carried across pages and links.

One workspace is built per module — the demo (200 answers), four runs on the simulated judge and a second
annotator on 80 answers — and served once for the views that only read. Tests that write get their own.
Screenshots go to $JUDGEKIT_SCREENSHOTS_DIR when set (the README's pictures), else to the test's folder.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from sqlalchemy.orm import Session

from judgekit import grid, imports, reports, runner, simjudge, store
from judgekit.harness import parse_harness
from tests.browser import chromium_page, fill_field, screenshot, settle, streamlit_server
from tests.conftest import DATA, DEMO_KEYS

pytestmark = pytest.mark.browser

W, H = 1400, 1000
N = 200
RUNS = (("one-call", "single"), ("per-criterion", "split"),
        ("grouped", "grouped:answers_question+cites_source|grounded+no_fabrication|refuses_when_unanswerable+concise"),
        ("one-call-note", "single"))
CRITERIA = DEMO_KEYS


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("views") / "views.sqlite"
    url = f"sqlite:///{path}"
    engine = store.engine_for(url)
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=N)
    srv = simjudge.start_in_thread(url, simjudge.SimParams())
    try:
        judge = runner.JudgeSpec(base_url=srv.base_url, model=simjudge.SIM_MODEL, kind="simulated")
        for name, spec in RUNS:
            with Session(engine) as s, s.begin():
                runner.create_run(s, dataset="demo", rubric="demo", judge=judge, name=name,
                                  harness=parse_harness(spec, independence_note=name.endswith("note")))
            assert runner.run_sync(engine, name, concurrency=16).status == "done"
    finally:
        srv.stop()
    with Session(engine) as s, s.begin():  # ana: the planted truth on the first 80 answers, every 9th flipped
        ds = store.get_dataset(s, "demo")
        ids = store.example_ids(s, ds.id)
        first = set(sorted(ids.values())[:80])
        truth = [r for r in store.labels_for_dataset(s, ds.id) if r["annotator"] == "reference"]
        store.upsert_labels(s, [{"example_id": ids[r["example_id"]], "criterion": r["criterion"], "annotator": "ana",
                                 "value": 1 - r["value"] if i % 9 == 0 else r["value"]}
                                for i, r in enumerate(truth) if ids[r["example_id"]] in first])
    store.dispose_engines()
    return url


@pytest.fixture(scope="module")
def app_url(built, tmp_path_factory):
    with streamlit_server(built, tmp_path_factory.mktemp("views-log") / "streamlit.log") as base:
        yield base


def run_id(url: str, name: str) -> int:
    with Session(store.engine_for(url)) as s:
        return store.get_run(s, name).id


def panels(page) -> list[dict]:
    """The plot areas of the first plotly figure on the page, as rendered (x, y, width, height in px)."""
    return page.evaluate("""() => {
        const fig = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
        return Array.from(fig.querySelectorAll('.draglayer .nsewdrag')).map(e => {
            const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; });
    }""")


def figure_text(page) -> str:
    return page.evaluate("""() => Array.from(document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot')
        .querySelectorAll('text')).map(t => t.textContent).join('\\n')""")


def test_phi_matrices_are_legible_side_by_side_and_open_cross_tabs(built, app_url, tmp_path):
    with chromium_page(W, H) as page:
        # the first request this server sees is a page's own URL, with its choices in it (a shared link)
        keys = ["human"] + [f"run:{run_id(built, n)}" for n, _ in RUNS]
        page.goto(f"{app_url}/associations?" + "&".join(f"sources={k}" for k in keys))
        settle(page)
        menu = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert "Workspace" in menu and "Examples" in menu and "app" not in menu.split()  # the router's menu
        page.get_by_role("heading", name="phi per source").scroll_into_view_if_needed()
        page.get_by_role("heading", name="phi per source").evaluate("e => e.scrollIntoView({block: 'start'})")
        settle(page)
        boxes = panels(page)
        assert len(boxes) == 5  # four runs and the human column
        widths = [round(b["w"]) for b in boxes]
        print(f"matrix widths at {W} px: {widths}; cell {min(b['w'] for b in boxes) / 5:.0f} px")
        for b in boxes:
            assert b["w"] >= 180 and b["w"] / 5 >= 36, widths  # five columns of at least 36 px
            assert b["h"] / 5 >= 32  # and rows tall enough for the 13-px values
            assert b["x"] >= 0 and b["x"] + b["w"] <= W and b["y"] >= 0 and b["y"] + b["h"] <= H, boxes  # all in view
        text = figure_text(page)
        assert all(k in text for k in CRITERIA), "every criterion label is on the figure"
        assert "the human column · n = 80" in text and text.count("n = 80") == 5  # the labelled answers only
        assert re.search(r"induced by this harness|real: the humans see it too|undecided", text)
        values = page.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot .heatmaplayer text'))
            .map(t => parseFloat(getComputedStyle(t).fontSize))""")
        assert values and min(values) >= 12
        shot = screenshot(page, "associations", tmp_path)
        assert shot.stat().st_size > 30_000

        # a click on a cell opens that pair under that source in Cross-tabs
        b = boxes[1]
        page.mouse.click(b["x"] + b["w"] * 2.5 / 5, b["y"] + b["h"] * 2.5 / 5)  # row 4 no_fabrication × col 3 grounded
        page.get_by_role("heading", name="Cross-tabs").wait_for()
        settle(page)
        assert f"source=run%3A{run_id(built, 'one-call')}" in page.url
        assert "row=grounded" in page.url and "col=no_fabrication" in page.url
        page.get_by_role("heading", name="grounded × no_fabrication").wait_for()


def test_examples_grid_filters_and_opens_an_answer(built, app_url, tmp_path):
    single, split = (f"run:{run_id(built, n)}" for n in ("one-call", "per-criterion"))
    with Session(store.engine_for(built)) as s:
        cols = []
        for key in (single, split):
            run = store.get_run(s, int(key.split(":")[1]))
            src = reports.load_run(s, run)
            cols.append(grid.GridColumn(key, run.name, src, np.ones(len(src.index), dtype=bool)))  # all 200
        cols.append(grid.GridColumn("human", "the human column", reports.load_human(s, "demo")))
        expected = grid.grid_page(s, cols, grid.GridQuery(("cites_source",), frozenset({"flips"})), 0)
    with chromium_page(W, H) as page:
        page.goto(f"{app_url}/examples?sources={single}&sources={split}&sources=human&criteria=cites_source"
                  "&filter=flips&labelled=False")
        settle(page)
        assert page.get_by_text(f"{expected.total} answers match").count() == 1
        frame = page.locator('[data-testid="stDataFrame"]').first
        frame.scroll_into_view_if_needed()
        # every column of the grid is in view at 1400 px: the id, the answer, both runs and the human column
        headers = page.evaluate("""() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"] [role="columnheader"]'))
            .map(h => { const r = h.getBoundingClientRect(); return [h.innerText.trim(), r.x + r.width]; })""")
        shown = {h: right for h, right in headers if h}
        assert {"id", "answer", "one-call", "per-criterion", "the human column"} <= set(shown), shown
        assert max(shown.values()) <= W
        page.locator('[data-testid="stMain"]').evaluate("m => m.scrollTo(0, 0)")
        settle(page, quiet_s=0.5)
        screenshot(page, "examples", tmp_path)
        # select the first row: the whole answer and every run's rationale open below
        box = frame.bounding_box()
        page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)
        page.get_by_role("heading", name="The whole example").wait_for()
        settle(page)
        assert f"example={expected.ids[0]}" in page.url
        page.get_by_text("Verdicts and labels on this example").wait_for()
        screenshot(page, "examples-detail", tmp_path, full_page=True)


def test_first_screen_tells_the_story_and_links_to_each_view(app_url, tmp_path):
    with chromium_page(W, H) as page:
        page.goto(app_url)
        page.get_by_role("heading", name="What dataset demo shows").wait_for()
        settle(page)
        body = page.locator('[data-testid="stMain"]').inner_text()
        assert "Associations a harness shows that the humans do not" in body
        assert "cost" in body and "× the tokens of" in body
        assert "Agreement with the humans (mean Cohen's κ" in body
        # the runs table shows cost and wall time at 1400 px
        headers = page.evaluate("""() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"] [role="columnheader"]'))
            .map(h => { const r = h.getBoundingClientRect(); return [h.innerText.trim(), r.x + r.width]; })""")
        right = {h: x for h, x in headers if h}
        assert right["cost (USD)"] <= W and right["wall time"] <= W
        screenshot(page, "workspace", tmp_path)
        page.locator('[data-testid="stPageLink"]').filter(has_text="Associations").first.click()
        page.get_by_role("heading", name="Associations").wait_for()
        settle(page)
        assert "sources=human" in page.url


def test_words_and_numbers_on_agreement_compare_and_cross_tabs(built, app_url, tmp_path):
    with chromium_page(W, 1600) as page:
        page.goto(f"{app_url}/agreement")
        page.get_by_role("heading", name="Judge vs human").wait_for()
        settle(page)
        body = page.locator('[data-testid="stMain"]').inner_text()
        assert "human: human" not in body and "no P(pass)" not in body and "None" not in body
        assert "AUC needs the judge's P(pass)" in body
        screenshot(page, "agreement", tmp_path)

        page.goto(f"{app_url}/compare?a=run:{run_id(built, 'one-call')}&b=run:{run_id(built, 'per-criterion')}")
        heading = page.get_by_role("heading", name="Cost vs agreement with the humans, every run of the dataset")
        heading.wait_for()
        heading.evaluate("e => e.scrollIntoView({block: 'start'})")
        settle(page)
        find = """() => { const f = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
            f => f._fullLayout && (f._fullLayout.title.text || '').includes('cost vs agreement'));
            return f ? [f._fullLayout.yaxis.range[0], f._fullLayout.xaxis.range[0]] : null; }"""
        page.wait_for_function(find)
        y0 = page.evaluate(find)
        assert y0[0] <= 0 and y0[1] <= 0  # neither axis exaggerates a small difference
        screenshot(page, "compare", tmp_path)
        page.get_by_role("button", name="Open in Examples").click()
        page.get_by_role("heading", name="Examples").wait_for()
        settle(page)
        assert "filter=flips" in page.url

        page.goto(f"{app_url}/crosstabs")
        page.get_by_role("heading", name="Examples in a cell").wait_for()
        settle(page)
        body = page.locator('[data-testid="stMain"]').inner_text()
        assert "seed 00" not in body.lower() and "As plain text" in body
        page.get_by_role("button", name="Open in Examples").click()
        page.get_by_role("heading", name="Examples").wait_for()
        settle(page)
        assert "cell=" in page.url and page.get_by_text("(a cross-tab cell)").count() == 1


def test_the_dataset_chosen_on_one_page_is_the_dataset_of_the_next(engine, db_url, tmp_path, cli):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    assert cli("import-dataset", DATA / "good" / "dataset.jsonl", "--name", "other").exit_code == 0
    with streamlit_server(db_url, tmp_path / "streamlit.log") as base, chromium_page(W, H) as page:
        page.goto(f"{base}/crosstabs")
        settle(page)
        page.locator('[data-testid="stSelectbox"]').filter(has_text="Dataset").click()
        page.get_by_role("option", name=re.compile("^other")).click()
        settle(page)
        assert "dataset=other" in page.url
        page.get_by_role("link", name="Agreement").first.click()
        page.get_by_role("heading", name="Agreement").wait_for()
        settle(page)
        assert "dataset=other" in page.url
        assert "No runs on this dataset yet" in page.locator('[data-testid="stMain"]').inner_text()


# --------------------------------------------------------------------------------------------- pages that write


def test_data_page_names_the_dataset_after_its_file(engine, db_url, tmp_path):
    with streamlit_server(db_url, tmp_path / "streamlit.log") as base, chromium_page(W, H) as page:
        page.goto(f"{base}/data")
        settle(page)
        page.locator("input[type=file]").set_input_files(str(DATA / "good" / "dataset.jsonl"))
        settle(page)
        name = page.get_by_label("Dataset name")
        assert name.input_value() == "dataset"
        name.fill("")
        name.press("Enter")
        settle(page)
        page.get_by_role("button", name="Import").click()
        page.get_by_text("Name the dataset in the box above.").wait_for()
        assert "--name" not in page.locator('[data-testid="stMain"]').inner_text()
        name.fill("support-answers")
        name.press("Enter")
        settle(page)
        page.get_by_role("button", name="Import").click()
        settle(page)
        screenshot(page, "data", tmp_path)
    with Session(engine) as s:
        assert store.get_dataset(s, "support-answers")


def test_run_page_for_a_newcomer(engine, db_url, tmp_path):
    """The form survives leaving the page; a local judge that cannot start is one readable line; a run that
    failed at its endpoint says so with a Resume button beside it, not a command to type."""
    from tests.scripted_server import ScriptedServer, status

    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"not a model\n" * 64)
    with ScriptedServer(default=status(500, message="upstream down")) as dead, \
            streamlit_server(db_url, tmp_path / "streamlit.log") as base, chromium_page(W, 1800) as page:
        page.goto(f"{base}/run")
        settle(page)
        sample = page.get_by_label("Examples (seeded sample)")
        sample.fill("7")
        sample.press("Enter")
        settle(page)
        page.get_by_role("link", name="Workspace").first.click()
        page.get_by_role("heading", name="Workspace").wait_for()
        settle(page)
        page.get_by_role("link", name="Run").first.click()
        page.get_by_role("heading", name="Run").first.wait_for()
        settle(page)
        assert page.get_by_label("Examples (seeded sample)").input_value() == "7"

        page.get_by_text("Bundled local judge").click()
        settle(page)
        page.get_by_text("Start a local judge inside this app instead").click()
        settle(page)
        model = page.get_by_label("Model file (GGUF; empty: the bundled SmolLM2-135M)")
        model.fill(str(bogus))
        model.press("Enter")
        page.get_by_text("The local judge did not start: local judge: the server exited").wait_for(timeout=90_000)
        settle(page)
        assert page.locator('[data-testid="stException"]').count() == 0  # no traceback
        screenshot(page, "run-local-judge-error", tmp_path)
        page.get_by_text("Start a local judge inside this app instead").click()
        settle(page)

        page.get_by_text("OpenAI-compatible endpoint").click()
        settle(page)
        fill_field(page, page.get_by_label("Base URL"), dead.base_url)
        fill_field(page, page.get_by_label("Model"), "judgekit-test")
        fill_field(page, page.get_by_role("textbox", name="Name of the environment variable holding the key"), "")
        page.get_by_role("button", name="Test this endpoint").click()
        page.get_by_text(re.compile(r"^one tiny call: ")).wait_for(timeout=60_000)
        settle(page)
        fill_field(page, page.get_by_role("textbox", name="Name (optional)"), "outage")
        fill_field(page, page.get_by_label("Concurrency"), "1")
        screenshot(page, "run-before-start", tmp_path, full_page=True)
        page.get_by_role("button", name="Start").click()
        page.get_by_text(re.compile(r"outage-single stopped: .*press Resume")).wait_for(timeout=120_000)
        body = page.locator('[data-testid="stMain"]').inner_text()
        assert "judgekit resume" not in body
        assert page.get_by_role("button", name="Resume").count() >= 1
        screenshot(page, "run-failed", tmp_path)


def test_run_page_starts_the_bundled_judge_despite_a_leaked_port(engine, db_url, tmp_path):
    """`make demo PORT=…` exports PORT; the app's "start a local judge" must not hand it to llama.cpp."""
    pytest.importorskip("llama_cpp")
    from judgekit.localjudge import free_port

    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=10)
    decoy = free_port()
    with streamlit_server(db_url, tmp_path / "streamlit.log", extra_env={"PORT": str(decoy)}) as base, \
            chromium_page(W, H) as page:
        page.goto(f"{base}/run")
        settle(page)
        page.get_by_text("Bundled local judge").click()
        settle(page)
        page.get_by_text("Start a local judge inside this app instead").click()
        served = page.get_by_text(re.compile(r"Serving at http://127\.0\.0\.1:\d+/v1"))
        served.wait_for(timeout=120_000)
        port = int(re.search(r":(\d+)/v1", served.inner_text()).group(1))
        assert port != decoy


def test_workspace_delete_asks_again_for_the_next_run(engine, db_url, tmp_path, cli):
    assert cli("import-dataset", DATA / "good" / "dataset.jsonl", "--name", "base").exit_code == 0
    assert cli("import-rubric", DATA / "good" / "rubric.yaml").exit_code == 0
    for name in ("first", "second"):
        assert cli("import-run", DATA / "good" / "run.jsonl", "--dataset", "base", "--rubric", "support",
                   "--name", name).exit_code == 0
    with streamlit_server(db_url, tmp_path / "streamlit.log") as base, chromium_page(W, 1600) as page:
        page.goto(base)
        settle(page)
        page.get_by_text("Delete a run").click()
        page.get_by_text("Yes, delete run first with all its calls and verdicts").click()
        settle(page)
        page.get_by_role("button", name="Delete").click()
        settle(page)
        box = page.get_by_role("checkbox", name=re.compile("Yes, delete run second"))
        assert not box.is_checked()
        assert page.get_by_role("button", name="Delete").is_disabled()
    with Session(engine) as s:
        assert [r["name"] for r in store.list_runs(s)] == ["second"]
