"""The notebook API: `judgekit.open(url)` returns the same report objects as the CLI, with to_dict (the
CLI's JSON), to_frame (pandas) and figure (plotly, drawn by the builders the pages use)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import judgekit
from judgekit import figures, reports
from tests.conftest import load_demo, simulated_runs

SINGLE, SPLIT = "harness-single-call", "harness-split-call"


@pytest.fixture
def ws(engine, db_url):
    load_demo(engine, 60)
    simulated_runs(engine, db_url)
    return judgekit.open(db_url)


def cli_json(cli, *args) -> dict:
    result = cli("report", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_listings(ws):
    assert ws.datasets.to_frame()[["name", "examples"]].values.tolist() == [["demo", 60]]
    runs = ws.runs.to_frame()
    assert runs["name"].tolist() == [SINGLE, SPLIT]
    assert runs["status"].tolist() == ["done", "done"]
    assert json.dumps(ws.runs.to_dict())  # plain JSON


def test_crosstab_equals_the_cli_and_frames_and_draws_it(ws, cli):
    rep = ws.crosstab(run=SINGLE, row="cites_source", col="answers_question")
    assert reports.jsonable(rep.to_dict()) == cli_json(cli, "crosstab", "--run", SINGLE, "--row", "cites_source",
                                                       "--col", "answers_question")
    frame = rep.to_frame()
    counts = rep.to_dict()["counts"]
    assert frame.loc["cites_source pass", "answers_question fail"] == counts["pass"]["fail"]
    assert frame.loc["cites_source fail", "row total"] == sum(counts["fail"].values())
    assert frame["answers_question fails"].dtype == float
    fig = rep.figure()
    assert isinstance(fig, go.Figure) and fig.data[0].type == "heatmap"
    assert np.asarray(fig.data[0].z).tolist() == [[counts[r][c] for c in ("pass", "fail")] for r in ("pass", "fail")]
    with pytest.raises(ValueError, match="choose exactly one source"):
        ws.crosstab(run=SINGLE, human=True, row="cites_source", col="concise")


def test_phi_report_frame_and_figure(ws, cli):
    rep = ws.phi(runs=[SINGLE, SPLIT], human=True, n_boot=200)
    assert reports.jsonable(rep.to_dict()) == cli_json(cli, "phi", "--run", SINGLE, "--run", SPLIT, "--human",
                                                       "--n-boot", "200")
    frame = rep.to_frame()
    k = len(rep.criteria)
    assert len(frame) == len(rep.columns) * k * (k - 1) // 2
    col = rep.column(f"run:{SINGLE}")
    i, j = rep.criteria.index("cites_source"), rep.criteria.index("concise")
    row = frame[(frame.source == f"run:{SINGLE}") & (frame.a == "cites_source") & (frame.b == "concise")].iloc[0]
    assert row.phi == pytest.approx(col.phi[i, j]) and row.n == col.n_matrix[i, j]
    one = rep.figure(f"run:{SINGLE}")
    assert one.to_dict() == figures.phi_heatmap(col, rep.criteria, f"phi — {col.source} — {col.judge} — n = {col.n}",
                                                col.criterion_notes).to_dict()
    assert [t.type for t in one.data] == ["heatmap"]
    every = rep.figure()
    assert [t.type for t in every.data] == ["heatmap"] * len(rep.columns)
    annotator = ws.phi(runs=[SPLIT], human="reference", n_boot=0)
    assert [c.source for c in annotator.columns] == [f"run:{SPLIT}", "annotator:reference"]


def test_compare_and_agreement(ws, cli):
    cmp = ws.compare(SINGLE, SPLIT)
    floor = ws.noise_floor(SINGLE, SPLIT)
    assert reports.jsonable({**cmp.to_dict(), "noise_floor": floor.to_dict()}) == cli_json(cli, "compare", SINGLE, SPLIT)
    frame = cmp.to_frame()
    assert frame.set_index("criterion")["fail→pass"].to_dict() == {
        k: c["fail_to_pass"] for k, c in cmp.to_dict()["criteria"].items()}
    assert frame["McNemar p"].dtype == float
    assert isinstance(cmp.figure(), go.Figure)
    ag = ws.agreement(SPLIT)
    assert reports.jsonable(ag.to_dict()) == cli_json(cli, "agreement", "--run", SPLIT)
    af = ag.to_frame()
    assert af.set_index("criterion")["κ"].to_dict() == pytest.approx({k: e["kappa"] for k, e in ag.criteria.items()})
    assert {"κ low", "κ high"} <= set(af.columns)
    assert ag.figure().data[0].type == "bar"
    vs = ws.agreement(SPLIT, vs_run=SINGLE)
    assert vs.human == f"run:{SINGLE}"


def test_check_from_python(ws):
    rep = ws.check(SPLIT, min_kappa=-1)
    assert rep.ok and isinstance(rep.to_frame(), pd.DataFrame)
    assert not ws.check(SPLIT, min_kappa=0.999).ok


def test_pages_use_the_same_builders():
    from judgekit import ui

    for name in ("phi_heatmap", "diff_heatmap", "crosstab_table", "flips_frame", "agreement_frame", "kappa_figure",
                 "attribution_figure", "audit_frame"):
        assert getattr(ui, name) is getattr(figures, name)


def test_one_run_may_be_named_on_its_own_and_a_crosstab_needs_both_criteria(ws):
    one, listed = ws.phi(runs=SPLIT, n_boot=0), ws.phi(runs=[SPLIT], n_boot=0)
    assert repr(one.to_dict()) == repr(listed.to_dict()) and one.columns[0].source == f"run:{SPLIT}"
    with pytest.raises(ValueError, match="name the two criteria: row=KEY and col=KEY"):
        ws.crosstab(run=SPLIT)
