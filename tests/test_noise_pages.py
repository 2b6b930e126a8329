"""The dashboard sections of issue 13 — the noise floor (Compare, Agreement), the grouping planner
(Compare) and criterion health (Agreement), the Run page's repeats — through AppTest, and each section
in real Chromium at 1400 × 1000 (screenshots kept in the test's folder).

One workspace is built once per module: the demo (200 answers), then on the simulated judge at
temperature 0.5 over all of them a ``single`` run first (so Compare opens on single vs split) and a
``split`` run twice (``--repeat 2``: the noise floor). Each test reads a private copy.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from judgekit import jobs, runner, simjudge, store
from judgekit.harness import parse_harness
from tests.browser import chromium_page, streamlit_server, wait_for_app
from tests.conftest import load_demo, private_copy
from tests.test_pages_analysis import APP, texts

N = 200


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("noisepages") / "built.sqlite"
    url = f"sqlite:///{path}"
    engine = store.engine_for(url)
    load_demo(engine, N)
    srv = simjudge.start_in_thread(url, simjudge.SimParams())
    try:
        judge = runner.JudgeSpec(base_url=srv.base_url, model=simjudge.SIM_MODEL, kind="simulated", temperature=0.5)
        for spec, repeat in (("single", 1), ("split", 2)):
            with Session(engine) as s, s.begin():
                names = runner.create_repeats(s, repeat=repeat, name=f"pilot-{spec}", dataset="demo", rubric="demo",
                                              harness=parse_harness(spec), judge=judge)
            for name in names:
                assert runner.run_sync(engine, name, concurrency=16).status == "done"
    finally:
        srv.stop()
    store.dispose_engines()
    return str(path)


@pytest.fixture
def populated(built, db_url) -> str:
    return private_copy(built, db_url)


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def frame_with(at: AppTest, column: str):
    frames = [d.value for d in at.dataframe if column in d.value.columns]
    assert frames, f"no table with a {column!r} column"
    return frames[0]


def wait_for_jobs(db_url: str) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and jobs.active(db_url):
        time.sleep(0.2)
    assert not jobs.active(db_url)


def test_compare_shows_the_noise_floor_and_the_planner(populated, engine, db_url):
    at = open_page("pages/compare.py")
    headers = [h.value for h in at.subheader]
    assert headers.index("Noise floor") == headers.index("Flips per criterion") + 1  # beside the flips
    floor = frame_with(at, "flipped between repeats (floor)")
    assert list(floor["criterion"]) == ["answers_question", "cites_source", "grounded", "no_fabrication",
                                        "refuses_when_unanswerable", "concise"]
    assert all("[" in v for v in floor["test–retest κ"]) and set(floor["beyond the floor"].str[:2]) <= {"ye", "no"}
    captions = " ".join(texts(at, "caption"))
    assert "pilot\\-split\\-r1, pilot\\-split\\-r2" in captions  # which repeats measured the floor
    # the planner: the pilot is single (A) and split (B); three calls, the pulled pairs kept apart
    assert "Grouping planner" in headers
    codes = [c.value for c in at.code]
    spec = next(c for c in codes if c.startswith("grouped:"))
    assert spec.count("|") == 2
    pairs = frame_with(at, "may share a call")
    apart = set(pairs.loc[pairs["may share a call"] == "no", "pair"])
    assert {"answers_question × cites_source", "grounded × no_fabrication"} <= apart
    assert any(c.startswith("judgekit run --dataset demo --rubric demo --harness") for c in codes)
    assert len(at.get("plotly_chart")) >= 2  # attribution and the trade-off curve
    # the button starts the recommended grouping on the pilot's answers
    at.button(key="cmp_plan_start").click().run()
    assert not at.exception
    assert any("Started" in s for s in texts(at, "success"))
    wait_for_jobs(db_url)
    with Session(engine) as s:
        started = s.scalars(select(store.Run).where(store.Run.name.like("demo-plan-%"))).one()
        assert started.status == "done" and started.totals["calls"] == 3 * N
        assert started.harness["kind"] == "grouped"
        assert ["+".join(g) for g in started.harness["groups"]] == spec.removeprefix("grouped:").split("|")
        pilot = store.get_run(s, "pilot-single")
        assert store.run_example_ids(s, started.id) == store.run_example_ids(s, pilot.id)
        assert s.get(store.Judge, started.judge_id).params["temperature"] == 0.5


def test_compare_without_repeats_or_a_pilot_says_what_to_do(populated):
    at = open_page("pages/compare.py")
    keys = at.selectbox(key="cmp_a").options
    at.selectbox(key="cmp_a").set_value(keys[1]).run()  # split-r1 vs split-r2: no single run
    at.selectbox(key="cmp_b").set_value(keys[2]).run()
    infos = " ".join(texts(at, "alert"))
    assert "choose a single run and a split run" in infos


def test_agreement_shows_the_floor_and_criterion_health(populated):
    at = open_page("pages/agreement.py")
    headers = [h.value for h in at.subheader]
    assert headers.index("Noise floor") == headers.index("Judge vs judge") + 1
    assert "Criterion health" in headers
    health = frame_with(at, "flags")
    assert len(health) == 6 and all("[" in v for v in health["test–retest κ"])
    flagged = dict(zip(health["criterion"], health["flags"], strict=True))
    assert flagged["concise"] == "—"
    assert "sensitive to call structure" in flagged["answers_question"]
    alerts = " ".join(texts(at, "alert"))
    assert "sensitive to call structure" in alerts and "beyond the floor" in alerts


def test_associations_reads_the_audit_against_the_noise_floor(populated):
    at = open_page("pages/associations.py")
    audit = frame_with(at, "noise floor ±")
    assert len(audit) == 15 and all(v == "undefined" or float(v) >= 0 for v in audit["noise floor ±"])
    assert any(v != "undefined" for v in audit["noise floor ±"])
    captions = " ".join(c.value for c in at.caption)
    assert "from repeat runs pilot" in captions and "blames no harness" in captions


def test_run_page_starts_repeats_at_a_temperature(populated, engine, db_url):
    at = open_page("pages/run.py")
    at.multiselect(key="run_variants").set_value(["split"]).run()
    at.number_input(key="run_sample").set_value(10).run()
    at.number_input(key="run_repeats").set_value(2).run()
    at.number_input(key="run_temperature").set_value(0.7).run()
    estimate = frame_with(at, "repeats")
    assert int(estimate["repeats"][0]) == 2 and int(estimate["calls"][0]) == 2 * 10 * 6
    at.button(key="run_start").click().run()
    assert not at.exception
    wait_for_jobs(db_url)
    with Session(engine) as s:
        runs = s.scalars(select(store.Run).where(store.Run.repeat_group.is_not(None),
                                                 store.Run.name.like("demo-split%"))).all()
        assert sorted(r.repeat_index for r in runs) == [1, 2] and len({r.repeat_group for r in runs}) == 1
        assert all(s.get(store.Judge, r.judge_id).params["temperature"] == 0.7 for r in runs)
        assert all(r.status == "done" and r.totals["cache_hits"] == 0 for r in runs)


def _section(page, heading: str, path) -> None:
    """Scroll a section's heading to the top of the 1400 × 1000 viewport and take the screenshot."""
    page.get_by_role("heading", name=heading).first.scroll_into_view_if_needed()
    page.get_by_role("heading", name=heading).first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(500)
    page.screenshot(path=path)


@pytest.mark.browser
def test_sections_in_chromium(populated, tmp_path):
    with streamlit_server(populated, tmp_path / "streamlit.log") as base, chromium_page(1400, 1000) as page:
        page.goto(f"{base}/compare")
        page.get_by_role("heading", name="Grouping planner").wait_for(timeout=120_000)
        wait_for_app(page)
        page.locator("[data-testid='stPlotlyChart']").nth(1).wait_for()
        _section(page, "Noise floor", tmp_path / "compare-noise-floor.png")
        _section(page, "Grouping planner", tmp_path / "compare-planner.png")
        assert page.get_by_text("Start the recommended run on the same answers").count() == 1
        page.goto(f"{base}/agreement")
        page.get_by_role("heading", name="Criterion health").wait_for(timeout=120_000)
        wait_for_app(page)
        _section(page, "Noise floor", tmp_path / "agreement-noise-floor.png")
        _section(page, "Criterion health", tmp_path / "agreement-health.png")
        assert page.locator("[data-testid='stException']").count() == 0
        page.goto(f"{base}/associations")
        page.get_by_role("heading", name="Association audit").wait_for(timeout=120_000)
        wait_for_app(page)
        _section(page, "Association audit", tmp_path / "associations-noise-floor.png")
        assert page.get_by_text("noise floor ±").count() >= 1
        page.goto(f"{base}/run")
        page.get_by_text("Options for every variant").click()
        page.get_by_role("spinbutton", name="Repeats of each variant").wait_for()
        _section(page, "Harness variants", tmp_path / "run-repeats.png")
    for name in ("compare-noise-floor", "compare-planner", "agreement-noise-floor", "agreement-health",
                 "associations-noise-floor", "run-repeats"):
        assert (tmp_path / f"{name}.png").stat().st_size > 20_000, name
