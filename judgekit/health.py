"""Criterion health: is a criterion well written, and does it survive sharing a call?

Where this sits: analysis, on :mod:`judgekit.reports` (sources), :mod:`judgekit.noise` (the judge's noise
floor) and the intervals of :mod:`judgekit.stats`. ``judgekit report health``, the Agreement page and
the exported report show one :class:`CriterionHealth` per criterion key of the runs given:

* **test–retest** κ and flip rate: the judge against itself (the first of the runs with repeats);
* **judge vs judge** κ between every two of the runs (harnesses) on the answers both scored, and
  whether more verdicts flip between them than between repeats (:func:`noise.flips_against_floor`);
* **judge vs human** κ and raw agreement of every run against the human column;
* **prevalence**: the humans' share of failures; the share of **unsure** human labels; the share of
  **unscored** verdicts and of **"cannot assess"** answers per run.

Two flags, each a pure function with numbered rules (:func:`ambiguous_flag`, :func:`sensitive_flag`):
*ambiguous criterion — rewrite it* when agreement stays low under every harness and something besides
rare failures says the criterion is read inconsistently; *sensitive to call structure* when the
criterion is fine asked alone but its verdicts move, beyond the noise floor, once it shares a call.
Every interval is 95 %.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy.orm import Session

from judgekit import annotators, audit, noise, reports, stats, store
from judgekit.harness import Harness, criterion_groups

__all__ = [
    "AGREEMENT_LOW",
    "AMBIGUOUS",
    "SENSITIVE",
    "KAPPA_LOW",
    "SHARE_HIGH",
    "CriterionHealth",
    "Flag",
    "HealthReport",
    "ambiguous_flag",
    "export_sections",
    "health_report",
    "render_health_table",
    "sensitive_flag",
]

KAPPA_LOW = 0.6
"""κ whose 95 % upper bound lies below this is *low*: demonstrably short of substantial agreement."""
AGREEMENT_LOW = 0.8
"""Raw agreement whose 95 % upper bound lies below this: judge and humans part on many answers, which a
low κ from rare failures alone (high raw agreement, few failures) does not show."""
SHARE_HIGH = 0.05
"""An unsure / "cannot assess" share whose 95 % lower bound exceeds this is a sign of doubt."""

AMBIGUOUS = "ambiguous criterion — rewrite it"
SENSITIVE = "sensitive to call structure"


@dataclass(frozen=True)
class Flag:
    """A health flag with the evidence that raised it (sentences with the numbers)."""

    name: str
    evidence: list[str]

    def to_dict(self) -> dict:
        return {"flag": self.name, "evidence": self.evidence}


@dataclass(frozen=True)
class RunHealth:
    """One run's numbers for one criterion: κ and raw agreement with the humans, outcome shares, and
    whether the criterion shared a call in this run's harness."""

    run: str
    harness: str
    alone: bool | None  # asked in a call of its own (None: unknown, an imported run)
    kappa: audit.Estimate | None  # vs the human column
    agreement: audit.Estimate | None
    unscored: audit.Estimate
    cannot_assess: audit.Estimate

    def to_dict(self) -> dict:
        return {
            "run": self.run,
            "harness": self.harness,
            "alone": self.alone,
            "kappa_vs_human": self.kappa.to_dict() if self.kappa else None,
            "agreement_vs_human": self.agreement.to_dict() if self.agreement else None,
            "unscored": self.unscored.to_dict(),
            "cannot_assess": self.cannot_assess.to_dict(),
        }


@dataclass(frozen=True)
class PairShift:
    """How this criterion's association with ``other`` moves from run a to run b (phi_b − phi_a on the
    same answers, 95 % interval), the pair's noise floor and whether the move is beyond it."""

    other: str
    shift: audit.Estimate
    floor: float
    beyond: bool

    def to_dict(self) -> dict:
        return {"other": self.other, "shift": self.shift.to_dict(),
                "floor": self.floor if math.isfinite(self.floor) else None, "beyond": self.beyond}


@dataclass(frozen=True)
class JudgePair:
    """Two runs (harnesses) on one criterion: κ between them, their flips against the noise floor, and
    how the criterion's associations move between them."""

    a: str
    b: str
    kappa: audit.Estimate
    flips: noise.FlipComparison
    shifts: list[PairShift] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "kappa": self.kappa.to_dict(), "flips": self.flips.to_dict(),
                "associations": [x.to_dict() for x in self.shifts]}


@dataclass(frozen=True)
class CriterionHealth:
    key: str
    kind: str
    prevalence: audit.Estimate | None  # humans' share of failures (None without a human column)
    unsure: audit.Estimate | None  # share of the human column's labels that are "unsure"
    annotators_kappa: list[tuple[str, str, audit.Estimate]]  # κ of every two annotators of the column
    test_retest: noise.CriterionFloor | None
    runs: list[RunHealth]
    judge_vs_judge: list[JudgePair]
    flags: list[Flag] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "key": self.key,
            "kind": self.kind,
            "prevalence": self.prevalence.to_dict() if self.prevalence else None,
            "unsure": self.unsure.to_dict() if self.unsure else None,
            "annotators_kappa": [{"a": a, "b": b, "kappa": k.to_dict()} for a, b, k in self.annotators_kappa],
            "test_retest": self.test_retest.to_dict() if self.test_retest else None,
            "judge_vs_human": [r.to_dict() for r in self.runs],
            "judge_vs_judge": [p.to_dict() for p in self.judge_vs_judge],
            "flags": [f.to_dict() for f in self.flags],
        }


@dataclass(frozen=True)
class HealthReport:
    dataset: str
    runs: list[str]
    human: str | None
    human_judge: str | None
    floor: noise.NoiseFloor | None
    criteria: dict[str, CriterionHealth]
    notes: list[str]

    def to_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "runs": self.runs,
            "human": self.human,
            "human_judge": self.human_judge,
            "noise_floor": None if self.floor is None else {
                "group": self.floor.group, "runs": self.floor.runs, "harness": self.floor.harness,
                "temperature": self.floor.temperature, "n": self.floor.n},
            "criteria": {k: c.to_dict() for k, c in self.criteria.items()},
            "thresholds": {"kappa_low": KAPPA_LOW, "agreement_low": AGREEMENT_LOW, "share_high": SHARE_HIGH},
            "notes": self.notes,
        }


# --------------------------------------------------------------------------------------------- the flags


def _fmt(e: audit.Estimate, pct: bool = False) -> str:
    f = (lambda x: f"{x:.0%}") if pct else (lambda x: f"{x:.2f}")
    return f"{f(e.value)} [{f(e.lo)}, {f(e.hi)}]" if e.defined else f"undefined ({e.reason})"


def _low(e: audit.Estimate | None, bar: float) -> bool:
    return e is not None and e.defined and e.hi < bar


def _high(e: audit.Estimate | None) -> bool:
    return e is not None and e.defined and e.lo > SHARE_HIGH


def ambiguous_flag(h: CriterionHealth) -> Flag | None:
    """*Ambiguous criterion — rewrite it*, by these rules in order:

    1. It needs the human column and at least one run with κ against it defined; else no flag.
    2. **Low under every harness**: every run's κ against the humans has its 95 % upper bound below
       :data:`KAPPA_LOW` — splitting the call or changing the harness did not lift it (seed 003's C5:
       0.44 → 0.46).
    3. **Not rare failures alone** — at least one more sign that the criterion is read inconsistently:
       a. every run's raw agreement with the humans has its upper bound below :data:`AGREEMENT_LOW`;
       b. the humans' own doubt: the share of *unsure* labels is above :data:`SHARE_HIGH` (lower
          bound), or every two annotators' κ has its upper bound below :data:`KAPPA_LOW`;
       c. the judge's own doubt: some run's share of "cannot assess" is above :data:`SHARE_HIGH`.
       A low κ with high raw agreement and no doubt anywhere is what a well-read criterion with few
       failures shows (κ is bounded by the failure rate), so it is not flagged.
    """
    scored = [r for r in h.runs if r.kappa is not None and r.kappa.defined]
    if h.prevalence is None or not scored:
        return None
    if not all(_low(r.kappa, KAPPA_LOW) for r in scored):
        return None
    evidence = ["Agreement with the humans stays low under every harness: κ "
                + "; ".join(f"{r.harness} ({r.run}) {_fmt(r.kappa)}" for r in scored)]
    signs = []
    if all(_low(r.agreement, AGREEMENT_LOW) for r in scored):
        signs.append("Judge and humans agree on few answers, not only on rare failures: "
                     + "; ".join(f"{r.run} {_fmt(r.agreement, True)}" for r in scored))
    if _high(h.unsure):
        signs.append(f"The humans are unsure on {_fmt(h.unsure, True)} of their labels")
    if h.annotators_kappa and all(_low(k, KAPPA_LOW) for _, _, k in h.annotators_kappa):
        signs.append("The annotators disagree with each other: "
                     + "; ".join(f"{a}/{b} κ {_fmt(k)}" for a, b, k in h.annotators_kappa))
    doubtful = [r for r in h.runs if _high(r.cannot_assess)]
    if doubtful:
        signs.append("The judge answers \"cannot assess\" on "
                     + "; ".join(f"{_fmt(r.cannot_assess, True)} in {r.run}" for r in doubtful))
    if not signs:
        return None
    return Flag(AMBIGUOUS, evidence + signs)


def sensitive_flag(h: CriterionHealth) -> Flag | None:
    """*Sensitive to call structure*, by these rules in order:

    1. It needs a run that asks the criterion alone (one criterion per call) and one where it shares a
       call; else no flag.
    2. **Fine alone**: with a human column, the alone run's κ against the humans is not low (its upper
       bound reaches :data:`KAPPA_LOW`); without one, this rule is skipped (the evidence says so).
    3. **Moves when it shares a call**: between the alone run and some sharing run,
       a. more of its verdicts flip than between two repeats of the judge, by the exact paired test
          (:func:`noise.flips_against_floor`); or
       b. its association with another criterion shifts beyond the noise floor
          (:func:`noise.beyond_floor`: the paired shift is significant — false discovery rate 5 % across
          the pairs, as in the audit — and exceeds the pair's floor): an induced association.
       Without repeats the floor is 0 and the evidence says it is unknown.
    """
    alone = [r for r in h.runs if r.alone is True]
    sharing = {r.run for r in h.runs if r.alone is False}
    if not alone or not sharing:
        return None
    first = alone[0]
    evidence = []
    if h.prevalence is not None:
        if first.kappa is None or not first.kappa.defined or _low(first.kappa, KAPPA_LOW):
            return None
        evidence.append(f"Fine alone: κ against the humans {_fmt(first.kappa)} in {first.run}")
    else:
        evidence.append("No human column: whether it is fine alone is not checked")
    moved = []
    for p in h.judge_vs_judge:
        pair = {p.a, p.b}
        if first.run not in pair or not pair & sharing:
            continue
        other = (pair - {first.run}).pop()
        if p.flips.beyond:
            floor = (f"{_fmt(p.flips.floor, True)} between repeats, paired p {p.flips.p:.2g}"
                     if p.flips.floor.defined else noise.UNKNOWN_FLOOR)
            moved.append(f"{_fmt(p.flips.harness, True)} of its verdicts flip between {first.run} and {other} "
                         f"against {floor}")
        sign = 1.0 if p.a == first.run else -1.0  # shifts are phi(b) − phi(a): read them from alone to sharing
        for x in p.shifts:
            if x.beyond:
                floor = f"{x.floor:.2f}" if math.isfinite(x.floor) else "0 (unknown: no repeats)"
                v = sign * x.shift.value
                lo, hi = sorted((sign * x.shift.lo, sign * x.shift.hi))
                moved.append(f"Its phi with {x.other} moves by {v:+.2f} [{lo:+.2f}, {hi:+.2f}] from {first.run} "
                             f"to {other}, beyond the floor {floor}")
    if not moved:
        return None
    return Flag(SENSITIVE, evidence + moved)


# --------------------------------------------------------------------------------------------- assembling


def _share(part: int, whole: int, what: str) -> audit.Estimate:
    if whole == 0:
        return audit.Estimate(math.nan, math.nan, math.nan, math.nan, 0, False, f"no {what}")
    ci = stats.jeffreys_interval(part, whole)
    return audit.Estimate(part / whole, float(ci.lo), float(ci.hi), math.nan, whole)


def _kappa(m: stats.AgreementMatrix, j: int, what: str) -> audit.Estimate:
    n = int(m.n[j])
    if n == 0 or not math.isfinite(m.kappa[j]):
        why = f"no answer scored by both {what}" if n == 0 else f"a side is constant ({what}): κ undefined"
        return audit.Estimate(math.nan, math.nan, math.nan, math.nan, n, False, why)
    return audit.Estimate(float(m.kappa[j]), float(m.kappa_lo[j]), float(m.kappa_hi[j]), math.nan, n)


def _alone(run: store.Run, rubric, key: str) -> bool | None:
    if not run.harness or run.harness.get("kind") not in ("single", "split", "grouped"):
        return None
    groups = criterion_groups(Harness.from_dict(run.harness), rubric)
    return next((len(g) == 1 for g in groups if key in g), None)


def health_report(
    s: Session, runs: Sequence[str], *, human: bool = True, annotator: str | None = None, seed: int = 0
) -> HealthReport:
    """Criterion health over ``runs`` (one dataset) against the human column (``annotator``: one annotator
    instead of the consensus; ``human=False``: none)."""
    if not runs:
        raise ValueError("choose at least one run: --run NAME (repeatable)")
    srcs = reports.load_sources(s, list(runs))
    keys = srcs[0].keys
    ds = s.get(store.Dataset, srcs[0].index.dataset_id)
    run_rows = [store.get_run(s, src.run_id) for src in srcs]
    notes: list[str] = []
    hum: reports.Source | None = None
    names: list[str] = []
    if annotator:
        hum = reports.load_annotator(s, ds, annotator, srcs[0].criteria)
        names = [annotator]
    elif human:
        if store.annotators_for_dataset(s, ds.id):
            hum = reports.load_human(s, ds, srcs[0].criteria)
            names = reports.human_annotators(s, ds)
        else:
            notes.append(f"dataset {ds.name!r} has no human labels: judge-vs-human κ, prevalence and the "
                         "ambiguity flag need them")
    floor = noise.find_floor(s, run_rows)
    if floor is None:
        notes.append(noise.UNKNOWN_FLOOR)
    repeats = None
    if floor is not None:
        r1, r2 = (reports.load_run(s, name).select(keys) for name in floor.runs[:2])
        repeats = (r1, r2)
    vs_human = [stats.agreement_matrix(src.binary, hum.select(keys).binary, seed=seed) if hum else None
                for src in srcs]
    outcomes = [store.verdict_outcomes(s, r.id) for r in run_rows]
    labels = store.label_outcomes(s, ds.id, names) if names else {}
    H = hum.select(keys).binary if hum else None
    annot = []
    if len(names) > 1:
        _, _, L, _ = reports.label_tensor(s, srcs[0].index, srcs[0].criteria, names)
        annot = annotators.rater_kappas(L, names, store.annotator_roles(s, names), srcs[0].criteria, seed=seed)
    rubric = store.rubric_value(s, s.get(store.RubricRow, run_rows[0].rubric_id))
    # every pair association's move between every two runs: phi_b − phi_a on the same answers
    moves: dict[tuple[int, int], dict[str, list[tuple[str, audit.Estimate, float]]]] = {}
    for (x, A), (y, B) in itertools.combinations(list(enumerate(srcs)), 2):
        ev = audit.audit_evidence([A.binary, B.binary], ["a", "b"], keys, reference=0, seed=seed)
        by_key: dict[str, list[tuple[str, audit.Estimate, float]]] = {}
        for e in ev.pairs:
            f = floor.pair_floor(e.a, e.b) if floor is not None else math.nan
            by_key.setdefault(e.a, []).append((e.b, e.shift["b"], f))
            by_key.setdefault(e.b, []).append((e.a, e.shift["b"], f))
        moves[(x, y)] = by_key
    out: dict[str, CriterionHealth] = {}
    for j, c in enumerate(srcs[0].criteria):
        run_health = []
        for row, m, oc in zip(run_rows, vs_human, outcomes, strict=True):
            n_v, n_u, n_c = oc.get(c.key, (0, 0, 0))
            agreement = None
            if m is not None:
                n = int(m.n[j])
                ci = stats.jeffreys_interval(m.counts[j, 0, 0] + m.counts[j, 1, 1], n)
                agreement = (audit.Estimate(float(m.accuracy[j]), float(ci.lo), float(ci.hi), math.nan, n) if n
                             else audit.Estimate(math.nan, math.nan, math.nan, math.nan, 0, False, "no overlap"))
            run_health.append(RunHealth(
                row.name, store.harness_label(row.harness), _alone(row, rubric, c.key),
                _kappa(m, j, f"{row.name} and the humans") if m is not None else None, agreement,
                _share(n_u, n_v, "verdicts"), _share(n_c, n_v, "verdicts")))
        pairs = []
        for (x, A), (y, B) in itertools.combinations(list(enumerate(srcs)), 2):
            m = stats.agreement_matrix(B.binary[:, [j]], A.binary[:, [j]], seed=seed)
            r1, r2 = (repeats[0].binary[:, j], repeats[1].binary[:, j]) if repeats else (None, None)
            flips = noise.flips_against_floor(A.binary[:, j], B.binary[:, j], r1, r2)
            shifts = [PairShift(other, est, f, noise.beyond_floor(est, f, shown=est.significant))
                      for other, est, f in moves[(x, y)].get(c.key, [])]
            pairs.append(JudgePair(run_rows[x].name, run_rows[y].name, _kappa(m, 0, "the two runs"), flips, shifts))
        prevalence = unsure = None
        if H is not None:
            col = H[:, j]
            scored = col[~np.isnan(col)]
            prevalence = _share(int((scored == 0).sum()), int(scored.size), "labelled answers")
            n_l, n_u = labels.get(c.key, (0, 0))
            unsure = _share(n_u, n_l, "labels")
        rater_pairs = [(a, b, _kappa(m, j, f"{a} and {b}")) for a, b, m in annot]
        entry = CriterionHealth(c.key, c.kind, prevalence, unsure, rater_pairs,
                                floor.criteria.get(c.key) if floor else None, run_health, pairs)
        flags = [f for f in (ambiguous_flag(entry), sensitive_flag(entry)) if f is not None]
        out[c.key] = dataclasses.replace(entry, flags=flags)
    return HealthReport(ds.name, [r.name for r in run_rows], hum.key if hum else None, hum.judge if hum else None,
                        floor, out, notes)


def render_health_table(report: HealthReport) -> str:
    """One line per criterion with its main numbers, then every flag with its evidence."""
    lines = [f"dataset {report.dataset}; runs {', '.join(report.runs)}; human column: {report.human_judge or 'none'}"]
    if report.floor is not None:
        lines.append(f"noise floor: repeats {', '.join(report.floor.runs[:2])} ({report.floor.harness}, "
                     f"temperature {report.floor.temperature:g}, n = {report.floor.n})")
    w = max([len(k) for k in report.criteria] + [9])
    lines.append(f"{'criterion':<{w}} {'retest κ':>18} {'flips':>6} {'κ vs human (per run)':<40} {'prev':>5} "
                 f"{'unsure':>6} {'unscored':>8} {'cannot':>6}  flags")
    for k, h in report.criteria.items():
        tr = _fmt(h.test_retest.kappa) if h.test_retest else "—"
        fl = f"{h.test_retest.flip_rate.value:.0%}" if h.test_retest and h.test_retest.flip_rate.defined else "—"
        vs = ", ".join(f"{r.kappa.value:.2f}" if r.kappa and r.kappa.defined else "—" for r in h.runs)
        prev = f"{h.prevalence.value:.0%}" if h.prevalence and h.prevalence.defined else "—"
        uns = f"{h.unsure.value:.0%}" if h.unsure and h.unsure.defined else "—"
        unscored = max((r.unscored.value for r in h.runs if r.unscored.defined), default=math.nan)
        us = f"{unscored:.0%}" if math.isfinite(unscored) else "—"
        cannot = max((r.cannot_assess.value for r in h.runs if r.cannot_assess.defined), default=math.nan)
        ca = f"{cannot:.0%}" if math.isfinite(cannot) else "—"
        flags = "; ".join(f.name for f in h.flags) or "—"
        lines.append(f"{k:<{w}} {tr:>18} {fl:>6} {vs:<40} {prev:>5} {uns:>6} {us:>8} {ca:>6}  {flags}")
    undefined = [f"{k} under {r.run}: {r.kappa.reason}" for k, h in report.criteria.items() for r in h.runs
                 if r.kappa is not None and not r.kappa.defined and r.kappa.reason]
    if undefined:  # a "—" in the κ column is explained here
        lines.append("κ vs human undefined (—): " + "; ".join(undefined))
    for k, h in report.criteria.items():
        for f in h.flags:
            lines.append(f"\n{k}: {f.name}")
            lines += [f"  - {e}" for e in f.evidence]
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)


def export_sections(s: Session, runs: Sequence[str]) -> list[tuple[str, list[str], list[list], str | None]]:
    """Criterion health as tables of the exported report (the first run of each harness among ``runs``)."""
    first: dict[str, str] = {}
    for name in runs:
        first.setdefault(store.harness_label(store.get_run(s, name).harness), name)
    try:
        rep = health_report(s, list(first.values())[:4])
    except (ValueError, store.NotFound):
        return []
    rows = []
    for k, h in rep.criteria.items():
        rows.append([
            k,
            _fmt(h.test_retest.kappa) if h.test_retest else "no repeats",
            _fmt(h.test_retest.flip_rate, True) if h.test_retest else "no repeats",
            "; ".join(f"{p.a}/{p.b} {_fmt(p.kappa)}" for p in h.judge_vs_judge) or "one run",
            "; ".join(f"{r.run} {_fmt(r.kappa)}" for r in h.runs if r.kappa is not None) or "no labels",
            _fmt(h.prevalence, True) if h.prevalence else "no labels",
            _fmt(h.unsure, True) if h.unsure else "no labels",
            "; ".join(f"{r.run} {r.unscored.value:.0%}" for r in h.runs if r.unscored.defined),
            "; ".join(f"{r.run} {r.cannot_assess.value:.0%}" for r in h.runs if r.cannot_assess.defined),
            "; ".join(f.name for f in h.flags) or "—",
        ])
    floor = f"noise floor: repeats {', '.join(rep.floor.runs[:2])}" if rep.floor else noise.UNKNOWN_FLOOR
    out = [("Criterion health",
            ["criterion", "test–retest κ", "flips between repeats", "judge vs judge κ", "judge vs human κ",
             "prevalence of fail", "unsure labels", "unscored", "cannot assess", "flags"],
            rows, f"runs: {', '.join(rep.runs)}; human column: {rep.human_judge or 'none'}; {floor}; 95% intervals")]
    flagged = [[k, f.name, " ".join(f.evidence)] for k, h in rep.criteria.items() for f in h.flags]
    if flagged:
        out.append(("Health flags", ["criterion", "flag", "evidence"], flagged, None))
    return out
