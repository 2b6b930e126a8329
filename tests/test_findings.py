"""The first screen's findings (judgekit.findings): every number read off the reports handed in."""

from __future__ import annotations

import math

from judgekit import audit as audit_mod
from judgekit import findings, reports


def phi_report(audit: list[reports.AuditRow], human: str | None = "human") -> reports.PhiReport:
    return reports.PhiReport(["a", "b", "c"], [], audit, human, 1000)


def row(a: str, b: str, verdict: str, induced_by=(), note: str = "", label_more=None) -> reports.AuditRow:
    return reports.AuditRow(a, b, {}, verdict, list(induced_by), note, label_more=label_more)


RUNS = [
    findings.RunFacts("run:1", "one-call", "single", calls=600, tokens=500_000, usd=0.5, mean_kappa=0.40,
                      kappa_criteria=6, n_labelled=80),
    findings.RunFacts("run:2", "per-criterion", "split", calls=3_600, tokens=1_500_000, usd=1.75, mean_kappa=0.62,
                      kappa_criteria=6, n_labelled=80),
]
SOURCES = {"run:one-call": "run:1", "run:per-criterion": "run:2"}


def test_each_harness_is_credited_with_the_associations_it_induced():
    audit = [
        row("a", "b", "induced", ["run:one-call"]),
        row("a", "c", "induced", ["run:one-call", "run:per-criterion"]),
        row("b", "c", "real"),
    ]
    first = findings.findings(phi_report(audit), RUNS, SOURCES)[0]
    assert first.sentence == (
        "Associations a harness shows that the humans do not (induced by its call structure), of 3 criterion "
        "pairs: one-call (single) 2; per-criterion (split) 1."
    )
    assert first.page == "pages/associations.py" and first.params == {"sources": ["human", "run:1", "run:2"]}


def test_the_cost_ratio_uses_money_when_every_run_has_a_price_else_tokens():
    cost = next(f for f in findings.findings(None, RUNS, SOURCES) if f.page == "pages/compare.py")
    assert cost.sentence == "per-criterion (split) cost 3.5× the money of one-call (single); 3,600 calls against 600."
    assert cost.params == {"a": "run:1", "b": "run:2"}
    free = [findings.RunFacts(r.key, r.name, r.harness, r.calls, r.tokens, 0.0) for r in RUNS]
    cost = next(f for f in findings.findings(None, free, SOURCES) if f.page == "pages/compare.py")
    assert cost.sentence.startswith("per-criterion (split) cost 3.0× the tokens of one-call (single)")


def test_agreement_lists_every_run_best_first_with_n():
    agreement = next(f for f in findings.findings(None, RUNS, SOURCES) if f.page == "pages/agreement.py")
    assert agreement.sentence == (
        "Agreement with the humans (mean Cohen's κ over the criteria, up to 80 labelled answers): "
        "per-criterion 0.62; one-call 0.40. Closest: per-criterion."
    )
    assert agreement.params == {"run": "run:2"}


def test_undecided_pairs_quote_the_audits_own_note():
    audit = [row("a", "b", "undecided", note="human phi 0.10 [-0.12, 0.31]; label about 40 more answers"),
             row("a", "c", "real"), row("b", "c", "undecided")]
    undecided = findings.findings(phi_report(audit), RUNS, SOURCES)[-1]
    assert undecided.sentence == (
        "2 of 3 criterion pairs are undecided: the human column cannot tell yet whether the association is real. "
        "For example a × b: human phi 0.10 [-0.12, 0.31]; label about 40 more answers."
    )
    assert undecided.page == "pages/label.py"


def test_undecided_pairs_say_how_many_labels_would_decide_the_cheapest():
    audit = [row("a", "b", "undecided", label_more=audit_mod.LabelMore(120, {"pass/pass": 1.0})),
             row("a", "c", "undecided", label_more=audit_mod.LabelMore(45, {"pass/fail": 1.0})),
             row("b", "c", "undecided")]
    undecided = findings.findings(phi_report(audit), RUNS, SOURCES)[-1]
    assert undecided.sentence == (
        "3 of 3 criterion pairs are undecided: the human column cannot tell yet whether the association is real. "
        "About 45 more labelled answers would decide a × c: a label set with the strategy 'decide' picks them."
    )
    scarce = [row("a", "b", "undecided", label_more=audit_mod.LabelMore(900, {}, feasible=False))]
    assert "900 more labelled answers would decide a × b (more than are still unlabelled)" in (
        findings.findings(phi_report(scarce), RUNS, SOURCES)[-1].sentence)


def test_without_labels_there_is_no_audit_finding_and_no_agreement():
    unlabelled = [findings.RunFacts(r.key, r.name, r.harness, r.calls, r.tokens, r.usd) for r in RUNS]
    out = findings.findings(phi_report([row("a", "b", "no human column")], human=None), unlabelled, SOURCES)
    assert [f.page for f in out] == ["pages/compare.py"]
    assert math.isnan(unlabelled[0].mean_kappa)


def test_an_empty_workspace_gets_the_two_steps():
    steps = findings.first_steps(has_data=False, has_runs=False)
    assert [s.page for s in steps] == ["pages/data.py", "pages/run.py"]
    assert steps[0].sentence.startswith("1. ") and steps[1].sentence.startswith("2. ")
    assert [s.sentence[:2] for s in findings.first_steps(has_data=True, has_runs=False)] == ["1."]
    assert findings.no_labels_step().page == "pages/label.py"
