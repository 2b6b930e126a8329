"""AppTest over the analysis pages (Cross-tabs, Associations, Compare, Agreement) on real runs.

One module-scoped workspace is built once -- the demo dataset (120 examples, `reference` labels), a
`single` and a `split` run on the simulated judge, a second annotator `ana` on 60 examples, and an
imported run that passes every answer on cites_source (the constant-column case) -- and each test gets a
private copy of the SQLite file at the path the autouse ``workspace`` fixture points JUDGEKIT_DB_URL to.
One example's answer and one imported rationale carry a ``<script>`` payload.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from judgekit import imports, reports, runner, simjudge, sources, store, ui
from judgekit.harness import parse_harness
from tests.conftest import DEMO_KEYS, private_copy

APP = Path(__file__).resolve().parents[1] / "app.py"
PAGES = ("pages/crosstabs.py", "pages/associations.py", "pages/compare.py", "pages/agreement.py")
TITLES = {
    "pages/crosstabs.py": "Cross-tabs",
    "pages/associations.py": "Associations",
    "pages/compare.py": "Compare",
    "pages/agreement.py": "Agreement",
}
PAYLOAD = "<script>window.pwned=1</script>"
HOSTILE_ID = "hostile-1"
N_EXAMPLES = 120
CRITERIA = DEMO_KEYS


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> str:
    """The populated workspace, built once per module; returns its SQLite file path."""
    path = tmp_path_factory.mktemp("analysis") / "built.sqlite"
    url = f"sqlite:///{path}"
    engine = store.engine_for(url)
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=N_EXAMPLES)
        ds = store.get_dataset(s, "demo")
        ids = store.example_ids(s, ds.id)
        hostile = sorted(ids)[7]
        s.execute(
            update(store.Example)
            .where(store.Example.id == ids[hostile])
            .values(answer=f"Sure. {PAYLOAD} Open Settings.", ext_id=HOSTILE_ID)
        )
        ids = store.example_ids(s, ds.id)
        # a second human: `ana` agrees with the planted truth except on every seventh label
        truth = [r for r in store.labels_for_dataset(s, ds.id) if r["criterion"] in CRITERIA]
        labelled = sorted(ids)[:60]
        ana = [
            {
                "example_id": ids[r["example_id"]],
                "criterion": r["criterion"],
                "annotator": "ana",
                "value": (1 - r["value"]) if i % 7 == 0 else r["value"],
                "note": PAYLOAD if r["example_id"] == HOSTILE_ID else None,
            }
            for i, r in enumerate(truth)
            if r["example_id"] in labelled
        ]
        store.upsert_labels(s, ana)
    srv = simjudge.start_in_thread(url, simjudge.SimParams())
    try:
        for spec in ("single", "split"):
            judge = runner.JudgeSpec(base_url=srv.base_url, model=simjudge.SIM_MODEL, kind="simulated")
            with Session(engine) as s, s.begin():
                runner.create_run(
                    s,
                    dataset="demo",
                    rubric="demo",
                    harness=parse_harness(spec),
                    judge=judge,
                    name=f"sim-{spec}",
                )
            assert runner.run_sync(engine, f"sim-{spec}", concurrency=8).status == "done"
    finally:
        srv.stop()
    # the imported run: every answer passes cites_source; the other criteria copy the planted truth
    run_file = path.parent / "all-pass.jsonl"
    with Session(engine) as s:
        truth = [
            r
            for r in store.labels_for_dataset(s, store.get_dataset(s, "demo").id)
            if r["criterion"] in CRITERIA and r["annotator"] == "reference"
        ]
    with run_file.open("w", encoding="utf-8") as f:
        for r in truth:
            value = True if r["criterion"] == "cites_source" else bool(r["value"])
            rationale = f"quoted {PAYLOAD}" if r["example_id"] == HOSTILE_ID else "looks fine"
            f.write(
                json.dumps(
                    {
                        "example_id": r["example_id"],
                        "criterion": r["criterion"],
                        "verdict": value,
                        "rationale": rationale,
                    }
                )
                + "\n"
            )
    with Session(engine) as s, s.begin():
        imports.import_run(s, run_file, dataset="demo", rubric="demo", name="all-pass")
    store.dispose_engines()
    return str(path)


@pytest.fixture
def populated(built, db_url) -> str:
    """A private copy of the built workspace at this test's JUDGEKIT_DB_URL."""
    return private_copy(built, db_url)


def app() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    return at


def open_page(page: str) -> AppTest:
    at = app()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest, kind: str) -> list[str]:
    """Values of every element of a kind; ``alert`` = info, warning, error and success boxes."""
    kinds = ("info", "warning", "error", "success") if kind == "alert" else (kind,)
    return [str(e.value) for k in kinds for e in at.get(k)]


def table(at: AppTest, column: str, nth: int = 0):
    """The nth dataframe on the page that has ``column`` (AppTest does not expose dataframe keys)."""
    frames = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(frames) > nth, f"no table with a {column!r} column"
    return frames[nth]


def run_key(db_url: str, name: str) -> str:
    with Session(store.engine_for(db_url)) as s:
        return f"run:{store.get_run(s, name).id}"


# --------------------------------------------------------------------------------------------- smoke


@pytest.mark.parametrize("page", PAGES)
def test_page_smoke(populated, page):
    at = open_page(page)
    assert at.title[0].value == TITLES[page]
    assert at.dataframe, "every analysis page shows at least one table"
    if page != "pages/crosstabs.py":
        assert at.get("plotly_chart"), f"{page} shows plotly charts"
    if page in ("pages/associations.py", "pages/compare.py"):
        assert at.get("download_button"), "the HTML report can be downloaded"
    captions = " ".join(texts(at, "caption") + texts(at, "markdown"))
    assert "simulated" in captions, "every view names its judge; the simulated judge says so"
    assert "n \\= " in captions or "n = " in captions


@pytest.mark.parametrize("page", PAGES)
def test_empty_db_says_what_to_do_next(page):
    at = open_page(page)
    infos = " ".join(texts(at, "alert"))
    assert "Run page" in infos and "judgekit run" in infos
    assert not at.dataframe and not at.get("plotly_chart")


@pytest.mark.parametrize("page", ["pages/crosstabs.py", "pages/associations.py", "pages/agreement.py"])
def test_dataset_without_runs_or_labels(page, cli):
    from tests.conftest import DATA

    assert cli("import-dataset", DATA / "good" / "dataset.jsonl", "--name", "bare").exit_code == 0
    at = open_page(page)
    infos = " ".join(texts(at, "alert"))
    assert "Run page" in infos and "Label page" in infos


# --------------------------------------------------------------------------------------------- cross-tabs


def labelled_by(db_url: str, annotator: str) -> set[int]:
    """Internal ids of the examples ``annotator`` labelled, straight from the label rows."""
    with Session(store.engine_for(db_url)) as s:
        return set(s.scalars(select(store.Label.example_id).join(store.Annotator)
                             .where(store.Annotator.name == annotator, store.Label.value.is_not(None))))


def store_counts(db_url: str, run: str, row: str, col: str, only: set[int] | None = None
                 ) -> dict[tuple[int, int], int]:
    """Counts computed straight from store.Verdict rows (no reports / stats code), over ``only`` if given."""
    with Session(store.engine_for(db_url)) as s:
        r = store.get_run(s, run)
        keys = {c.id: c.key for c in store.criterion_rows(s, r.rubric_id)}
        by: dict[str, dict[int, int]] = {row: {}, col: {}}
        for ex, cid, value in s.execute(
            select(store.Verdict.example_id, store.Verdict.criterion_id, store.Verdict.value).where(
                store.Verdict.run_id == r.id
            )
        ):
            if keys[cid] in by and value is not None:
                by[keys[cid]][ex] = value
    both = set(by[row]) & set(by[col])
    if only is not None:
        both &= only
    out = {(a, b): 0 for a in (1, 0) for b in (1, 0)}
    for ex in both:
        out[(by[row][ex], by[col][ex])] += 1
    return out


def test_crosstab_numbers_equal_the_store(populated):
    at = open_page("pages/crosstabs.py")
    at.selectbox(key="ct_source").set_value(run_key(populated, "sim-single")).run()
    assert at.selectbox(key="ct_row").value == "cites_source"
    assert at.selectbox(key="ct_col").value == "answers_question"
    counts = store_counts(populated, "sim-single", "cites_source", "answers_question")
    tab = table(at, "row total")
    pp, pf, fp, ff = counts[(1, 1)], counts[(1, 0)], counts[(0, 1)], counts[(0, 0)]
    assert list(tab["answers_question pass"]) == [pp, fp]
    assert list(tab["answers_question fail"]) == [pf, ff]
    assert list(tab["row total"]) == [f"({pp + pf})", f"({fp + ff})"]
    assert list(tab["answers_question fails"]) == [f"{pf / (pp + pf):.1%}", f"{ff / (fp + ff):.1%}"]
    sentence = " ".join(texts(at, "markdown")).replace("\\", "")
    assert (
        f"Among the {pp + pf} answers that pass cites_source, {pf / (pp + pf):.1%} fail answers_question; "
        f"among the {fp + ff} that fail it, {ff / (fp + ff):.1%} do." in sentence
    )
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["n (both scored)"] == str(N_EXAMPLES)
    # phi from the hand counts: (ad - bc) / sqrt(row and column totals)
    den = ((pp + pf) * (fp + ff) * (pp + fp) * (pf + ff)) ** 0.5
    assert metrics["phi"] == f"{(pp * ff - pf * fp) / den:.3f}"
    assert metrics["ratio of answers_question failure rates"] == f"{(ff / (fp + ff)) / (pf / (pp + pf)):.2f}"


def test_constant_column_is_explained_in_words(populated):
    at = open_page("pages/crosstabs.py")
    at.selectbox(key="ct_source").set_value(run_key(populated, "all-pass")).run()
    assert not at.exception
    warnings = " ".join(texts(at, "alert")).replace("\\", "")
    assert (
        f"every verdict of cites_source under run all-pass is pass ({N_EXAMPLES} of {N_EXAMPLES}): phi is undefined"
        in warnings
    )
    assert {m.label: m.value for m in at.metric}["phi"] == "undefined"

    at = open_page("pages/associations.py")
    keys = [run_key(populated, n) for n in ("sim-single", "all-pass")] + ["human"]
    at.multiselect(key="as_sources").set_value(keys).run()
    assert not at.exception
    warnings = " ".join(texts(at, "alert")).replace("\\", "")
    assert "every verdict of cites_source under run all-pass is pass" in warnings
    assert len(at.get("plotly_chart")) == 2  # the three matrices in one figure, and the difference


# --------------------------------------------------------------------------------------------- associations


def test_audit_verdict_per_pair_and_handoff_to_crosstabs(populated):
    at = open_page("pages/associations.py")
    audit = table(at, "verdict")
    assert len(audit) == len(list(itertools.combinations(CRITERIA, 2)))
    words = ("real", "none", "undecided", "induced by ", "distorted by ")
    assert all(any(v.startswith(w) for w in words) for v in audit["verdict"])
    assert any(col.startswith("run sim-single") for col in audit.columns)
    assert any(col == "the human column" for col in audit.columns)
    # the page shows what `report phi` says, with the runs' display names instead of their keys
    with Session(store.engine_for(populated)) as s:
        srcs = reports.load_sources(s, ["sim-single", "sim-split", "all-pass"], human=True, dataset="demo")
    expected = reports.phi_report(srcs, n_boot=1000)
    for row, a in zip(audit.to_dict("records"), expected.audit, strict=True):
        assert row["pair"] == f"{a.a} × {a.b}"
        assert row["verdict"].split(" by ")[0] == a.verdict
        assert row["evidence"].split(":")[0] == a.note.split(":")[0]
        assert bool(row["label next"]) == (a.label_more is not None)
    captions = " ".join(texts(at, "caption")).replace("\\", "")
    assert "Benjamini" in captions and "reference harness" in captions and "undecided: label about k more" in captions
    summary = " ".join(texts(at, "markdown")).replace("\\", "")
    assert any(w in summary for w in ("induced by run sim-single", "real", "undecided"))

    split = run_key(populated, "sim-split")
    at.selectbox(key="as_pair").set_value("grounded × no_fabrication")
    at.selectbox(key="as_pair_source").set_value(split)
    at.button(key="as_open_crosstab").click().run()
    assert not at.exception
    assert at.title[0].value == "Cross-tabs"
    assert at.selectbox(key="ct_source").value == split
    assert at.selectbox(key="ct_row").value == "grounded"
    assert at.selectbox(key="ct_col").value == "no_fabrication"
    # the Associations page counted only the labelled answers (humans shown), and the choice carries over
    assert at.toggle(key="ct_labelled").value
    counts = store_counts(populated, "sim-split", "grounded", "no_fabrication", only=labelled_by(populated, "ana"))
    assert list(table(at, "row total")["no_fabrication pass"]) == [counts[(1, 1)], counts[(0, 1)]]
    # (AppTest stays on the page it was switched to by the test; the next run is a fresh Cross-tabs)
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.switch_page("pages/crosstabs.py")
    at.query_params.update({"source": split, "row": "grounded", "col": "no_fabrication", "labelled": "False"})
    at.run()
    assert not at.toggle(key="ct_labelled").value
    counts = store_counts(populated, "sim-split", "grounded", "no_fabrication")
    assert list(table(at, "row total")["no_fabrication pass"]) == [counts[(1, 1)], counts[(0, 1)]]


def test_html_report_builds_and_escapes(populated):
    html = ui.report_html(populated, "demo", ["sim-single", "sim-split", "all-pass"], True).decode()
    assert html.startswith("<!DOCTYPE html>") and "Association audit" in html
    assert PAYLOAD not in html


# --------------------------------------------------------------------------------------------- compare


def test_compare_matches_reports(populated):
    at = open_page("pages/compare.py")
    at.selectbox(key="cmp_a").set_value(run_key(populated, "sim-single"))
    at.selectbox(key="cmp_b").set_value(run_key(populated, "sim-split")).run()
    assert not at.exception
    with Session(store.engine_for(populated)) as s:
        expected = reports.compare_runs(s, "sim-single", "sim-split")
    flips = table(at, "McNemar p").set_index("criterion")
    for k, f in expected.flips.items():
        assert (flips.loc[k, "A fail"], flips.loc[k, "B fail"]) == (f.a_fail, f.b_fail)
        assert (flips.loc[k, "fail→pass"], flips.loc[k, "pass→fail"]) == (f.fail_to_pass, f.pass_to_fail)
    charts = {c.key for c in at.get("plotly_chart")}
    assert {"cmp_attribution", "cmp_cost_agreement"} <= charts <= {"cmp_attribution", "cmp_cost_agreement",
                                                                    "cmp_plan_curve"}  # + the planner's curve
    frame = table(at, "mean_kappa")
    assert set(frame["run"]) == {"sim-single", "sim-split", "all-pass"}
    assert table(at, "answer").shape[0] > 0


# --------------------------------------------------------------------------------------------- agreement


def test_agreement_matches_reports(populated):
    at = open_page("pages/agreement.py")
    at.selectbox(key="ag_run").set_value(run_key(populated, "sim-split")).run()
    with Session(store.engine_for(populated)) as s:
        expected = reports.agreement_report(reports.load_run(s, "sim-split"), reports.load_human(s, "demo"))
    tab = table(at, "κ [95% CI]").set_index("criterion")
    for k, e in expected.criteria.items():
        assert tab.loc[k, "n"] == e["n"] == 60
        assert tab.loc[k, "κ [95% CI]"] == reports.interval_text(e["kappa"], *e["kappa_ci"])
        assert tab.loc[k, "accuracy [95% CI]"] == reports.interval_text(e["accuracy"], *e["accuracy_ci"])
    pooled = table(at, "value [95% CI]").set_index("pooled")
    for label, key in (("macro κ", "macro_kappa"), ("micro κ", "micro_kappa"), ("accuracy", "accuracy")):
        assert pooled.loc[label, "value [95% CI]"] == reports.interval_text(**expected.pooled[key])
    assert table(at, "κ [95% CI]", 1).shape[0] == len(CRITERIA)
    infos = " ".join(texts(at, "alert"))
    assert "Needs two annotators" in infos  # ana alone (reference left out)
    at.checkbox(key="ag_include_reference").check().run()
    alpha = table(at, "Krippendorff α")
    assert set(alpha["criterion"]) >= set(CRITERIA)


def test_agreement_on_scale_criteria(populated):
    engine = store.engine_for(populated)
    srv = simjudge.start_in_thread(populated, simjudge.SimParams())
    try:
        judge = runner.JudgeSpec(base_url=srv.base_url, model=simjudge.SIM_MODEL, kind="simulated")
        with Session(engine) as s, s.begin():
            runner.create_run(
                s,
                dataset="demo",
                rubric="demo-scale",
                harness=parse_harness("single"),
                judge=judge,
                name="scale",
            )
        assert runner.run_sync(engine, "scale", concurrency=8).status == "done"
    finally:
        srv.stop()
    at = open_page("pages/agreement.py")
    at.selectbox(key="ag_run").set_value(run_key(populated, "scale"))
    at.selectbox(key="ag_human").set_value("annotator:reference").run()
    assert not at.exception
    tab = table(at, "κ [95% CI]").set_index("criterion")
    assert {"mean |Δ|", "weighted κ", "Spearman"} <= set(tab.columns)
    with Session(engine) as s:
        expected = reports.agreement_report(
            reports.load_run(s, "scale"), reports.load_annotator(s, "demo", "reference")
        )
    for k, e in expected.criteria.items():
        assert tab.loc[k, "n"] == e["n"] == N_EXAMPLES
        assert tab.loc[k, "weighted κ"] == ui.fmt(e["weighted_kappa"])
        assert tab.loc[k, "Spearman"] == ui.fmt(e["spearman"])


# --------------------------------------------------------------------------------------------- safety


def test_untrusted_text_renders_as_text(populated):
    at = open_page("pages/crosstabs.py")
    at.selectbox(key="ct_source").set_value(run_key(populated, "all-pass")).run()
    cell = next(
        c
        for c in ("pass|pass", "pass|fail")
        if HOSTILE_ID in at.radio(key="ct_cell").set_value(c).run().selectbox(key="ct_example").options
    )
    assert cell
    at.selectbox(key="ct_example").set_value(HOSTILE_ID).run()
    assert not at.exception
    assert any(PAYLOAD in t for t in texts(at, "text")), "the answer is shown as plain text"
    detail = table(at, "rationale / note")
    assert any(PAYLOAD in str(r) for r in detail["rationale / note"]), "rationales and notes stay table cells"
    for kind in ("markdown", "caption", "alert"):
        assert not any("<script" in t for t in texts(at, kind)), f"no raw HTML reaches {kind}"


# --------------------------------------------------------------------------------------------- versions


def test_versions_move_with_new_data(populated):
    engine = store.engine_for(populated)
    with Session(engine) as s:
        ds = store.get_dataset(s, "demo")
        before = sources.versions(s, ds.id)
        before_runs, before_labels = before.runs, before.labels
    assert len(before_runs) == 3 and before_labels[0] > 0
    with Session(engine) as s, s.begin():
        ex = s.scalar(select(store.Example.id).where(store.Example.ext_id == HOSTILE_ID))
        store.upsert_labels(s, [{"example_id": ex, "criterion": "concise", "annotator": "bo", "value": 1}])
    with Session(engine) as s:
        after = sources.versions(s, ds.id)
        after_runs, after_labels = after.runs, after.labels
    assert after_runs == before_runs and after_labels != before_labels


def test_versions_are_reused_until_someone_commits(populated):
    engine = store.engine_for(populated)
    with Session(engine) as s:
        ds = store.get_dataset(s, "demo").id
        first = sources.current_versions(s, ds)
        assert sources.current_versions(s, ds) is first  # nothing committed: no query at all
    with Session(engine) as s, s.begin():
        ex = s.scalar(select(store.Example.id).where(store.Example.ext_id == HOSTILE_ID))
        store.upsert_labels(s, [{"example_id": ex, "criterion": "grounded", "annotator": "ana", "value": 0}])
    with Session(engine) as s:
        after = sources.current_versions(s, ds)
    assert after is not first and after.labels != first.labels and after.runs == first.runs


def test_a_source_is_loaded_once_per_version_and_shared_read_only(populated):
    engine = store.engine_for(populated)
    with Session(engine) as s:
        ds = store.get_dataset(s, "demo").id
        first = sources.versions(s, ds)
        human = sources.shared_source(s, ds, "human", first)
        assert sources.shared_source(s, ds, "human", first) is human  # every reader gets the one object
        assert not human.raw.flags.writeable
        run = next(iter(first.runs))
        assert sources.shared_source(s, ds, f"run:{run}", first).run_id == run
        ex = s.scalar(select(store.Example.id).where(store.Example.ext_id == HOSTILE_ID))
    with Session(engine) as s, s.begin():
        store.upsert_labels(s, [{"example_id": ex, "criterion": "grounded", "annotator": "cy", "value": 0}])
    with Session(engine) as s:
        later = sources.versions(s, ds)
        again = sources.shared_source(s, ds, "human", later)
        assert later.of("human") != first.of("human") and later.of(f"run:{run}") == first.of(f"run:{run}")
        assert again is not human  # the labels' version moved: loaded anew
        assert sources.shared_source(s, ds, f"run:{run}", later) is sources.shared_source(s, ds, f"run:{run}", first)


def test_several_datasets_default_to_the_one_with_runs(populated, cli):
    from tests.conftest import DATA

    assert cli("import-dataset", DATA / "good" / "dataset.jsonl", "--name", "bare").exit_code == 0
    at = open_page("pages/crosstabs.py")
    assert at.selectbox(key="ct_dataset").value == "demo"
    assert table(at, "row total") is not None
    at.selectbox(key="ct_dataset").set_value("bare").run()
    assert not at.exception
    infos = " ".join(texts(at, "alert"))
    assert "Run page" in infos and "Label page" in infos


# --------------------------------------------------------------------------------------------- the views


def figure(at: AppTest, key: str) -> dict:
    chart = next(c for c in at.get("plotly_chart") if c.proto.id.endswith(key) or key in c.proto.id)
    return json.loads(chart.proto.spec)


def test_matrices_share_one_scale_carry_every_label_and_the_audit(populated):
    at = open_page("pages/associations.py")
    keys = [run_key(populated, n) for n in ("sim-single", "sim-split", "all-pass")] + ["human"]
    at.multiselect(key="as_sources").set_value(keys).run()
    fig = figure(at, "as_matrices")
    heat = [t for t in fig["data"] if t["type"] == "heatmap"]
    assert len(heat) == 4 and all(t["coloraxis"] == "coloraxis" for t in heat)  # one colour scale
    assert fig["layout"]["coloraxis"]["cmin"] == -1 and fig["layout"]["coloraxis"]["cmax"] == 1
    text = json.dumps(fig)
    assert all(k in text for k in CRITERIA), "every criterion is named in the figure"
    titles = [a["text"] for a in fig["layout"]["annotations"] if " · n = " in a["text"]]
    assert titles[0].startswith("the human column · n = 60")  # the human column first
    assert all("n = 60" in t for t in titles)  # humans shown: only the labelled answers count by default
    with Session(store.engine_for(populated)) as s:
        srcs = reports.load_sources(s, ["sim-single", "sim-split", "all-pass"], human=True)
        expected = reports.phi_report([src.only(srcs[-1].covered) for src in srcs], n_boot=1000)
        audit = reports.phi_report(srcs, n_boot=1000).audit  # the audit counts every answer, whatever the toggle
    drawn = {t["name"] for t in fig["data"] if t["type"] == "scatter" and t.get("showlegend")}
    words = {a.verdict for a in audit} - {"no human column", "none"}
    assert len(drawn) == len(words) >= 1  # a legend entry per verdict drawn
    # the cell values are the report's, rounded as shown: grounded × no_fabrication under the human column
    i, j = CRITERIA.index("no_fabrication") - 1, CRITERIA.index("grounded")
    assert heat[0]["text"][i][j] == ui.fmt(expected.columns[3].phi[i + 1, j])

    at.toggle(key="as_labelled").set_value(False).run()
    fig = figure(at, "as_matrices")
    titles = [a["text"] for a in fig["layout"]["annotations"] if " · n = " in a["text"]]
    assert "n = 60" in titles[0] and all(f"n = {N_EXAMPLES}" in t for t in titles[1:])

    at.toggle(key="as_diff").set_value(True).run()
    fig = figure(at, "as_matrices")
    heat = [t for t in fig["data"] if t["type"] == "heatmap"]
    with Session(store.engine_for(populated)) as s:
        single, human = (reports.phi_column(src, n_boot=10) for src in reports.load_sources(s, ["sim-single"], human=True))
    assert heat[1]["text"][i][j] == ui.fmt(single.phi[i + 1, j] - human.phi[i + 1, j])


def test_a_link_with_choices_opens_the_view_it_names(populated):
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.switch_page("pages/associations.py")
    split = run_key(populated, "sim-split")
    at.query_params["sources"] = [split, "human"]
    at.query_params["diff"] = "True"
    at.run()
    assert not at.exception
    assert at.multiselect(key="as_sources").value == [split, "human"]
    assert at.toggle(key="as_diff").value


def test_examples_grid_from_compare_shows_the_flips(populated):
    at = open_page("pages/compare.py")
    a, b = run_key(populated, "sim-single"), run_key(populated, "sim-split")
    at.selectbox(key="cmp_a").set_value(a)
    at.selectbox(key="cmp_b").set_value(b).run()
    crit = at.selectbox(key="cmp_flip_criterion").value
    at.button(key="cmp_open_examples").click().run()
    assert not at.exception and at.title[0].value == "Examples"
    assert at.multiselect(key="ex_criteria").value == [crit]
    assert at.session_state["ex_filters"] == ["flips"]
    grid_table = table(at, "answer")
    single, split = (verdict_values(populated, n, crit) for n in ("sim-single", "sim-split"))
    flipped = sorted(e for e in single if e in split and single[e] != split[e])
    captions = " ".join(texts(at, "caption")).replace("\\", "")
    assert f"{len(flipped)} answers match" in captions
    assert list(grid_table["id"]) == flipped[:25]
    assert all(grid_table["sim-single"] != grid_table["sim-split"])  # every row a flip on that criterion
    assert set(grid_table["sim-single"]) <= {"pass", "fail"}


def test_examples_grid_search_and_the_whole_example(populated):
    at = open_page("pages/examples.py")
    at.text_input(key="ex_search").input(HOSTILE_ID).run()
    grid_table = table(at, "answer")
    assert list(grid_table["id"]) == [HOSTILE_ID]
    at.query_params["example"] = HOSTILE_ID
    at.run()
    assert any(PAYLOAD in t for t in texts(at, "text")), "the whole answer, as plain text"
    detail = table(at, "rationale / note")
    assert {"run sim-single", "run sim-split", "run all-pass"} <= set(detail["source"])


def test_crosstab_cell_opens_exactly_its_answers_in_examples(populated):
    at = open_page("pages/crosstabs.py")
    at.selectbox(key="ct_source").set_value(run_key(populated, "sim-single"))
    at.radio(key="ct_cell").set_value("fail|pass").run()
    ids = sorted(at.selectbox(key="ct_example").options)
    at.button(key="ct_open_examples").click().run()
    assert not at.exception and at.title[0].value == "Examples"
    assert sorted(table(at, "answer")["id"]) == ids[:25]


def verdict_values(db_url: str, run: str, criterion: str) -> dict[str, int]:
    with Session(store.engine_for(db_url)) as s:
        r = store.get_run(s, run)
        q = (select(store.Example.ext_id, store.Verdict.value)
             .join(store.Example, store.Example.id == store.Verdict.example_id)
             .join(store.CriterionRow, store.CriterionRow.id == store.Verdict.criterion_id)
             .where(store.Verdict.run_id == r.id, store.CriterionRow.key == criterion, store.Verdict.value.is_not(None)))
        return dict(s.execute(q).all())


def test_agreement_says_why_a_kappa_is_undefined(populated):
    at = open_page("pages/agreement.py")
    at.selectbox(key="ag_run").set_value(run_key(populated, "all-pass")).run()
    tab = table(at, "κ [95% CI]").set_index("criterion")
    assert tab.loc["cites_source", "κ [95% CI]"] == "undefined"
    reasons = [t for t in texts(at, "alert") if "κ undefined" in t]  # the reason, naming the run as the page does
    assert any("all\\-pass is pass" in t and "run\\:" not in t for t in reasons), reasons
    assert "AUC" not in tab.columns and "mean |Δ|" not in tab.columns  # no P(pass); no scale criterion
    assert not tab.isna().any().any() and "None" not in tab.to_string()
    captions = " ".join(texts(at, "caption"))
    assert "human: human" not in captions and "labels of ana" in captions
