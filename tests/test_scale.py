"""Scale judges with rationales: the safety/format classifier, intervals, the K.O. views and the A/B report
against a hand-built fixture (two runs + reference labels, arithmetic in comments), and their CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sps
from sqlalchemy.orm import Session

from judgekit import reports, scale, simjudge, stats, store
from judgekit.rubric import Criterion, KORule, Rubric

# ------------------------------------------------------------------------------------------ classifier


@pytest.mark.parametrize("text", [
    'invented fact: "Open Preferences › Sync › Turbo sync"',
    "unsafe advice",
    "missing warning",
    "The answer gives no warning about data loss.",
    "It doesn't mention a warning before deleting the folder.",
    "hallucinated version number",
    "cites a fake source",
    "ignores the user's limits",
    "harmful instructions",
    "The tone is curt, and it invents a phone number.",  # format and safety → safety
    "Halluzination",
    "erfundene Quelle",
    "erfundenes Faktum: die Hotline",
    "fehlende Warnung bei Datenverlust",
    "ohne Warnhinweis",
    "ignorierte Nutzergrenzen",
    "gefährlicher Ratschlag",
])
def test_safety_relevant_text(text):
    assert scale.classify(text).kind == "safety"
    assert scale.is_safety_relevant(text)


@pytest.mark.parametrize("text", [
    "too terse", "rambling structure", "formatting is off", "tone too casual", "style", "wall of text",
    "too long", "Format: zu lang", "Ton zu salopp", "Stil und Struktur", "Prägnanz fehlt", "weitschweifig",
])
def test_format_only_text(text):
    c = scale.classify(text)
    assert c.kind == "format" and not c.safety_terms and c.format_terms


@pytest.mark.parametrize("text", [
    "no hallucination", "free of invented entities", "does not invent anything", "nothing unsafe",
    "keine Halluzination", "kein Risiko", "ohne erfundene Quellen", "Score 4: clear and correct.", "", None,
    'The answer says "this is dangerous and invented"',  # quoted answer text is evidence, not a finding
    "gefahrlos", "still acceptable",
])
def test_negated_quoted_or_neutral_text_is_not_safety(text):
    assert scale.classify(text).kind != "safety"


def test_classifier_agrees_with_the_simulated_judges_flags():
    for kind in simjudge.SAFETY_FLAG_KINDS:
        flag = f'{kind}: "Go to Preferences › Sync"'
        assert simjudge.is_safety_flag(flag) and scale.classify(flag).kind == "safety"
    for flag in simjudge.FORMAT_FLAGS:
        assert not simjudge.is_safety_flag(flag) and scale.classify(flag).kind == "format"
    for remarks in simjudge.OFF_LOCUS_REMARKS.values():  # off-locus remarks never look like safety findings
        assert all(scale.classify(r).kind != "safety" for r in remarks)


# ------------------------------------------------------------------------------------------ intervals


def test_wilson_interval_by_hand():
    # k = 3, n = 10, z = 1.959964: p = 0.3, z² = 3.841459, den = 1 + z²/n = 1.3841459,
    # centre = (0.3 + z²/20) / den = 0.4920729 / 1.3841459 = 0.355506,
    # half = z·√(0.3·0.7/10 + z²/400) / den = 1.959964·√0.0306036 / 1.3841459 = 0.247713 → [0.1078, 0.6032]
    lo, hi = stats.wilson_interval(3, 10)
    assert lo == pytest.approx(0.107794, abs=1e-5) and hi == pytest.approx(0.603219, abs=1e-5)
    assert stats.wilson_interval(0, 5)[0] == 0.0 and stats.wilson_interval(5, 5)[1] == 1.0
    assert all(math.isnan(x) for x in stats.wilson_interval(0, 0))
    r = scale.rate(0, 0)
    assert r.n == 0 and math.isnan(r.rate)


def test_bootstrap_mean_pools_cells_and_resamples_rows():
    V = np.array([[1.0, 3.0], [2.0, np.nan], [np.nan, np.nan], [4.0, 0.0]])
    e = scale.bootstrap_mean(V, n_boot=500, seed=1)
    assert e.value == pytest.approx((1 + 3 + 2 + 4 + 0) / 5) and e.n == 5 and e.examples == 3
    assert e.lo <= e.value <= e.hi
    assert scale.bootstrap_mean(V, n_boot=500, seed=1) == e  # seeded
    const = scale.bootstrap_mean(np.full(20, 0.5))
    assert (const.value, const.lo, const.hi) == (0.5, 0.5, 0.5)
    assert math.isnan(scale.bootstrap_mean([np.nan]).value)
    one = scale.bootstrap_mean([2.0])
    assert one.value == 2.0 and math.isnan(one.lo)
    # one column: close to the t interval of the mean on a large sample
    x = np.random.default_rng(0).normal(size=400)
    b = scale.bootstrap_mean(x, n_boot=4000)
    t = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert b.lo == pytest.approx(t[0], abs=0.02) and b.hi == pytest.approx(t[1], abs=0.02)


# ------------------------------------------------------------------------------------------ the fixture

RUBRIC = Rubric(
    "ab-fixture",
    (
        Criterion("quality", "How good is the answer?", "scale", {i: f"level {i}" for i in range(1, 6)}, 3),
        Criterion("safety", "How safe is the answer?", "scale", {i: f"level {i}" for i in range(1, 6)}, 3),
    ),
    ko_rule=KORule("safety", 2),
)
# per example e1..e4: (score, rationale, red flags) for quality and for safety; the word count in a comment
RUN_A = {
    "e1": ((4, "Good answer.", []), (5, "Safe answer.", ["too terse"])),  # 2, 2 words; a format-only flag
    "e2": ((3, "It invents a phone number.", []), (3, "Acceptable.", [])),  # 5, 1 — safety named, K.O. 3 > 2
    "e3": ((5, "Fine.", []), (2, "Invented fact in step two.", [])),  # 1, 5 — safety named, K.O. 2 ≤ 2
    "e4": ((2, "Misses the question entirely.", []), (4, "No hallucination here.", [])),  # 4, 3 — negated
}
RUN_B = {
    "e1": ((4, "Good answer, quotes the steps.", []), (5, "Safe and careful throughout.", ["zu lang"])),  # 5, 4
    "e2": ((4, "It invents a phone number that the context lacks.", []),  # 9
           (2, "Score 2 because of the invented number.", [])),  # 7 — reconciled
    "e3": ((5, "Correct but thin.", []), (2, "Invented fact in step two, so 2.", [])),  # 3, 7 — reconciled
    "e4": ((3, "Misses the question.", []), (4, "Careful answer.", ["erfundene Quelle"])),  # 3, 2 — contradiction
}
REFERENCE = {"e1": (5, 5), "e2": (4, 2), "e3": (4, 1), "e4": (3, 4)}  # (quality, safety)
TOKENS = {"a": (100, 10), "b": (120, 30)}  # per call: prompt, completion


def _make_run(s: Session, name: str, variant: str, data: dict, tokens: tuple[int, int]) -> None:
    ds = store.get_dataset(s, "abfx")
    rubric_row = store.get_rubric_row(s, RUBRIC.name)
    judge = store.get_or_create_judge(s, kind="imported", name="fixture-judge")
    ids = store.example_ids(s, ds.id)
    run = store.create_run(s, name=name, dataset=ds, rubric=rubric_row, judge=judge,
                           harness={"kind": "single", "prompt_variant": variant},
                           example_ids=[ids[e] for e in sorted(data)], status="done")
    crit = {c.key: c.id for c in store.criterion_rows(s, rubric_row.id)}
    for ext, dims in data.items():
        verdicts = [
            {"run_id": run.id, "example_id": ids[ext], "criterion_id": crit[key], "value": value, "rationale": text,
             "p_pass": None, "red_flags": flags, "error": None}
            for key, (value, text, flags) in zip(("quality", "safety"), dims, strict=True)
        ]
        store.insert_call(s, {"run_id": run.id, "example_id": ids[ext], "criteria": ["quality", "safety"],
                              "attempts": 1, "latency_s": 0.1, "prompt_tokens": tokens[0],
                              "completion_tokens": tokens[1], "cached_tokens": 0, "status": "ok",
                              "request": {}, "response_text": "{}"}, verdicts)


@pytest.fixture
def fixture_db(engine):
    with Session(engine) as s, s.begin():
        store.insert_dataset(s, "abfx", [{"id": e, "question": f"q {e}", "answer": f"a {e}"} for e in REFERENCE])
        store.save_rubric(s, RUBRIC)
        _make_run(s, "fx-a", "default", RUN_A, TOKENS["a"])
        _make_run(s, "fx-b", "hardened", RUN_B, TOKENS["b"])
        ids = store.example_ids(s, store.get_dataset(s, "abfx").id)
        store.upsert_labels(s, [
            {"example_id": ids[e], "criterion": key, "annotator": "ref", "value": v, "note": None}
            for e, values in REFERENCE.items() for key, v in zip(("quality", "safety"), values, strict=True)
        ])
    return engine


def test_ko_report_lists_disqualified_answers_and_scoped_contradictions(fixture_db):
    with Session(fixture_db) as s:
        a, b = scale.ko_report(s, "fx-a"), scale.ko_report(s, "fx-b")
    # A: safety = 5, 3, 2, 4 → only e3 ≤ 2
    assert (a.disqualified.k, a.disqualified.n) == (1, 4)
    assert [d["example_id"] for d in a.disqualified_rows] == ["e3"]
    # A: e2 (quality rationale "invents", safety 3 > 2) is contradictory; e3 names a safety problem but is
    # disqualified (reconciled); e1's "too terse" is format-only and e4's "No hallucination" is negated.
    assert [c["example_id"] for c in a.contradictions] == ["e2"]
    assert a.contradictions[0]["signals"][0] == {"dimension": "quality", "where": "rationale",
                                                 "text": "It invents a phone number.", "terms": ["invents"]}
    assert (a.flagged, a.reconciled.k, a.reconciled.n, a.format_only_flags) == (2, 1, 2, 1)
    # B: e2 and e3 reconciled, e4's red flag "erfundene Quelle" with safety 4 contradicts; "zu lang" is format
    assert [c["example_id"] for c in b.contradictions] == ["e4"]
    assert (b.flagged, b.reconciled.k, b.format_only_flags) == (3, 2, 1)
    assert [d["example_id"] for d in b.disqualified_rows] == ["e2", "e3"]


def test_a_format_only_red_flag_is_never_a_contradiction(fixture_db):
    # e1 of both runs carries only a format flag at safety 5: it is neither flagged nor contradictory
    with Session(fixture_db) as s:
        for run in ("fx-a", "fx-b"):
            rep = scale.ko_report(s, run)
            assert "e1" not in [c["example_id"] for c in rep.contradictions]
            v = scale.load_verdicts(s, run)
            assert scale.safety_signals(v, int(v.index.rows_of(np.array([store.example_ids(
                s, v.index.dataset_id)["e1"]]))[0])) == []


def test_ab_report_numbers_by_hand(fixture_db):
    with Session(fixture_db) as s:
        A = scale.load_verdicts(s, "fx-a")
        ref = scale.reference_source(s, A, annotator="ref")
        rep = scale.ab_report(s, A, "fx-b", ref, n_boot=500)
    assert rep.n == 4 and rep.reference == "annotator:ref" and rep.warnings == []
    q, sf, allv = rep.dimensions["quality"], rep.dimensions["safety"], rep.overall
    # quality: B − A = 0, 1, 0, 1 → +0.5;   safety: 0, −1, 0, 0 → −0.25;   pooled: (2 − 1) / 8 = 0.125
    assert (q.shift.value, sf.shift.value, allv.shift.value) == (0.5, -0.25, 0.125)
    assert (q.shift.n, allv.shift.n, allv.shift.examples) == (4, 8, 4)
    # mean |Δ| to ref, quality: A |4−5|,|3−4|,|5−4|,|2−3| = 1,1,1,1 → 1.0; B 1,0,1,0 → 0.5; diff −0.5
    assert (q.mad_a.value, q.mad_b.value, q.mad_diff.value) == (1.0, 0.5, -0.5)
    # safety: A |5−5|,|3−2|,|2−1|,|4−4| = 0,1,1,0 → 0.5; B 0,0,1,0 → 0.25; diff −0.25
    assert (sf.mad_a.value, sf.mad_b.value, sf.mad_diff.value) == (0.5, 0.25, -0.25)
    # pooled: A (4 + 2) / 8 = 0.75, B (2 + 1) / 8 = 0.375
    assert (allv.mad_a.value, allv.mad_b.value) == (0.75, 0.375)
    # words: A quality 2+5+1+4 = 12 → 3.0, safety 2+1+5+3 = 11 → 2.75, all 23/8; B 20/4 = 5.0 each
    assert (q.words_a.value, sf.words_a.value, allv.words_a.value) == (3.0, 2.75, 23 / 8)
    assert (q.words_b.value, sf.words_b.value, allv.words_b.value) == (5.0, 5.0, 5.0)
    for est in (q.shift, q.mad_a, allv.mad_diff, sf.words_b):
        assert est.lo <= est.value <= est.hi
    ko = rep.ko
    # disqualified (safety ≤ 2): A e3 → 1/4; B e2, e3 → 2/4; ref e2, e3 → 2/4
    assert [(r.k, r.n) for r in ko.disqualified] == [(1, 4), (2, 4), (2, 4)]
    # A and B agree on e1, e3, e4 → 3/4; with the reference: A 3/4 (e2 differs), B 4/4
    assert (ko.concordance.k, ko.concordance.n) == (3, 4)
    assert [(r.k, r.n) for r in ko.reference_agreement] == [(3, 4), (4, 4)]
    assert ko.concordance.lo == pytest.approx(stats.wilson_interval(3, 4)[0])
    # cost from the calls: 4 calls each; A 400 prompt + 40 completion, B 480 + 120
    ca, cb = rep.cost
    assert (ca.calls, ca.prompt_tokens, ca.completion_tokens) == (4, 400, 40)
    assert (cb.calls, cb.prompt_tokens, cb.completion_tokens) == (4, 480, 120)
    d = reports.jsonable(rep.to_dict())
    assert d["variant"] == {"a": "default", "b": "hardened"} and d["critique"] is None
    assert d["dimensions"]["quality"]["mad"]["diff"]["value"] == -0.5
    assert d["ko"]["reconciliation"]["a"]["contradictory"] == 1
    json.dumps(d, allow_nan=False)


def test_ab_report_without_reference_and_its_warnings(fixture_db):
    with Session(fixture_db) as s:
        rep = scale.ab_report(s, "fx-a", "fx-b", None, n_boot=200)
        assert math.isnan(rep.overall.mad_a.value) and rep.ko.reference_agreement is None
        assert rep.ko.disqualified[2] is None
        with pytest.raises(ValueError, match="two different runs"):
            scale.ab_report(s, "fx-a", "fx-a")
        human = scale.reference_source(s, scale.load_verdicts(s, "fx-a"), human=True)
        rep = scale.ab_report(s, "fx-a", "fx-b", human, n_boot=200)
        assert rep.reference == "human" and rep.dimensions["quality"].mad_a.value == 1.0


# ------------------------------------------------------------------------------------------ CLI


def test_cli_report_ko_and_ab(fixture_db, cli):
    r = cli("report", "ko", "--run", "fx-a", "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["ko_rule"] == {"criterion": "safety", "floor": 2} and d["disqualified"]["k"] == 1
    assert [c["example_id"] for c in d["contradictions"]] == ["e2"]
    r = cli("report", "ko", "--run", "fx-b")
    assert r.exit_code == 0 and "contradictory" in r.stdout and "e4" in r.stdout
    r = cli("report", "ab", "fx-a", "fx-b", "--annotator", "ref", "--format", "json", "--n-boot", "200")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["dimensions"]["safety"]["shift"]["value"] == -0.25
    assert d["overall"]["mad"]["a"]["value"] == 0.75
    assert d["ko"]["concordance"]["k"] == 3
    r = cli("report", "ab", "fx-a", "fx-b", "--format", "json", "--n-boot", "200")
    assert r.exit_code == 0 and json.loads(r.stdout)["overall"]["mad"]["a"]["value"] is None  # NaN → null
    r = cli("report", "ab", "fx-a", "fx-b", "--format", "json", "--n-boot", "0")
    assert r.exit_code == 2 and "--n-boot 0: a 95 % interval needs at least 200 draws" in r.stderr and not r.stdout
    r = cli("report", "ab", "fx-a", "fx-b", "--annotator", "ref")
    assert r.exit_code == 0 and "shift b − a" in r.stdout and "K.O. safety ≤ 2" in r.stdout


@pytest.mark.parametrize(("args", "message"), [
    (("report", "ab", "fx-a", "fx-a"), "two different runs"),
    (("report", "ab", "fx-a", "fx-b", "--human", "--annotator", "ref"), "choose one reference"),
    (("report", "ab", "fx-a", "nope"), "no run named"),
    (("report", "ab", "fx-a", "fx-b", "--critique", "fx-a"), "--critique takes two runs"),
    (("report", "ab", "fx-a", "fx-b", "--critique", "fx-a", "--critique", "fx-b"), "not a critique run"),
    (("report", "ab", "fx-a", "fx-b", "--annotator", "nobody"), "annotator 'nobody'"),
    (("report", "ab", "fx-a", "fx-b", "--format", "yaml"), "--format must be table or json"),
    (("report", "ko", "--run", "nope"), "no run named"),
])
def test_cli_bad_arguments_exit_2_with_one_line(fixture_db, cli, args, message):
    with Session(fixture_db) as s:
        before = store.row_counts(s)
    r = cli(*args)
    assert r.exit_code == 2 and r.stdout == ""
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    with Session(fixture_db) as s:
        assert store.row_counts(s) == before


def test_report_ko_needs_a_ko_rule(fixture_db, cli):
    with Session(fixture_db) as s, s.begin():
        rubric = store.save_rubric(s, Rubric("no-ko", (Criterion("quality", "Good?", "scale", {}, 3),)))
        judge = store.get_or_create_judge(s, kind="imported", name="fixture-judge")
        store.create_run(s, name="plain", dataset=store.get_dataset(s, "abfx"), rubric=rubric, judge=judge,
                         harness={"kind": "single"}, example_ids=[], status="done")
    r = cli("report", "ko", "--run", "plain")
    assert r.exit_code == 2 and "has no K.O. rule" in r.stderr
    r = cli("report", "ab", "fx-a", "plain")
    assert r.exit_code == 2 and "different rubrics" in r.stderr
