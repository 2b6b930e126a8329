"""Hand-labeling: label-set strategies, the CLI, human consensus with adjudication, annotator reliability,
label export/import round trips, two annotators writing at once, and the Label page (AppTest)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from judgekit import imports, labeling, reports, store
from judgekit.labeling import SampleSpec
from tests.conftest import copy_reference_labels, load_demo, simulated_runs

BACKENDS = ("sqlite", "postgresql")  # the report and labeling paths run on both stores

REPO = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------------------------- fixtures

RUBRIC = """\
name: pair
criteria:
  - key: a
    question: Is A true?
  - key: b
    question: Is B true?
  - key: s
    question: How good?
    kind: scale
    levels: {1: bad, 2: poor, 3: ok, 4: good, 5: great}
    pass_at: 3
"""
EXT = [f"m-{i:02d}" for i in range(1, 13)]
# run R1 (a, b): cells pass/pass m-01..05, pass/fail m-06..08, fail/pass m-09, fail/fail m-10..11; m-12 b unscored
R1 = {"a": [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], "b": [1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, None]}
# run R2 (a): against R1, fail→pass on m-09, m-11; pass→fail on m-02, m-05; m-12 unscored under R2
R2 = {"a": [1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, None]}
R1_CELLS = {"pass/pass": EXT[0:5], "pass/fail": EXT[5:8], "fail/pass": [EXT[8]], "fail/fail": EXT[9:11]}
FLIPS = {"fail/pass": ["m-09", "m-11"], "pass/fail": ["m-02", "m-05"]}


def write_run(path: Path, verdicts: dict[str, list]) -> Path:
    lines = [json.dumps({"example_id": ex, "criterion": k, "verdict": v, "rationale": f"{k} on {ex}: {v}"})
             for k, values in verdicts.items() for ex, v in zip(EXT, values, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def mini(engine, tmp_path):
    """Dataset `mini` (12 examples), rubric `pair` (a, b binary; s 1–5 pass_at 3), runs R1 and R2."""
    ds = tmp_path / "mini.jsonl"
    ds.write_text("".join(json.dumps({"id": e, "question": f"q {e}", "answer": f"answer {e}"}) + "\n" for e in EXT))
    (tmp_path / "pair.yaml").write_text(RUBRIC)
    with Session(engine) as s, s.begin():
        imports.import_dataset(s, ds, "mini")
        imports.import_rubric(s, tmp_path / "pair.yaml")
        imports.import_run(s, write_run(tmp_path / "r1.jsonl", R1), dataset="mini", rubric="pair", name="R1")
        imports.import_run(s, write_run(tmp_path / "r2.jsonl", R2), dataset="mini", rubric="pair", name="R2")
    return engine


def ext_of(engine, ids) -> list[str]:
    with Session(engine) as s:
        rows = dict(s.execute(select(store.Example.id, store.Example.ext_id)).all())
    return [rows[i] for i in ids]


def draw(engine, **spec) -> labeling.Sample:
    with Session(engine) as s:
        ds = store.get_dataset(s, "mini")
        return labeling.draw_sample(s, ds.id, SampleSpec(**spec))


# --------------------------------------------------------------------------------------------- strategies


def test_random_is_seeded_and_capped(mini):
    a = draw(mini, strategy="random", size=5, seed=7)
    assert a == draw(mini, strategy="random", size=5, seed=7)  # same seed, same examples, same order
    assert a.example_ids != draw(mini, strategy="random", size=5, seed=8).example_ids
    assert len(set(a.example_ids)) == 5 and a.pool == 12
    whole = draw(mini, strategy="random", size=50, seed=1)  # a pool smaller than the size is taken whole
    assert sorted(ext_of(mini, whole.example_ids)) == EXT


@pytest.mark.parametrize("cell", list(R1_CELLS))
def test_cell_picks_only_the_requested_cell(mini, cell):
    got = draw(mini, strategy="cell", size=50, seed=3, run="R1", row="a", col="b", cell=cell)
    assert sorted(ext_of(mini, got.example_ids)) == R1_CELLS[cell]
    small = draw(mini, strategy="cell", size=1, seed=3, run="R1", row="a", col="b", cell=cell)
    assert ext_of(mini, small.example_ids)[0] in R1_CELLS[cell]


def test_cell_equal_numbers_from_each_cell(mini):
    got = draw(mini, strategy="cell", size=8, seed=0, run="R1", row="a", col="b")
    picked = ext_of(mini, got.example_ids)
    per_cell = {c: sum(e in members for e in picked) for c, members in R1_CELLS.items()}
    # round robin over pass/pass, pass/fail, fail/pass, fail/fail: 4, then 3 (fail/pass has only one), then 1
    assert per_cell == {"pass/pass": 3, "pass/fail": 2, "fail/pass": 1, "fail/fail": 2} == got.strata
    assert "m-12" not in picked  # b unscored: in no cell
    assert got == draw(mini, strategy="cell", size=8, seed=0, run="R1", row="a", col="b")


@pytest.mark.parametrize("direction", [None, "fail/pass", "pass/fail"])
def test_disagree_picks_exactly_the_flips(mini, direction):
    got = draw(mini, strategy="disagree", size=50, seed=0, run_a="R1", run_b="R2", criterion="a", cell=direction)
    expected = FLIPS[direction] if direction else FLIPS["fail/pass"] + FLIPS["pass/fail"]
    assert sorted(ext_of(mini, got.example_ids)) == sorted(expected)
    one = draw(mini, strategy="disagree", size=1, seed=5, run_a="R1", run_b="R2", criterion="a", cell=direction)
    assert one == draw(mini, strategy="disagree", size=1, seed=5, run_a="R1", run_b="R2", criterion="a",
                       cell=direction)


# --------------------------------------------------------------------------------------------- CLI


def test_cli_create_and_list(mini, cli):
    r = cli("label-set", "create", "flips", "--dataset", "mini", "--rubric", "pair", "--strategy", "disagree",
            "--size", "10", "--seed", "2", "--run-a", "R1", "--run-b", "R2", "--criterion", "a", "--cell", "fail/pass")
    assert r.exit_code == 0, r.output
    assert "2 examples" in r.output
    r = cli("label-set", "create", "cells", "--dataset", "mini", "--rubric", "pair", "--strategy", "cell",
            "--size", "4", "--run", "R1", "--row", "a", "--col", "b")
    assert r.exit_code == 0, r.output
    r = cli("label-set", "list", "--format", "json")
    assert r.exit_code == 0
    sets = {x["name"]: x for x in json.loads(r.stdout)["label_sets"]}
    assert sets["flips"]["size"] == 2 and sets["flips"]["strategy"] == "disagree" and sets["flips"]["seed"] == 2
    assert sets["cells"]["size"] == 4
    with Session(mini) as s:
        info = labeling.get_label_set(s, "flips")
        assert sorted(ext_of(mini, labeling.label_set_items(s, info.id))) == FLIPS["fail/pass"]
        assert [c.key for c in info.criteria] == ["a", "b", "s"]
    table = cli("label-set", "list")
    assert table.exit_code == 0 and "flips" in table.stdout and "cells" in table.stdout


BAD_ARGS = [
    (["--strategy", "sometimes"], "--strategy must be one of"),
    (["--strategy", "cell", "--run", "R1", "--run", "R2", "--row", "a", "--col", "b"],
     "--strategy cell takes one --run, got 2"),
    (["--strategy", "decide", "--row", "a"], "--row does not apply to --strategy decide"),
    (["--strategy", "decide", "--run", "nope"], "no run named or numbered 'nope'"),
    (["--strategy", "cell", "--row", "a", "--col", "b"], "--strategy cell needs --run"),
    (["--run", "R1"], "--run does not apply to --strategy random"),
    (["--strategy", "cell", "--run", "R1", "--row", "a", "--col", "b", "--cell", "fail-pass"], "--cell must be"),
    (["--strategy", "cell", "--run", "R1", "--row", "a", "--col", "a"], "name the same criterion"),
    (["--strategy", "cell", "--run", "R1", "--row", "a", "--col", "zz"], "--col zz: not a criterion"),
    (["--strategy", "cell", "--run", "nope", "--row", "a", "--col", "b"], "no run named or numbered 'nope'"),
    (["--strategy", "disagree", "--run-a", "R1", "--run-b", "R2", "--criterion", "b"], "do not disagree on b"),
    (["--strategy", "disagree", "--run-a", "R1", "--run-b", "R2", "--criterion", "a", "--cell", "pass/pass"],
     "must be fail/pass or pass/fail"),
    (["--size", "0"], "--size must be a positive integer"),
    (["--seed", "-1"], "--seed must be a non-negative integer"),
]


@pytest.mark.parametrize(("args", "message"), BAD_ARGS)
def test_cli_bad_arguments_one_line_exit_2_nothing_written(mini, cli, args, message):
    with Session(mini) as s:
        before = store.row_counts(s)
    r = cli("label-set", "create", "x", "--dataset", "mini", "--rubric", "pair", *args)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    with Session(mini) as s:
        assert store.row_counts(s) == before


def test_cli_duplicate_name_and_unknown_dataset(mini, cli):
    assert cli("label-set", "create", "x", "--dataset", "mini", "--rubric", "pair").exit_code == 0
    r = cli("label-set", "create", "x", "--dataset", "mini", "--rubric", "pair")
    assert r.exit_code == 2 and "already exists" in r.stderr
    r = cli("label-set", "create", "y", "--dataset", "nope", "--rubric", "pair")
    assert r.exit_code == 2 and "no dataset named 'nope'" in r.stderr


# --------------------------------------------------------------------------------------------- consensus


def put(engine, rows: list[tuple[str, str, str, int | None]], note: str | None = None) -> None:
    """rows: (ext id, criterion, annotator, value)."""
    with Session(engine) as s, s.begin():
        ids = store.example_ids(s, store.get_dataset(s, "mini").id)
        store.upsert_labels(s, [{"example_id": ids[e], "criterion": c, "annotator": a, "value": v, "note": note}
                                for e, c, a, v in rows])


@pytest.fixture
def labelled(mini):
    put(mini, [
        ("m-01", "a", "ana", 1), ("m-01", "a", "bob", 1), ("m-01", "a", "cy", 0),  # majority pass
        ("m-02", "a", "ana", 1), ("m-02", "a", "bob", 0),  # tie: unresolved
        ("m-03", "a", "ana", 1), ("m-03", "a", "bob", 0), ("m-03", "a", "dee", 0),  # adjudicated fail
        ("m-04", "a", "ana", None), ("m-04", "a", "bob", 0),  # unsure does not vote
        ("m-05", "a", "reference", 1),  # reference is not the human column
        ("m-06", "a", "dee", 1), ("m-06", "a", "eve", 0),  # two adjudicators disagree: unresolved
        ("m-07", "a", "dee", 1), ("m-07", "a", "ana", 0), ("m-07", "a", "bob", 0),  # adjudicator wins
        ("m-01", "s", "ana", 4), ("m-01", "s", "bob", 2), ("m-01", "s", "cy", 3),  # pass, fail, pass → pass
        ("m-02", "s", "ana", 2), ("m-02", "s", "bob", 3),  # tie
        ("m-01", "b", "ana", 1), ("m-01", "b", "bob", 1), ("m-02", "b", "ana", 0), ("m-02", "b", "bob", 0),
        ("m-03", "b", "ana", 1), ("m-03", "b", "bob", 0), ("m-04", "b", "ana", 1), ("m-04", "b", "bob", 1),
    ])
    with Session(mini) as s, s.begin():
        labeling.set_role(s, "dee", "adjudicator")
        labeling.set_role(s, "eve", "adjudicator")
    return mini


def test_human_consensus_adjudicator_wins_else_majority(labelled):
    with Session(labelled) as s:
        ds = store.get_dataset(s, "mini")
        crits = store.load_rubric(s, "pair").criteria
        ids, matrix = labeling.human_consensus(s, ds.id, crits)
        assert list(ids) == sorted(store.example_ids(s, ds.id).values())
    nan = math.nan
    a = [1, nan, 0, 0, nan, nan, 1, nan, nan, nan, nan, nan]
    s_ = [1, nan] + [nan] * 10
    np.testing.assert_array_equal(matrix[:, 0], a)
    np.testing.assert_array_equal(matrix[:, 2], s_)
    with Session(labelled) as s:  # without the exclusion, reference's label is a vote like any other
        _, with_ref = labeling.human_consensus(s, store.get_dataset(s, "mini").id, crits, exclude=())
    assert with_ref[4, 0] == 1


def test_set_role_validates_and_creates(mini):
    with Session(mini) as s, s.begin():
        labeling.set_role(s, "zoe", "adjudicator")
        assert labeling.annotator_role(s, "zoe") == "adjudicator"
        labeling.set_role(s, "zoe", "annotator")
        assert labeling.annotator_role(s, "zoe") == "annotator"
        assert labeling.annotator_role(s, "nobody") is None
        with pytest.raises(ValueError, match="role must be one of"):
            labeling.set_role(s, "zoe", "boss")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="not an adjudicator"):
            labeling.adjudicate(s, 1, store.load_rubric(s, "pair").criteria[0], "zoe", 1)


def test_inter_annotator_kappa_and_alpha(labelled):
    from sklearn.metrics import cohen_kappa_score

    with Session(labelled) as s:
        crits = store.load_rubric(s, "pair").criteria
        rel = {r.criterion: r for r in labeling.inter_annotator(s, store.get_dataset(s, "mini").id, crits)}
    b = rel["b"]
    # ana/bob on b over m-01..04: (1,1) (0,0) (1,0) (1,1). po = 3/4; pe = 3/4·2/4 + 1/4·2/4 = 1/2 → κ = 0.5.
    # α (nominal): coincidences o00 = 2, o11 = 4, o01 = o10 = 1; n = 8, n0 = 3, n1 = 5
    # → α = 1 − (n − 1)·(o01 + o10) / (2·n0·n1) = 1 − 7·2/30 = 8/15.
    pair = next(p for p in b.pairs if {p["a"], p["b"]} == {"ana", "bob"})
    assert pair["n"] == 4 and pair["kappa"] == pytest.approx(0.5)
    assert pair["kappa"] == pytest.approx(cohen_kappa_score([1, 0, 1, 1], [1, 0, 0, 1]))
    assert b.alpha == pytest.approx(8 / 15) and b.n_units == 4 and b.mean_kappa == pytest.approx(0.5)
    assert {p["a"] for p in rel["a"].pairs} | {p["b"] for p in rel["a"].pairs} == {"ana", "bob", "cy"}  # no dee


def test_alpha_is_the_same_on_the_agreement_and_label_paths(labelled):
    """One reliability function behind both pages: the Agreement page (reports.annotator_agreement, also
    `judgekit report agreement`) and the Label page (labeling.inter_annotator over a label set's items)
    give the same α, n and pairs — with the adjudicators dee and eve settling, not rating."""
    with Session(labelled) as s:
        ds = store.get_dataset(s, "mini")
        crits = store.load_rubric(s, "pair").criteria
        label_page = {r.criterion: r for r in labeling.inter_annotator(s, ds.id, crits,
                                                                     example_ids=list(store.example_ids(s, ds.id).values()))}
        agreement_page = reports.annotator_agreement(s, ds)
    assert agreement_page.annotators == ["ana", "bob", "cy"] and agreement_page.adjudicators == ["dee", "eve"]
    for key, e in agreement_page.criteria.items():
        r = label_page[key]
        assert e["n_units"] == r.n_units and [(p["a"], p["b"], p["n"]) for p in e["pairs"]] == [
            (p["a"], p["b"], p["n"]) for p in r.pairs], key
        assert [p["kappa"] for p in e["pairs"]] == pytest.approx([p["kappa"] for p in r.pairs], nan_ok=True)
        assert e["alpha"] == pytest.approx(r.alpha, nan_ok=True), key
    # a, among ana, bob, cy over the pairable m-01 (1,1,0), m-02 (1,0), m-03 (1,0), m-07 (0,0) (m-04 has one
    # sure label): coincidences o11 = 1, o10 = o01 = 3, o00 = 2; n = 9, n1 = 4, n0 = 5
    # → α = 1 − (n − 1)·(o01 + o10) / (2·n0·n1) = 1 − 8·6/40 = −0.2. (Counting dee and eve as raters gave −0.43.)
    assert agreement_page.criteria["a"]["alpha"] == pytest.approx(-0.2) and agreement_page.criteria["a"]["n_units"] == 4
    assert label_page["a"].alpha == pytest.approx(-0.2)
    assert "adjudicators, not counted: dee, eve" in reports.render_agreement_table(
        reports.AgreementReport("run:R1", "j", "human", "h", {}, annotators=agreement_page))


def test_health_counts_the_same_rater_pairs_as_the_agreement_page(labelled):
    """Criterion health's annotator κ comes from annotators.rater_kappas: the same pairs (adjudicators dee
    and eve left out) and the same κ as the reliability behind the Agreement and Label pages."""
    from judgekit import annotators

    with Session(labelled) as s:
        ds = store.get_dataset(s, "mini")
        crits = store.load_rubric(s, "pair").criteria
        names = reports.human_annotators(s, ds)
        _, _, L, _ = reports.label_tensor(s, reports.example_index(s, ds.id), crits, names)
        roles = store.annotator_roles(s, names)
        agreement_page = reports.annotator_agreement(s, ds)
    pairs = annotators.rater_kappas(L, names, roles, crits)
    assert {"dee", "eve"} <= set(names) and [(a, b) for a, b, _ in pairs] == [
        (p["a"], p["b"]) for p in agreement_page.criteria["a"]["pairs"]]
    for j, c in enumerate(crits):
        want = [p["kappa"] for p in agreement_page.criteria[c.key]["pairs"]]
        assert [float(m.kappa[j]) for _, _, m in pairs] == pytest.approx(want, nan_ok=True), c.key


def test_disagreements_list(labelled):
    with Session(labelled) as s:
        crits = store.load_rubric(s, "pair").criteria
        dis = labeling.disagreements(s, store.get_dataset(s, "mini").id, crits)
    got = {(d.ext_id, d.criterion): d for d in dis}
    assert set(got) == {("m-01", "a"), ("m-02", "a"), ("m-03", "a"), ("m-03", "b"), ("m-01", "s"),
                        ("m-02", "s")}
    assert got[("m-03", "a")].adjudicated == 0.0 and got[("m-03", "a")].consensus == 0.0
    assert math.isnan(got[("m-02", "a")].consensus) and not got[("m-02", "a")].resolved
    assert got[("m-01", "s")].votes == {"ana": 4, "bob": 2, "cy": 3} and got[("m-01", "s")].majority == 1.0


# --------------------------------------------------------------------------------------------- export / import


def label_rows(engine) -> list[tuple]:
    with Session(engine) as s:
        rows = store.labels_for_dataset(s, store.get_dataset(s, "mini").id)
    return sorted((r["example_id"], r["criterion"], r["annotator"], r["value"], r["note"]) for r in rows)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_export_import_round_trip(labelled, cli, tmp_path, suffix):
    put(labelled, [("m-08", "a", "ana", 1), ("m-08", "s", "ana", 5)], note='why: "quoted", comma, ünïcode\nline 2')
    put(labelled, [("m-09", "a", "bob", None)], note="unsure here")
    before = label_rows(labelled)
    assert any(r[3] is None for r in before) and any(r[4] for r in before) and len({r[2] for r in before}) >= 5
    out = tmp_path / f"labels{suffix}"
    assert cli("export-labels", "--dataset", "mini", "--out", out).exit_code == 0
    with Session(labelled) as s, s.begin():
        s.execute(delete(store.Label))
    r = cli("import-labels", out, "--dataset", "mini")
    assert r.exit_code == 0, r.output
    assert label_rows(labelled) == before


# --------------------------------------------------------------------------------------------- concurrency

WRITER = textwrap.dedent("""
    import sys, time
    from sqlalchemy.orm import Session
    from judgekit import labeling, store
    url, name, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    engine = store.engine_for(url)
    with Session(engine) as s:
        ids = sorted(store.example_ids(s, store.get_dataset(s, "demo").id).values())
        crits = store.load_rubric(s, "demo").criteria
    cells = [(e, c) for e in ids for c in crits][:500]
    while time.time() < start:
        time.sleep(0.005)
    for i, (e, c) in enumerate(cells):
        with Session(engine) as s, s.begin():  # one short transaction per label, like the page
            labeling.save_item(s, e, name, {c.key: i % 2}, [c], note=f"{name} {i}")
""")


def test_two_annotators_writing_at_once_lose_nothing(engine, db_url, tmp_path):
    import time

    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=100)  # 600 cells ≥ 500 per annotator
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    start = time.time() + 1.5
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, str(script), db_url, name, str(start)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("p1", "p2")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with Session(engine) as s:
        rows = [r for r in store.labels_for_dataset(s, store.get_dataset(s, "demo").id) if r["annotator"] != "reference"]
    assert len(rows) == 1000
    assert {r["annotator"] for r in rows} == {"p1", "p2"}
    assert {r["note"] for r in rows if r["annotator"] == "p1"} == {f"p1 {i}" for i in range(500)}


# --------------------------------------------------------------------------------------------- decide


def test_decide_labels_what_the_audit_cannot_decide(engine, db_url, cli):
    from judgekit import reports

    load_demo(engine, 200)
    simulated_runs(engine, db_url)  # harness-single-call, harness-split-call
    # nobody but the planted `reference` has labelled: decide starts with a random sample
    r = cli("label-set", "create", "first", "--dataset", "demo", "--rubric", "demo", "--strategy", "decide",
            "--size", "40", "--seed", "1")
    assert r.exit_code == 0, r.output
    assert "random (no labels yet)" in r.output
    with Session(engine) as s:
        first = labeling.label_set_items(s, labeling.get_label_set(s, "first").id)
    copy_reference_labels(engine, "ana", first)
    with Session(engine) as s:
        sources = reports.load_sources(s, ["harness-single-call", "harness-split-call"], human=True, dataset="demo")
        audit = reports.phi_report(sources)
        split = reports.load_run(s, "harness-split-call")
    undecided = {f"{a.a} × {a.b}": a for a in audit.audit if a.verdict == "undecided"}
    assert undecided, [a.verdict for a in audit.audit]

    r = cli("label-set", "create", "second", "--dataset", "demo", "--rubric", "demo", "--strategy", "decide",
            "--size", "30", "--seed", "2", "--run", "harness-single-call", "--run", "harness-split-call")
    assert r.exit_code == 0, r.output
    with Session(engine) as s:
        info = labeling.get_label_set(s, "second")
        second = labeling.label_set_items(s, info.id)
    assert info.strategy["kind"] == "decide" and info.strategy["runs"] == ["harness-single-call", "harness-split-call"]
    assert "decide the audit's undecided pairs" in info.strategy["description"]
    assert set(info.strategy["strata"]) <= set(undecided)  # only the pairs the audit left open
    assert len(second) == 30 and not set(second) & set(first)  # nobody has labelled them yet
    # every pick lies in a cell the plan asks for (of the reference harness, split), for some open pair
    rows = split.index.rows_of(np.array(second))
    wanted = set()
    for row in undecided.values():
        i, j = split.col(row.a), split.col(row.b)
        # a pair whose humans' phi is still undefined asks for answers the reference fails on
        cells = row.label_more.cells if row.label_more else {"pass/fail": 1, "fail/pass": 1, "fail/fail": 1}
        wanted |= {(i, j, name) for name, share in cells.items() if share > 0}
    B = split.binary
    cell_names = ("pass/pass", "pass/fail", "fail/pass", "fail/fail")

    def cell(r, i, j):
        return cell_names[int(2 * (B[r, i] == 0) + (B[r, j] == 0))]

    served = [any(cell(r, i, j) == name for i, j, name in wanted) for r in rows]
    assert sum(served) >= 25, sum(served)  # a few may top up at random once wanted cells run dry


# --------------------------------------------------------------------------------------------- page (AppTest)


@pytest.fixture
def judged(engine, db_url):
    """Demo (20 examples) judged by two simulated-judge runs whose verdicts disagree."""
    simulated_runs(load_demo(engine, 20), db_url)
    return engine


def run_texts(engine) -> list[str]:
    """Every rationale and run name: none may appear on the page while an example is being labeled."""
    with Session(engine) as s:
        rationales = [r for r in s.scalars(select(store.Verdict.rationale)) if r]
        names = list(s.scalars(select(store.Run.name)))
    assert rationales and names
    return rationales + names


def page_text(at) -> str:
    """All text the page would show: every element's proto (labels, help, values) and table cells."""
    parts: list[str] = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            parts.append(str(proto).replace('\\"', '"').replace("\\n", "\n"))
        if type(node).__name__ == "Dataframe":
            parts.append("\n".join(map(str, node.value.to_numpy().ravel())))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(parts)


def assert_blind(at, secrets: list[str]) -> None:
    text = page_text(at)
    leaked = [x for x in secrets if x in text]
    assert not leaked, leaked[:3]


def labels_of(engine, annotator: str) -> dict[tuple[str, str], tuple[int | None, str | None]]:
    with Session(engine) as s:
        rows = store.labels_for_dataset(s, store.get_dataset(s, "demo").id)
    return {(r["example_id"], r["criterion"]): (r["value"], r["note"]) for r in rows if r["annotator"] == annotator}


def open_label_page(name: str | None = "ana"):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=30)
    at.switch_page("pages/label.py").run()
    assert not at.exception, at.exception
    if name:
        at.text_input(key="label_annotator_w").input(name).run()
    return at


def choose_all(at, values: dict[str, int]) -> None:
    for key, v in values.items():
        at.button(key=f"label_{key}_{v}").click().run()


def test_page_create_label_resume_edit(judged):
    secrets = run_texts(judged)
    at = open_label_page()
    assert not at.exception
    assert any("No label sets yet" in i.value for i in at.info)
    # create a set from the page: examples where the single call fails answers_question and the split passes
    at.radio(key="label_mode").set_value("Label sets").run()
    at.text_input(key="label_new_name").input("first").run()
    at.number_input(key="label_new_size").set_value(5).run()
    at.number_input(key="label_new_seed").set_value(1).run()
    at.button(key="label_create").click().run()
    assert not at.exception and any("Created first" in x.value for x in at.success), [e.value for e in at.error]
    with Session(judged) as s:
        info = labeling.get_label_set(s, "first")
        items = ext_of(judged, labeling.label_set_items(s, info.id))
    assert info.size == 5 and info.strategy["kind"] == "random" and info.strategy["seed"] == 1
    keys = [c.key for c in info.criteria]

    at.radio(key="label_mode").set_value("Label").run()
    assert at.selectbox(key="label_set").value == "first"
    assert "Item 1 of 5" in page_text(at)
    assert_blind(at, secrets)
    # saving with criteria unchosen is refused
    at.button(key=f"label_{keys[0]}_1").click().run()
    at.button(key="label_save").click().run()
    assert any("Not saved" in w.value for w in at.warning) and labels_of(judged, "ana") == {}
    first = {k: i % 2 for i, k in enumerate(keys)}
    first[keys[-1]] = "unsure"
    choose_all(at, first)
    assert f"{len(keys)} of {len(keys)} criteria chosen" in page_text(at)
    at.text_area(key=next(t.key for t in at.text_area)).input("hard one").run()
    assert_blind(at, secrets)
    at.button(key="label_save").click().run()
    saved = labels_of(judged, "ana")
    expected = {k: (None if v == "unsure" else v) for k, v in first.items()}
    assert saved == {(items[0], k): (v, "hard one") for k, v in expected.items()}
    assert "Item 2 of 5" in page_text(at) and "1 of 5 labelled" in page_text(at)
    assert_blind(at, secrets)  # the reveal toggle is off by default

    # the reveal shows how the runs judged the *saved* example
    at.toggle(key="label_reveal").set_value(True).run()
    revealed = page_text(at)
    with Session(judged) as s:
        ex_id = store.example_ids(s, store.get_dataset(s, "demo").id)[items[0]]
        mine = [r for r in s.scalars(select(store.Verdict.rationale).where(store.Verdict.example_id == ex_id))]
    assert mine and all(r in revealed for r in mine)
    at.toggle(key="label_reveal").set_value(False).run()

    # skip item 2, label item 3
    at.button(key="label_skip").click().run()
    assert "Item 3 of 5" in page_text(at)
    choose_all(at, {k: 1 for k in keys})
    at.button(key="label_save").click().run()
    assert {k for k in labels_of(judged, "ana")} == {(e, k) for e in (items[0], items[2]) for k in keys}

    # a fresh browser session resumes at the first item without ana's labels: item 2 (skipped)
    at2 = open_label_page()
    assert "Item 2 of 5" in page_text(at2) and "2 of 5 labelled by ana" in page_text(at2)
    assert_blind(at2, secrets)
    # go back and edit item 1: it opens with ana's saved choices; change one and save
    at2.button(key="label_back").click().run()
    assert "Item 1 of 5" in page_text(at2) and "(editing)" in page_text(at2)
    assert f"{len(keys)} of {len(keys)} criteria chosen" in page_text(at2)
    at2.button(key=f"label_{keys[0]}_0").click().run()
    at2.button(key="label_save").click().run()
    assert labels_of(judged, "ana")[(items[0], keys[0])] == (0, "hard one")
    assert "Item 2 of 5" in page_text(at2)

    # another annotator starts at item 1 and sees nothing of ana's labels or note
    at3 = open_label_page("bob")
    assert "Item 1 of 5" in page_text(at3) and "0 of 5 labelled by bob" in page_text(at3)
    assert "hard one" not in page_text(at3) and f"0 of {len(keys)} criteria chosen" in page_text(at3)


def test_page_warns_of_and_refuses_a_key_another_rubric_defines_differently(judged, tmp_path):
    with Session(judged) as s, s.begin():
        info = labeling.create_label_set(s, "clash", dataset="demo", rubric="demo",
                                         spec=SampleSpec("random", size=3, seed=0))
        key = info.criteria[0].key
        (tmp_path / "other.yaml").write_text(f"name: other\ncriteria:\n  - key: {key}\n    question: How much?\n"
                                             "    kind: scale\n    levels: {1: a, 2: b, 3: c, 4: d, 5: e}\n")
        imports.import_rubric(s, tmp_path / "other.yaml")
    at = open_label_page()
    warned = [w.value.replace("\\", "") for w in at.warning if "cannot be saved" in w.value]  # as a reader sees it
    assert len(warned) == 1 and f"Labels for {key} cannot be saved" in warned[0] and "other" in warned[0]
    choose_all(at, {c.key: 1 for c in info.criteria})
    at.button(key="label_save").click().run()
    assert not at.exception
    assert any("Not saved" in e.value and "defined differently" in e.value for e in at.error), [e.value for e in at.error]
    assert "nothing was saved" in at.error[0].value
    assert labels_of(judged, "ana") == {}


def test_page_agreement_and_adjudication(judged):
    with Session(judged) as s, s.begin():
        info = labeling.create_label_set(s, "pair", dataset="demo", rubric="demo",
                                         spec=SampleSpec("random", size=5, seed=0))
        items = labeling.label_set_items(s, info.id)
        crits = info.criteria
        labeling.save_item(s, items[0], "ana", {c.key: 1 for c in crits}, crits)
        labeling.save_item(s, items[0], "bob", {c.key: 0 for c in crits}, crits)
    at = open_label_page("cy")
    at.radio(key="label_mode").set_value("Agreement").run()
    assert not at.exception
    assert f"Disagreements ({len(crits)})" in page_text(at)
    assert at.checkbox(key="label_adj|cy").value is False
    at.checkbox(key="label_adj|cy").check().run()
    with Session(judged) as s:
        assert labeling.annotator_role(s, "cy") == "adjudicator"
    at.button(key="label_adj_0").click().run()  # settle the first disagreement as fail
    with Session(judged) as s:
        _, m = labeling.human_consensus(s, info.dataset_id, crits)
        row = list(store.example_ids(s, info.dataset_id).values())
        row = sorted(row).index(items[0])
    assert m[row, 0] == 0.0 and np.isnan(m[row, 1])  # settled; the other criteria are still ties


def test_csv_round_trip_with_formula_like_text(engine, cli, tmp_path):
    """CSV export neutralises cells a spreadsheet would execute (= + - @); import must undo it exactly."""
    (tmp_path / "ds.jsonl").write_text('{"id": "-5", "answer": "x"}\n{"id": "q1", "answer": "y"}\n')
    (tmp_path / "pair.yaml").write_text(RUBRIC)
    with Session(engine) as s, s.begin():
        imports.import_dataset(s, tmp_path / "ds.jsonl", "mini")
        imports.import_rubric(s, tmp_path / "pair.yaml")
    put(engine, [("-5", "a", "ana", 1), ("q1", "a", "@bob", 0)], note="=not a formula")
    before = label_rows(engine)
    out = tmp_path / "labels.csv"
    assert cli("export-labels", "--dataset", "mini", "--out", out).exit_code == 0
    with Session(engine) as s, s.begin():
        s.execute(delete(store.Label))
    assert cli("import-labels", out, "--dataset", "mini").exit_code == 0
    assert label_rows(engine) == before


def test_page_scale_criteria(engine):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=10)
        info = labeling.create_label_set(s, "scales", dataset="demo", rubric="demo-scale",
                                         spec=SampleSpec("random", size=2, seed=0))
        first_id = labeling.label_set_items(s, info.id)[0]
    first = ext_of(engine, [first_id])[0]
    at = open_label_page("sam")
    assert not at.exception
    scores = {c.key: 1 + i % 5 for i, c in enumerate(info.criteria)}
    choose_all(at, scores)
    at.button(key="label_save").click().run()
    assert not at.exception and "Item 2 of 2" in page_text(at)
    assert labels_of(engine, "sam") == {(first, k): (v, None) for k, v in scores.items()}


def test_page_shows_the_rubric_beside_the_buttons_and_the_set_as_a_whole(judged):
    with Session(judged) as s, s.begin():
        info = labeling.create_label_set(s, "scored", dataset="demo", rubric="demo-scale",
                                         spec=SampleSpec("random", size=3, seed=2))
        rubric = store.load_rubric(s, "demo-scale")
        items = labeling.label_set_items(s, info.id)
        # someone else has labelled the first item (a consensus on every criterion) and split the second
        store.upsert_labels(s, [{"example_id": items[0], "criterion": c.key, "annotator": who, "value": 4}
                                for c in rubric.criteria for who in ("bo", "cy")]
                            + [{"example_id": items[1], "criterion": "clarity", "annotator": who, "value": v}
                               for who, v in (("bo", 5), ("cy", 1))])
    at = open_label_page()
    at.selectbox(key="label_set").set_value("scored").run()
    text = page_text(at).replace("\\", "")
    for c in rubric.criteria:  # every question and every level description is on the page, not in a tooltip
        assert c.question in text.replace("\n", " ")
        assert all(level in text for level in c.levels.values())
    assert "Label set scored: 3 items · labelled by bo 2, cy 2 · consensus on every criterion: 1 · split (a tie): 1" \
        in text
    shortcuts = [at.button(key=f"label_{c.key}_{v}").proto.shortcut for c in rubric.criteria for v in range(1, 6)]
    assert len(set(shortcuts)) == 20 and all(len(k) == 1 and k.isalpha() for k in shortcuts)  # every score a key
    assert {"c", "r"}.isdisjoint(k.lower() for k in shortcuts)  # Streamlit keeps C and R for itself
    # a chosen score is drawn chosen; the keys are listed in the sidebar
    at.button(key=f"label_{rubric.criteria[0].key}_4").click().run()
    assert at.button(key=f"label_{rubric.criteria[0].key}_4").proto.icon == ":material/check:"
    assert any("score 1–5" in str(m.value) for m in at.sidebar.markdown)
