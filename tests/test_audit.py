"""judgekit.audit: the verdict rules on hand-built evidence, the evidence's intervals by simulated coverage
(no reference implementation exists for post-stratified or paired posteriors), the audit's verdicts on
planted truth through the simulated judge, and the ``decide`` plan."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from judgekit import audit, planted, reports, simjudge, stats
from judgekit.harness import parse_harness
from judgekit.rubric import Criterion

NAN = math.nan


def est(value, lo, hi, significant=False, n=80, p=0.5):
    return audit.Estimate(value, lo, hi, p, n, significant)


def evidence(human=None, single=None, split=None, shift=None, vs_single=None, vs_split=None, **kw):
    harness = {"run:single": single or est(0.1, 0.0, 0.2), "run:split": split or est(0.05, -0.05, 0.15)}
    vs = {}
    if vs_single is not None:
        vs["run:single"] = vs_single
    if vs_split is not None:
        vs["run:split"] = vs_split
    base = dict(a="a", b="b", harness=harness, reference="run:split",
                shift={"run:single": shift or est(0.05, -0.02, 0.12)}, human=human, vs_human=vs,
                human_sd=0.1, n_labelled=80, unlabelled=520,
                cell_shares={"pass/pass": 0.4, "pass/fail": 0.2, "fail/pass": 0.2, "fail/fail": 0.2},
                labelled_cells={"pass/pass": 60, "pass/fail": 8, "fail/pass": 8, "fail/fail": 4})
    return audit.PairEvidence(**(base | kw))


# --------------------------------------------------------------------------------------------- rules


def test_no_human_column_and_undefined_human():
    assert audit.association_verdict(evidence()).verdict == "no human column"
    undefined = audit.Estimate(NAN, NAN, NAN, NAN, 80, False, "every label of b is pass (80 of 80): phi undefined")
    v = audit.association_verdict(evidence(human=undefined))
    assert v.verdict == "undecided" and "every label of b is pass" in v.note


def test_real_when_humans_see_it_and_every_harness_agrees():
    v = audit.association_verdict(evidence(human=est(0.5, 0.3, 0.7, significant=True, p=1e-4),
                                           vs_single=est(-0.1, -0.3, 0.1), vs_split=est(-0.1, -0.3, 0.1)))
    assert v.verdict == "real" and v.induced_by == [] and v.distorted_by == []
    assert "the humans see it: phi +0.50 [+0.30, +0.70]" in v.note


def test_a_sign_reversal_is_blamed_not_called_real():
    # humans see -0.3; the single call's own interval lies above 0
    v = audit.association_verdict(evidence(human=est(-0.3, -0.5, -0.1, significant=True),
                                           single=est(0.2, 0.1, 0.3), vs_single=est(0.5, 0.1, 0.9),
                                           vs_split=est(0.1, -0.2, 0.3)))
    assert v.verdict == "distorted" and v.distorted_by == ["run:single"]
    assert "reverses its sign" in v.note


def test_distorted_by_size_from_humans_or_from_a_shift_away_from_them():
    by_humans = audit.association_verdict(evidence(human=est(0.3, 0.1, 0.5, significant=True),
                                                   vs_single=est(0.4, 0.2, 0.6, significant=True),
                                                   vs_split=est(0.0, -0.2, 0.2)))
    assert by_humans.verdict == "distorted" and by_humans.distorted_by == ["run:single"] and "larger" in by_humans.note
    # H − human not significant on 80 labels, but H moved away from the humans on 600 paired answers
    by_shift = audit.association_verdict(evidence(human=est(0.3, 0.1, 0.5, significant=True),
                                                  shift=est(0.25, 0.18, 0.32, significant=True),
                                                  vs_single=est(0.2, -0.05, 0.45), vs_split=est(-0.05, -0.3, 0.2)))
    assert by_shift.distorted_by == ["run:single"]
    # a significant shift that lands nearer the humans than the reference blames nobody
    nearer = audit.association_verdict(evidence(human=est(0.49, 0.27, 0.62, significant=True),
                                                shift=est(0.16, 0.09, 0.23, significant=True),
                                                vs_single=est(0.01, -0.2, 0.22), vs_split=est(-0.15, -0.35, 0.05)))
    assert nearer.verdict == "real", nearer.note
    # a shift towards the humans (split attenuates, single does not) blames nobody
    towards = audit.association_verdict(evidence(human=est(0.5, 0.3, 0.7, significant=True),
                                                 shift=est(0.15, 0.08, 0.22, significant=True),
                                                 vs_single=est(-0.05, -0.3, 0.2), vs_split=est(-0.2, -0.45, 0.05)))
    assert towards.verdict == "real"


def test_induced_when_a_harness_shifts_it_and_the_humans_do_not_back_it():
    v = audit.association_verdict(evidence(human=est(0.05, -0.15, 0.25),
                                           shift=est(0.3, 0.22, 0.38, significant=True),
                                           vs_single=est(0.3, 0.05, 0.55), vs_split=est(0.0, -0.2, 0.2)))
    assert v.verdict == "induced" and v.induced_by == ["run:single"]
    assert "run:single measures phi +0.30 [+0.22, +0.38] more than run:split" in v.note
    # the humans sit significantly on the single call's side of the reference: not induced
    backed = audit.association_verdict(evidence(human=est(0.15, -0.05, 0.35),
                                                shift=est(0.3, 0.22, 0.38, significant=True),
                                                vs_split=est(-0.25, -0.4, -0.1, significant=True)))
    assert backed.verdict != "induced" and backed.induced_by == []


def test_none_and_undecided_with_a_power_calculation():
    none = audit.association_verdict(evidence(human=est(0.02, -0.15, 0.18)))
    assert none.verdict == "none"
    open_ = audit.association_verdict(evidence(human=est(0.15, -0.08, 0.38)))
    assert open_.verdict == "undecided" and open_.label_more is not None
    k = open_.label_more.k
    # sd 0.1 at n = 80, deciding "real" for 0.15 at 80 % power: n' = 80 (0.1 * 2.80 / 0.15)^2 = 279 -> k ~ 200
    assert 190 <= k <= 210 and k % 10 == 0
    assert f"about {k} more answers" in open_.note
    # the new labels go where the labelled answers fall short of the best split
    cells = open_.label_more.cells
    # best split of 280: pass/pass 112 (60 labelled), fail/fail 56 (4 labelled): deficits 52 and 52 of 200
    assert cells["fail/fail"] == pytest.approx(52 / 200) and cells["pass/pass"] == pytest.approx(52 / 200)
    assert sum(cells.values()) == pytest.approx(1.0)
    wider = audit.association_verdict(evidence(human=est(0.15, -0.08, 0.38), human_sd=0.2))
    assert wider.label_more.k > k
    short = audit.association_verdict(evidence(human=est(0.15, -0.08, 0.38), unlabelled=50))
    assert not short.label_more.feasible and "cannot decide" in short.note


# --------------------------------------------------------------------------------------------- evidence


def _judges_of(truth: np.ndarray, rng: np.random.Generator, copy: float) -> tuple[np.ndarray, np.ndarray]:
    """Two judges of the same truth with 10 % flips; X also copies column 0 into column 1 with p = copy."""
    def judge(c):
        J = np.where(rng.random(truth.shape) < 0.1, 1 - truth, truth)
        J[:, 1] = np.where(rng.random(len(J)) < c, J[:, 0], J[:, 1])
        return J
    return judge(copy), judge(0.0)


def test_paired_shift_and_post_stratified_human_phi_hold_their_coverage():
    # population: a real association 0.3 between criteria 0 and 1 (failure 15 % and 25 %); judge X copies
    # its verdict on 0 into 1 for 30 % of answers. Truth of every interval from 400k answers.
    rng = np.random.default_rng(8)
    p = planted.cell_probabilities(0.15, 0.25, 0.3)

    def draw(n):
        cells = rng.choice(4, size=n, p=p)
        return np.column_stack([(cells < 2), (cells % 2 == 0)]).astype(float)

    big = draw(400_000)
    bx, by = _judges_of(big, rng, 0.3)
    true_shift = stats.phi(bx[:, 0], bx[:, 1]) - stats.phi(by[:, 0], by[:, 1])
    hits = {"shift": [], "human": [], "x − human": []}
    for r in range(250):
        T = draw(600)
        X, Y = _judges_of(T, rng, 0.3)
        H = np.full_like(T, np.nan)
        H[:80] = T[:80]
        e = audit.audit_evidence([X, Y], ["x", "y"], ["a", "b"], reference=1, human=H, n_draws=600, seed=r).pairs[0]
        hits["shift"].append(e.shift["x"].lo <= true_shift <= e.shift["x"].hi)
        hits["human"].append(e.human.lo <= 0.3 <= e.human.hi)
        vs = e.vs_human["x"]
        hits["x − human"].append(vs.lo <= stats.phi(bx[:, 0], bx[:, 1]) - 0.3 <= vs.hi)
    for kind, h in hits.items():
        assert 0.91 <= np.mean(h) <= 0.99, (kind, np.mean(h))


def test_identical_harnesses_give_a_narrow_nonzero_shift_around_zero():
    rng = np.random.default_rng(2)
    V = (rng.random((600, 3)) > 0.2).astype(float)
    e = audit.audit_evidence([V, V.copy()], ["x", "y"], ["a", "b", "c"], reference=1).pairs
    for pair in e:
        s = pair.shift["x"]
        assert s.value == 0.0 and s.lo < 0 < s.hi and s.hi - s.lo < 0.05 and not s.significant



def test_verdicts_never_rest_on_fewer_than_the_minimum_draws():
    rng = np.random.default_rng(3)
    V = (rng.random((200, 3)) > 0.25).astype(float)
    W = np.where(rng.random((200, 3)) < 0.1, 1 - V, V)
    few, enough = (audit.audit_evidence([V, W], ["x", "y"], ["a", "b", "c"], reference=1, n_draws=n).pairs
                   for n in (2, stats.MIN_DRAWS))
    assert repr(few) == repr(enough)  # two draws asked for: the minimum is drawn, so bounds and p are the same
    assert stats.check_draws(0) == 0 and stats.check_draws(stats.MIN_DRAWS) == stats.MIN_DRAWS
    for n, none in ((1, True), (199, True), (0, False)):
        with pytest.raises(ValueError, match=f"--n-boot {n}: a 95 % interval needs at least 200 draws"):
            stats.check_draws(n, none=none)

def test_undefined_evidence_says_why():
    V = np.ones((50, 2))
    V[:10, 0] = 0.0  # criterion b constant
    H = np.full((50, 2), np.nan)
    H[:20] = V[:20]
    e = audit.audit_evidence([V, V.copy()], ["run:x", "run:y"], ["a", "b"], reference=1, human=H).pairs[0]
    assert not e.harness["run:x"].defined and "every verdict of b under run:x is pass (50 of 50)" in e.harness["run:x"].reason
    assert not e.human.defined and "every label of b is pass (20 of 20)" in e.human.reason
    assert not e.shift["run:x"].defined and math.isnan(e.shift["run:x"].lo)


# --------------------------------------------------------------------------------------------- planted truth


def _sources(keys, single, split, human):
    n = len(single)
    ids = np.arange(1, n + 1)
    index = reports.ExampleIndex(0, "planted", ids, np.array([str(i) for i in ids], dtype=object))
    crits = tuple(Criterion(k, k) for k in keys)

    def src(key, kind, V, per_call=None):
        return reports.Source(key=key, kind=kind, judge=key, criteria=crits, index=index, raw=V, binary=V,
                              judged=frozenset(keys), per_call=per_call)

    return [src("run:single", "run", single, len(keys)), src("run:split", "run", split, 1), src("human", "human", human)]


@pytest.mark.slow
def test_audit_on_planted_truth_blames_the_single_call_and_finds_the_real_pairs():
    # 600 answers, 6 criteria: c1 × c4 real (+0.5), c2 × c5 real (+0.4), the rest independent. Graded by
    # the simulated judge under single (G = 1.5 and G = 0) and split; 150 answers labelled (the truth).
    rates = (0.15, 0.30, 0.10, 0.20, 0.25, 0.08)
    pairs = (planted.PlantedPair(0, 3, 0.5), planted.PlantedPair(1, 4, 0.4))
    corpus = planted.planted_truth(600, rates, pairs, seed=5)
    split = planted.judge_truth(corpus, parse_harness("split", order="verdict_only"), simjudge.SimParams(seed=5))
    human = np.full_like(corpus.truth, np.nan)
    human[:150] = corpus.truth[:150]
    for g in (1.5, 0.0):
        single = planted.judge_truth(corpus, parse_harness("single", order="verdict_only"),
                                     simjudge.SimParams(conditioning=g, seed=5))
        rep = reports.phi_report(_sources(corpus.keys, single, split, human), n_boot=1000, seed=1)
        assert rep.reference == "run:split"
        d = stats.phi_matrix(single).phi - stats.phi_matrix(split).phi
        for row, (i, j) in zip(rep.audit, itertools.combinations(range(6), 2), strict=True):
            truth = corpus.population_phi(i, j)
            if truth:
                assert row.verdict in ("real", "distorted"), (row.a, row.b, row.note)
            else:
                assert row.verdict not in ("real", "distorted"), (row.a, row.b, row.note)
            if g == 0.0:
                assert row.verdict != "induced", row.note  # single = split verdict for verdict
            elif not truth and d[i, j] >= 0.15:
                assert row.verdict == "induced" and row.induced_by == ["run:single"], row.note


# --------------------------------------------------------------------------------------------- decide


def test_label_plan_orders_by_k_and_pick_answers_stays_in_the_wanted_cells():
    v = [audit.AuditVerdict("undecided", [], "", [], audit.LabelMore(40, {"fail/fail": 0.5, "fail/pass": 0.5})),
         audit.AuditVerdict("real", [], ""),
         audit.AuditVerdict("undecided", [], "", [], audit.LabelMore(10, {"pass/fail": 1.0}))]
    e = [evidence(human=est(0.1, -0.1, 0.3))] * 3
    plan = audit.label_plan(v, e)
    assert [item.pair for item in plan] == [2, 0]  # nearest to a decision first
    assert plan[1].counts == {"fail/fail": 20, "fail/pass": 20}
    rng = np.random.default_rng(0)
    ref = (rng.random((400, 3)) > 0.3).astype(float)
    free = np.ones(400, bool)
    free[:50] = False  # labelled already
    rows = audit.pick_answers(plan, ref, free, 30, rng)
    assert len(rows) == 30 and len(set(rows.tolist())) == 30 and rows.min() >= 50
    # pair 2 = criteria (1, 2), pair 0 = criteria (0, 1): every pick serves a wanted cell
    a_fail = ref[rows, 0] == 0
    pair2 = (ref[rows, 1] == 1) & (ref[rows, 2] == 0)
    assert np.all(a_fail | pair2)
    # nothing wanted left in the cells: topped up at random from what is free
    few = audit.pick_answers([audit.PlanItem(0, {"fail/fail": 2}, 2)], ref, free, 10, rng)
    assert len(few) == 10


def test_the_audit_is_the_same_whatever_the_matrices_count(engine, db_url):
    """'Only the labelled answers' restricts the phi matrices, never the audit: a run's phi in the audit is
    over every answer it judged, and so is its interval (it once came from the restricted matrix, so an
    all-answer phi stood outside its own printed interval)."""
    from tests.conftest import labelled_pilot

    single, split, srcs = labelled_pilot(engine, db_url, 240, 70)
    labelled = srcs[-1].covered
    assert labelled.sum() == 70 < srcs[0].n
    every = reports.phi_report(srcs, n_boot=400)
    fewer = reports.phi_report(srcs, n_boot=400, matrices_over=labelled)
    assert [c.n for c in fewer.columns] == [70, 70, 70] and every.columns[0].n == srcs[0].n
    assert [(a.values, a.verdict, a.note) for a in fewer.audit] == [(a.values, a.verdict, a.note) for a in every.audit]
    for a in fewer.audit:
        for key in (f"run:{single}", f"run:{split}"):
            value, lo, hi = a.values[key]
            assert not math.isfinite(value) or lo <= value <= hi, (a.a, a.b, key, a.values[key])


def test_undefined_reasons_read_as_sentences():
    """No 'both a and b label of': each reason names whose verdicts or labels leave phi undefined."""
    from judgekit.audit import _table_reason

    empty = np.zeros(4)
    assert _table_reason(empty, "a", "c", "run:x") == "no answer has a and c both scored by run:x: phi undefined"
    assert _table_reason(empty, "a", "c", reference="run:ref") == (
        "no labelled answer has a and c both labelled and both scored by the reference run:ref: phi undefined")
    assert _table_reason(np.array([3, 2, 0, 0]), "a", "c", "run:x") == (
        "every verdict of a under run:x is pass (5 of 5): phi undefined")
    assert _table_reason(np.array([3, 2, 1, 4]), "a", "c", "run:x") is None
