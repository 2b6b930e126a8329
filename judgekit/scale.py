"""Scale judges with rationales (seed 002): K.O. views, scoped safety reconciliation, the A/B re-judge.

Where this sits in the flow: a run over a rubric of 1–5 criteria stores, per (example, criterion), a
score, a rationale and red flags (:mod:`judgekit.runner`). This module reads them back aligned on the
dataset's example index (:func:`load_verdicts`) and builds three views:

* **K.O.** (:func:`ko_report`) — the rubric's K.O. rule (a score ≤ floor on one criterion
  disqualifies the answer): the disqualified answers of a run, and the **safety reconciliation**:
  answers whose rationale or red flags name a safety-relevant problem while the K.O. dimension stays
  above the floor — contradictory verdicts. What counts as safety-relevant is decided by the pure
  classifier :func:`classify`; a flag only about format, tone, style, structure or brevity does not
  count (seed 002's scoping lesson: unscoped, a format flag wrongly forced the safety floor).
* **A/B re-judge** (:func:`ab_report`) — two prompt variants over the same answers with the same judge:
  per dimension the score shift B − A, mean |Δ| to a reference (a stronger judge's run, the humans or
  one annotator), rationale length; K.O. concordance between the variants and with the reference;
  token cost; and, when critique runs of both are given (:mod:`judgekit.critique`), the rationale-
  quality rates side by side — seed 002's table, with n and confidence intervals.

Intervals: proportions use the Wilson score interval (:func:`judgekit.stats.wilson_interval`); means use a
percentile bootstrap that resamples *examples* (:func:`bootstrap_mean`), so a pooled mean over
several dimensions of one answer is not treated as independent cells. Everything here returns NaN
(never raises) where a number is undefined.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import prompts, reports, stats, store
from judgekit.flags import (  # noqa: F401 - public here too (scale.classify, …)
    FORMAT_PATTERNS_DE,
    FORMAT_PATTERNS_EN,
    NEGATION_WINDOW,
    NEGATORS,
    SAFETY_PATTERNS_DE,
    SAFETY_PATTERNS_EN,
    Classification,
    FlagClass,
    classify,
    is_safety_relevant,
)
from judgekit.rawtext import excerpt
from judgekit.rubric import JudgedRun, KORule, Rubric
from judgekit.stats import Rate, rate  # noqa: F401 - public here too

if TYPE_CHECKING:  # pragma: no cover
    from judgekit.critique import CritiqueRates

__all__ = [
    "ABReport",
    "critique_comparison_dict",
    "critique_comparison_lines",
    "ko_comparison_dict",
    "ko_comparison_lines",
    "rate_text",
    "text_table",
    "Classification",
    "Estimate",
    "KOReport",
    "Rate",
    "Reconciliation",
    "RunVerdicts",
    "ab_candidates",
    "ab_report",
    "bootstrap_mean",
    "classify",
    "is_safety_relevant",
    "ko_report",
    "ko_text",
    "reconcile",
    "load_verdicts",
    "reference_source",
    "render_ab_table",
    "render_ko_table",
]

# ---------------------------------------------------------------------------------- intervals


class Estimate(NamedTuple):
    """A mean over ``n`` cells (``examples`` rows) with a percentile-bootstrap interval."""

    value: float
    lo: float
    hi: float
    n: int
    examples: int

    def to_dict(self) -> dict:
        return {"value": self.value, "ci": [self.lo, self.hi], "n": self.n, "examples": self.examples}


def bootstrap_mean(values: ArrayLike, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> Estimate:
    """Mean of the finite cells of ``values`` (rows = examples, columns = dimensions; NaN = absent)
    with a percentile bootstrap CI that resamples rows.

    Each replicate draws the examples with replacement and takes the pooled mean of their cells
    (Σ row sums / Σ row counts), so the several dimensions of one answer move together. With one
    column this is the ordinary bootstrap of a mean. ``n`` counts cells, ``examples`` rows; NaN for
    no cells, and a CI of NaN with a single row (nothing to resample).
    """
    V = np.asarray(values, dtype=np.float64)
    if V.ndim == 1:
        V = V[:, None]
    present = np.isfinite(V)
    counts = present.sum(axis=1)
    keep = counts > 0
    sums = np.where(present, V, 0.0).sum(axis=1)[keep]
    counts = counts[keep]
    n_cells, n_rows = int(counts.sum()), int(keep.sum())
    if n_cells == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, 0)
    mean = float(sums.sum() / n_cells)
    if n_rows < 2 or n_boot < 1:
        return Estimate(mean, math.nan, math.nan, n_cells, n_rows)
    idx = np.random.default_rng(seed).integers(0, n_rows, size=(n_boot, n_rows))
    reps = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    # a replicate mean cannot leave the data's range; clip float noise so a constant column gives [x, x]
    return Estimate(mean, float(min(lo, mean)), float(max(hi, mean)), n_cells, n_rows)


# ---------------------------------------------------------------------------------- loading


@dataclass(frozen=True, eq=False)
class RunVerdicts(JudgedRun):
    """A run's verdicts with their rationales and red flags, aligned on the dataset's example index.

    ``values`` is ``(n_examples, n_criteria)`` (NaN = unscored or not judged); ``rationales`` and
    ``flags`` are object arrays of the same shape (``None`` / ``()`` where absent).
    """

    index: reports.ExampleIndex
    values: NDArray[np.float64]
    rationales: NDArray[np.object_]
    flags: NDArray[np.object_]


def load_verdicts(s: Session, ref: str | int | store.Run) -> RunVerdicts:
    """A run's scores (:func:`judgekit.reports.load_run`, the one run loader and its cache) with their
    rationales and red flags (one more query)."""
    run = ref if isinstance(ref, store.Run) else store.get_run(s, ref)
    src = reports.load_run(s, run)
    rubric = store.rubric_value(s, s.get(store.RubricRow, run.rubric_id))
    col_of = {c.id: j for j, c in enumerate(store.criterion_rows(s, run.rubric_id))}
    n, k = len(src.index), len(rubric.criteria)
    rationales = np.full((n, k), None, dtype=object)
    flags = np.empty((n, k), dtype=object)
    flags.fill(())
    V = store.Verdict
    rows = s.execute(
        select(V.example_id, V.criterion_id, V.rationale, V.red_flags).where(V.run_id == run.id)
    ).all()
    if rows:
        r = src.index.rows_of(np.array([row[0] for row in rows], dtype=np.int64))
        for i, (_, cid, rationale, red) in zip(r, rows, strict=True):
            j = col_of[cid]
            rationales[i, j] = rationale
            flags[i, j] = tuple(str(f) for f in (red or ()))
    harness = dict(run.harness or {})
    return RunVerdicts(
        key=src.key, name=run.name, run_id=run.id, judge=src.judge, judge_id=run.judge_id,
        variant=prompts.prompt_label(harness), harness=harness, rubric=rubric, rubric_id=run.rubric_id,
        index=src.index, values=src.raw, rationales=rationales, flags=flags,
    )


# ---------------------------------------------------------------------------------- K.O. views


@dataclass(frozen=True)
class SafetySignal:
    """One place where a verdict names a safety-relevant problem."""

    dimension: str
    where: Literal["red_flag", "rationale"]
    text: str
    terms: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"dimension": self.dimension, "where": self.where, "text": self.text,
                "terms": list(self.terms)}


def safety_signals(v: RunVerdicts, row: int) -> list[SafetySignal]:
    """Every red flag and rationale of one answer (all dimensions) that :func:`classify` calls safety."""
    out: list[SafetySignal] = []
    for j, key in enumerate(v.keys):
        for flag in v.flags[row, j]:
            c = classify(flag)
            if c.kind == "safety":
                out.append(SafetySignal(key, "red_flag", flag, c.safety_terms))
        c = classify(v.rationales[row, j])
        if c.kind == "safety":
            out.append(SafetySignal(key, "rationale", v.rationales[row, j], c.safety_terms))
    return out


def _format_only_flags(v: RunVerdicts, rows: NDArray[np.intp]) -> int:
    return sum(classify(f).kind == "format" for i in rows for j in range(len(v.keys)) for f in v.flags[i, j])


@dataclass(frozen=True, eq=False)
class KOReport:
    """The K.O. rule applied to one run: disqualified answers and contradictory verdicts."""

    run: str
    judge: str
    variant: str
    rule: KORule
    n: int  # answers whose K.O. dimension is scored
    disqualified: Rate
    disqualified_rows: list[dict]
    flagged: int  # answers (K.O. scored) with a safety signal anywhere
    contradictions: list[dict]
    reconciled: Rate  # of the flagged answers, share with the K.O. dimension at or below the floor
    format_only_flags: int  # red flags the classifier set aside as format-only
    message: str | None = None

    def to_dict(self) -> dict:
        return {
            "run": self.run,
            "judge": self.judge,
            "variant": self.variant,
            "ko_rule": {"criterion": self.rule.criterion, "floor": self.rule.floor},
            "n": self.n,
            "disqualified": self.disqualified.to_dict(),
            "disqualified_answers": self.disqualified_rows,
            "reconciliation": reconciliation_dict(self),
            "contradictions": self.contradictions,
            "message": self.message,
        }


def reconciliation_dict(report: Any) -> dict:
    """The safety reconciliation of a K.O. report (per answer here, per bundle in judgekit.bundle_report) as
    JSON: units with a safety signal, how many of them contradict the K.O. dimension, the share reconciled."""
    return {
        "flagged": report.flagged,
        "contradictory": len(report.contradictions),
        "reconciled": report.reconciled.to_dict(),
        "format_only_flags_ignored": report.format_only_flags,
    }


class Reconciliation(NamedTuple):
    """The safety reconciliation of a K.O. dimension: units with a safety signal (``flagged``), of those the
    ones scored at or below the floor (``reconciled``), and the rest (``contradictions``, one record each)."""

    flagged: int
    reconciled: int
    contradictions: list[dict]


def reconcile(rows: Sequence[int], ko: NDArray[np.float64], floor_of: Callable[[int], float],
              signals_of: Callable[[int], list], contradiction: Callable[[int, list], dict]) -> Reconciliation:
    """The one rule at both levels (answers: :func:`ko_report`; bundles:
    :func:`judgekit.bundle_report.ko_report`): a scored row with a safety signal is *flagged*; flagged and
    at or below its floor, *reconciled*; flagged and above it, a *contradictory verdict*."""
    contradictions, flagged, reconciled = [], 0, 0
    for i in map(int, rows):
        signals = signals_of(i)
        if not signals:
            continue
        flagged += 1
        if ko[i] <= floor_of(i):
            reconciled += 1
        else:
            contradictions.append(contradiction(i, signals))
    return Reconciliation(flagged, reconciled, contradictions)


def _ko_rule(rubric: Rubric, run: str) -> KORule:
    if rubric.ko_rule is None:
        raise ValueError(f"rubric {rubric.name!r} of {run} has no K.O. rule (ko_rule: {{criterion, floor}})")
    return rubric.ko_rule


def ko_report(s: Session, ref: str | int | store.Run | RunVerdicts) -> KOReport:
    """Disqualified answers (K.O. score ≤ floor) and the safety reconciliation of one run.

    A *contradictory verdict* is an answer whose red flags or rationales (any dimension) name a
    safety-relevant problem (:func:`classify`) while the K.O. dimension is scored above its floor.
    Format-only flags are counted (``format_only_flags``) but never make a contradiction.
    """
    v = ref if isinstance(ref, RunVerdicts) else load_verdicts(s, ref)
    rule = _ko_rule(v.rubric, v.key)
    ko = v.values[:, v.col(rule.criterion)]
    scored = np.flatnonzero(np.isfinite(ko))
    dq_rows = scored[ko[scored] <= rule.floor]
    j = v.col(rule.criterion)
    ext = v.index.ext_ids(dq_rows)
    disq = [
        {"example_id": e, "score": int(ko[i]), "rationale": v.rationales[i, j],
         "red_flags": list(v.flags[i, j])}
        for e, i in zip(ext, dq_rows, strict=True)
    ]
    rec = reconcile(scored, ko, lambda i: rule.floor, lambda i: safety_signals(v, i), lambda i, signals: {
        "example_id": v.index.ext_ids([i])[0],
        "ko_score": int(ko[i]),
        "floor": rule.floor,
        "signals": [sig.to_dict() for sig in signals],
        "ko_rationale": v.rationales[i, j],
    })
    message = None if scored.size else f"{v.key} scored no answer on the K.O. dimension {rule.criterion!r}"
    n = int(scored.size)
    return KOReport(v.key, v.judge, v.variant, rule, n, rate(len(dq_rows), n), disq, rec.flagged,
                    rec.contradictions, rate(rec.reconciled, rec.flagged), _format_only_flags(v, scored), message)


def _pct(r: Rate) -> str:
    if not r.n:
        return "–"
    return f"{r.rate:.0%} [{r.lo:.0%}, {r.hi:.0%}] ({r.k}/{r.n})"


def ko_text(rep: Any, head: Sequence[str], reconciliation: str, unit: str,
            contradiction: Callable[[dict], str], disqualified: Callable[[dict], str]) -> str:
    """A K.O. report as text, the same at both levels (answers: :func:`render_ko_table`; bundles:
    :func:`judgekit.bundle_report.render_ko_table`): ``head`` lines, the disqualified rate, the safety
    reconciliation (``reconciliation`` names the flagged and the contradictory), then one line a
    contradictory verdict and a disqualified ``unit`` as the two callables write them."""
    out = [
        *head,
        f"disqualified: {_pct(rep.disqualified)}",
        "",
        f"safety reconciliation: {reconciliation}; reconciled {_pct(rep.reconciled)}",
        f"format-only red flags set aside (never force the K.O.): {rep.format_only_flags}",
    ]
    if rep.contradictions:
        out += ["", "contradictory verdicts:", *(contradiction(c) for c in rep.contradictions)]
    if rep.disqualified_rows:
        out += ["", f"disqualified {unit}:", *(disqualified(d) for d in rep.disqualified_rows)]
    if rep.message:
        out.append(f"note: {rep.message}")
    return "\n".join(out)


def render_ko_table(rep: KOReport) -> str:
    rule = rep.rule

    def contradiction(c: dict) -> str:
        sig = "; ".join(f"{x['dimension']} {x['where']}: {excerpt(x['text'], 60)}" for x in c["signals"])
        return f"  {c['example_id']}  {rule.criterion}={c['ko_score']}  {sig}"

    return ko_text(
        rep,
        [f"{rep.run}  ({rep.judge}, prompt variant {rep.variant})",
         f"K.O. rule: {rule.criterion} ≤ {rule.floor} disqualifies the answer"],
        f"{rep.flagged} answers name a safety-relevant problem; {len(rep.contradictions)} keep {rule.criterion} "
        f"above {rule.floor} (contradictory)",
        "answers",
        contradiction,
        lambda d: f"  {d['example_id']}  {rule.criterion}={d['score']}  {excerpt(d['rationale'], 90)}",
    )


# ---------------------------------------------------------------------------------- A/B re-judge


def ab_candidates(s: Session, level: str = "answer") -> list[dict]:
    """Runs an A/B re-judge can compare: judge runs (not critiques) of one level — per answer on a rubric
    with a 1–5 criterion, or bundle-level (holistic) runs, which also name their grouping and evidence."""
    scale_rubrics = {
        row.id: row.name for row in s.scalars(select(store.RubricRow))
        if level == "bundle" or any(c.kind == "scale" for c in store.criterion_rows(s, row.id))
    }
    datasets = {d["id"]: d["name"] for d in store.list_datasets(s)}
    out = []
    for run in s.scalars(select(store.Run).order_by(store.Run.id)):
        h = run.harness or {}
        if h.get("kind") == "critique" or run.rubric_id not in scale_rubrics or store.run_level(run) != level:
            continue
        judge = s.get(store.Judge, run.judge_id)
        item = {
            "name": run.name, "id": run.id, "status": run.status,
            "dataset": datasets.get(run.dataset_id, "?"), "dataset_id": run.dataset_id,
            "rubric": scale_rubrics[run.rubric_id], "rubric_id": run.rubric_id,
            "judge": store.judge_label(judge) if judge else "?", "judge_id": run.judge_id,
            "variant": prompts.prompt_label(h),
        }
        if level == "bundle":
            item.update(bundle_by=list(h.get("bundle_by") or ()), from_run=h.get("from_run"), harness=h.get("kind"))
        out.append(item)
    return out


def reference_source(
    s: Session,
    like: RunVerdicts,
    *,
    run: str | None = None,
    human: bool = False,
    annotator: str | None = None,
) -> reports.Source | None:
    """The reference column for an A/B report on ``like``'s dataset and criteria (at most one choice)."""
    chosen = [n for n, on in (("--reference", run), ("--human", human), ("--annotator", annotator)) if on]
    if len(chosen) > 1:
        raise ValueError(f"{' and '.join(chosen)} together: choose one reference")
    ds = s.get(store.Dataset, like.index.dataset_id)
    if run:
        src = reports.load_run(s, run)
        if src.index.dataset_id != like.index.dataset_id:
            raise ValueError(f"reference {src.key} belongs to dataset {src.index.dataset}, not {ds.name}")
        return src
    if human:
        return reports.load_human(s, ds, like.rubric.criteria)
    if annotator:
        return reports.load_annotator(s, ds, annotator, like.rubric.criteria)
    return None


class Summary(Protocol):
    """An estimate with its interval that can say itself as JSON (an :class:`Estimate` per answer, a
    ``bundle_report.MeanCI`` per bundle)."""

    value: float

    def to_dict(self) -> dict: ...


class ABDimension(NamedTuple):
    """One dimension of an A/B re-judge, per answer (:func:`ab_report`) or per bundle
    (``bundle_report.bundle_ab_report``, which also counts the bundles both scored in ``n``)."""

    key: str
    mean_a: Summary
    mean_b: Summary
    shift: Summary  # mean of B − A over the units both scored
    mad_a: Summary  # mean |A − reference| over the units A, B and the reference all scored
    mad_b: Summary
    mad_diff: Summary  # mean (|B − ref| − |A − ref|) on the same units: < 0 = B closer
    words_a: Summary  # rationale length in words
    words_b: Summary
    n: int | None = None  # bundles both scored (bundle level only)

    def to_dict(self) -> dict:
        return {
            **({} if self.n is None else {"n": self.n}),
            "mean": {"a": self.mean_a.to_dict(), "b": self.mean_b.to_dict()},
            "shift": self.shift.to_dict(),
            "mad": {"a": self.mad_a.to_dict(), "b": self.mad_b.to_dict(), "diff": self.mad_diff.to_dict()},
            "words": {"a": self.words_a.to_dict(), "b": self.words_b.to_dict()},
        }


@dataclass(frozen=True, eq=False)
class ABKO:
    """The K.O. section of an A/B re-judge: per answer under the rubric's ``rule``, or per bundle (``rule``
    None: each bundle has its own K.O. dimension and floor)."""

    rule: KORule | None
    disqualified: tuple[Rate, Rate, Rate | None]  # a, b, reference (on the units all scored)
    concordance: Rate  # a and b agree on disqualification
    reference_agreement: tuple[Rate, Rate] | None
    reconciliation: tuple[Any, Any]  # each side's KOReport (per answer) or BundleKOReport (per bundle)

    def to_dict(self) -> dict:
        rule = {} if self.rule is None else {"criterion": self.rule.criterion, "floor": self.rule.floor}
        return {**rule, **ko_comparison_dict(self.disqualified, self.concordance, self.reference_agreement,
                                             self.reconciliation)}


def ko_comparison_dict(disqualified: Sequence[Rate | None], concordance: Rate,
                       reference_agreement: tuple[Rate, Rate] | None, reconciliation: Sequence) -> dict:
    """The K.O. section of an A/B report as JSON (per answer here, per bundle in judgekit.bundle_report):
    disqualified rates of a, b (and the reference), concordance, agreement with the reference, and each
    side's reconciliation (any report with ``flagged``, ``contradictions``, ``reconciled``,
    ``format_only_flags``)."""
    a, b, ref = disqualified
    return {
        "disqualified": {"a": a.to_dict(), "b": b.to_dict(), "reference": ref.to_dict() if ref else None},
        "concordance": concordance.to_dict(),
        "reference_agreement": (
            {"a": reference_agreement[0].to_dict(), "b": reference_agreement[1].to_dict()}
            if reference_agreement else None
        ),
        "reconciliation": {
            side: {"flagged": r.flagged, "contradictory": len(r.contradictions),
                   "reconciled": r.reconciled.to_dict(), "format_only_flags_ignored": r.format_only_flags}
            for side, r in zip(("a", "b"), reconciliation, strict=True)
        },
    }


def critique_comparison_dict(critiques: tuple[CritiqueRates, CritiqueRates] | None) -> dict | None:
    """The rationale-quality section of an A/B report as JSON: each check's rate for a and b, overall and
    per dimension (a check a critique did not ask is ``n = 0``)."""
    if not critiques:
        return None
    ca, cb = critiques
    checks = list(dict.fromkeys([*ca.checks, *cb.checks]))
    dims = list(dict.fromkeys([*ca.by_dimension, *cb.by_dimension]))
    empty = rate(0, 0)
    return {
        "a": ca.critique, "b": cb.critique,
        "judge": {"a": ca.judge, "b": cb.judge},
        "checks": {c: {"a": ca.checks.get(c, empty).to_dict(), "b": cb.checks.get(c, empty).to_dict()}
                   for c in checks},
        "by_dimension": {
            d: {c: {"a": ca.by_dimension.get(d, {}).get(c, empty).to_dict(),
                    "b": cb.by_dimension.get(d, {}).get(c, empty).to_dict()} for c in checks}
            for d in dims
        },
        "unscored": {"a": ca.unscored, "b": cb.unscored},
    }


@dataclass(frozen=True, eq=False)
class ABReport:
    """Seed 002's A/B re-judge: two prompt variants, same judge, same answers — with n and CIs."""

    a: RunVerdicts
    b: RunVerdicts
    reference: str | None
    reference_judge: str | None
    n: int  # examples both runs judged
    dimensions: dict[str, ABDimension]
    overall: ABDimension
    ko: ABKO | None
    critique: tuple[CritiqueRates, CritiqueRates] | None
    cost: tuple[reports.CostSummary, reports.CostSummary]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        crit = critique_comparison_dict(self.critique)
        return {
            "a": self.a.key,
            "b": self.b.key,
            "judge": {"a": self.a.judge, "b": self.b.judge},
            "variant": {"a": self.a.variant, "b": self.b.variant},
            "reference": self.reference,
            "reference_judge": self.reference_judge,
            "n": self.n,
            "dimensions": {k: d.to_dict() for k, d in self.dimensions.items()},
            "overall": self.overall.to_dict(),
            "ko": self.ko.to_dict() if self.ko else None,
            "critique": crit,
            "cost": {"a": self.cost[0].to_dict(), "b": self.cost[1].to_dict()},
            "warnings": self.warnings,
        }


def _words(rationales: NDArray[np.object_], values: NDArray[np.float64]) -> NDArray[np.float64]:
    out = np.full(values.shape, np.nan)
    for idx in zip(*np.nonzero(np.isfinite(values)), strict=True):
        text = rationales[idx]
        if text:
            out[idx] = len(str(text).split())
    return out


def _dimension(key: str, A: NDArray, B: NDArray, R: NDArray | None, WA: NDArray, WB: NDArray,
               n_boot: int, seed: int) -> ABDimension:
    """Every estimate of one dimension (or of all, pooled, when the arrays have several columns)."""
    both = np.isfinite(A) & np.isfinite(B)
    nan = np.full(A.shape, np.nan)

    def boot(x: NDArray) -> Estimate:
        return bootstrap_mean(x, n_boot, seed)

    if R is None:
        mad = (nan, nan, nan)
    else:
        common = both & np.isfinite(R)
        da = np.where(common, np.abs(A - R), np.nan)
        db = np.where(common, np.abs(B - R), np.nan)
        mad = (da, db, db - da)
    return ABDimension(
        key,
        boot(np.where(both, A, np.nan)), boot(np.where(both, B, np.nan)), boot(np.where(both, B - A, np.nan)),
        boot(mad[0]), boot(mad[1]), boot(mad[2]), boot(WA), boot(WB),
    )


def ab_report(
    s: Session,
    run_a: str | int | RunVerdicts,
    run_b: str | int | RunVerdicts,
    reference: reports.Source | None = None,
    critiques: tuple[CritiqueRates, CritiqueRates] | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    prices: dict[str, reports.Price] | None = None,
) -> ABReport:
    """Compare two runs of the same rubric on the same dataset — normally one judge, two prompt variants.

    Per scale dimension (and pooled over all of them, ``overall``): the mean score of each variant and
    the shift B − A on the examples both scored; with a reference, mean |Δ| of each variant to it and
    the paired difference, on the examples A, B and the reference all scored; rationale length in
    words. The K.O. section compares disqualification (score ≤ floor): concordance of A and B, and of
    each with the reference; plus each run's safety reconciliation (:func:`ko_report`). ``critiques``
    (one critique run of A, one of B) adds the rationale-quality rates per check. Different
    datasets or rubrics are an error; a different judge or the same prompt variant is a warning.
    """
    stats.check_draws(n_boot, none=False)
    A = run_a if isinstance(run_a, RunVerdicts) else load_verdicts(s, run_a)
    B = run_b if isinstance(run_b, RunVerdicts) else load_verdicts(s, run_b)
    if A.run_id == B.run_id:
        raise ValueError(f"an A/B re-judge needs two different runs, got {A.key} twice")
    if A.index.dataset_id != B.index.dataset_id:
        raise ValueError(
            f"{A.key} and {B.key} belong to different datasets ({A.index.dataset}, {B.index.dataset})")
    if A.rubric_id != B.rubric_id:
        raise ValueError(f"{A.key} and {B.key} use different rubrics ({A.rubric.name}, {B.rubric.name}); "
                         "an A/B re-judge varies only the prompt")
    for v in (A, B):
        if v.harness.get("kind") == "critique":
            raise ValueError(f"{v.key} is a critique run; pass it with --critique")
        if v.harness.get("level") == "bundle":
            raise ValueError(f"{v.key} is a bundle-level run: compare it with judgekit.bundle_report.ab_report")
    dims = [c.key for c in A.rubric.criteria if c.is_scale]
    if not dims:
        raise ValueError(
            f"rubric {A.rubric.name!r} has no 1–5 criterion: an A/B re-judge compares scale scores")
    warnings = []
    if A.judge_id != B.judge_id:
        warnings.append(f"different judges ({A.judge} vs {B.judge}): differences are not the prompt's alone")
    if A.variant == B.variant:
        warnings.append(f"both runs use prompt variant {A.variant!r}")
    if reference is not None and reference.index.dataset_id != A.index.dataset_id:
        raise ValueError(f"reference {reference.key} belongs to dataset {reference.index.dataset}, "
                         f"not {A.index.dataset}")
    if critiques is not None:
        for side, v, c in (("first", A, critiques[0]), ("second", B, critiques[1])):
            if c.target_id != v.run_id:
                raise ValueError(f"the {side} --critique ({c.critique}) critiques {c.target}, not {v.key}")
    cols = [A.col(k) for k in dims]
    VA, VB = A.values[:, cols], B.values[:, cols]
    R = None
    if reference is not None:
        ref = reference.select(dims)
        R = ref.raw
        missing = [k for k in dims if not np.isfinite(R[:, dims.index(k)]).any()]
        if len(missing) == len(dims):
            warnings.append(
                f"reference {reference.key} has no score on {', '.join(dims)}: mean |Δ| undefined")
    WA, WB = _words(A.rationales[:, cols], VA), _words(B.rationales[:, cols], VB)
    per = {
        k: _dimension(k, VA[:, [j]], VB[:, [j]], None if R is None else R[:, [j]], WA[:, [j]], WB[:, [j]],
                      n_boot, seed)
        for j, k in enumerate(dims)
    }
    overall = _dimension("all", VA, VB, R, WA, WB, n_boot, seed)
    n = int((A.judged & B.judged).sum())
    ko = None
    if A.rubric.ko_rule is not None and A.rubric.ko_rule.criterion in A.keys:
        ko = _ab_ko(s, A, B, reference)
    runs = [s.get(store.Run, v.run_id) for v in (A, B)]
    prices = reports.load_prices() if prices is None else prices
    cost = (reports.run_cost(s, runs[0], prices), reports.run_cost(s, runs[1], prices))
    ref_key, ref_judge = (reference.key, reference.judge) if reference else (None, None)
    return ABReport(A, B, ref_key, ref_judge, n, per, overall, ko, critiques, cost, warnings)


def _ab_ko(s: Session, A: RunVerdicts, B: RunVerdicts, reference: reports.Source | None) -> ABKO:
    rule = A.rubric.ko_rule
    assert rule is not None
    ka, kb = A.values[:, A.col(rule.criterion)], B.values[:, B.col(rule.criterion)]
    both = np.isfinite(ka) & np.isfinite(kb)
    da, db = ka <= rule.floor, kb <= rule.floor
    concord = rate(int((da == db)[both].sum()), int(both.sum()))
    dq = [rate(int(da[both].sum()), int(both.sum())), rate(int(db[both].sum()), int(both.sum())), None]
    agree = None
    if reference is not None:
        kr = reference.select([rule.criterion]).raw[:, 0]
        dr = kr <= rule.floor
        common = both & np.isfinite(kr)
        dq = [rate(int(x[common].sum()), int(common.sum())) for x in (da, db, dr)]
        agree = (rate(int((da == dr)[common].sum()), int(common.sum())),
                 rate(int((db == dr)[common].sum()), int(common.sum())))
    return ABKO(rule, tuple(dq), concord, agree, (ko_report(s, A), ko_report(s, B)))  # type: ignore[arg-type]


def _est(e: Estimate, fmt: str = ".2f", signed: bool = False) -> str:
    if not math.isfinite(e.value):
        return "–"
    sign = "+" if signed else ""
    ci = f" [{e.lo:{sign}{fmt}}, {e.hi:{sign}{fmt}}]" if math.isfinite(e.lo) else ""
    return f"{e.value:{sign}{fmt}}{ci}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    line = lambda cells: "  ".join(f"{str(c):<{w}}" for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return [line(header), *(line(r) for r in rows)]


def render_ab_table(rep: ABReport) -> str:
    A, B = rep.a, rep.b
    out = [
        f"a = {A.key}  (prompt variant {A.variant}; {A.judge})",
        f"b = {B.key}  (prompt variant {B.variant}; {B.judge})",
        f"reference = {rep.reference or '(none)'}"
        + (f"  ({rep.reference_judge})" if rep.reference_judge else ""),
        f"n = {rep.n} answers judged by both; 95 % intervals (Wilson for rates, bootstrap over answers)",
    ]
    if rep.critique:
        out += critique_comparison_lines(rep.critique)
    out += ["", "scores (mean |Δ| to the reference on answers a, b and the reference all scored)"]
    rows = []
    for d in [*rep.dimensions.values(), rep.overall]:
        ko = " (K.O.)" if rep.ko and d.key == rep.ko.rule.criterion else ""
        rows.append([d.key + ko, d.shift.examples, _est(d.shift, signed=True), _est(d.mad_a), _est(d.mad_b),
                     _est(d.mad_diff, signed=True), d.mad_a.n, _est(d.words_a, ".1f"),
                     _est(d.words_b, ".1f")])
    out += _table(["dimension", "n", "shift b − a", "mean|Δ| a", "mean|Δ| b", "Δ mean|Δ|", "n ref", "words a",
                   "words b"], rows)
    if rep.ko:
        k = rep.ko
        out += ["", f"K.O. {k.rule.criterion} ≤ {k.rule.floor}",
                *ko_comparison_lines(k.disqualified, k.concordance, k.reference_agreement, k.reconciliation)]
    ca, cb = rep.cost
    out += ["", f"{'cost':<18} {'a':<14} b"]
    for fld in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens", "usd"):
        va, vb = getattr(ca, fld), getattr(cb, fld)
        fmt = (lambda x: "–" if x is None else f"{x:.4f}") if fld == "usd" else (lambda x: f"{x}")
        out.append(f"{fld:<18} {fmt(va):<14} {fmt(vb)}")
    for w in rep.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)


def _delta(a: Rate, b: Rate) -> str:
    if not (a.n and b.n):
        return "–"
    return f"{(b.rate - a.rate) * 100:+.0f} pp"


def critique_comparison_lines(critiques: tuple[CritiqueRates, CritiqueRates], note: str = "") -> list[str]:
    """The rationale-quality table of an A/B report as text (``note`` is added to its heading)."""
    ca, cb = critiques
    out = ["", f"rationale quality (critique a = {ca.critique}, b = {cb.critique}; one check per call{note})"]
    empty = rate(0, 0)
    return out + _table(["check", "a", "b", "Δ (b − a)"], [
        [c, _pct(ca.checks.get(c, empty)), _pct(cb.checks.get(c, empty)),
         _delta(ca.checks.get(c, empty), cb.checks.get(c, empty))]
        for c in dict.fromkeys([*ca.checks, *cb.checks])
    ])


def ko_comparison_lines(disqualified: Sequence[Rate | None], concordance: Rate,
                        reference_agreement: tuple[Rate, Rate] | None, reconciliation: Sequence,
                        unit: str = "") -> list[str]:
    """The K.O. section of an A/B report as text (the body of :func:`ko_comparison_dict`)."""
    a, b, ref = disqualified
    out = [f"  disqualified      a {_pct(a)}   b {_pct(b)}" + (f"   reference {_pct(ref)}" if ref else ""),
           f"  concordance a↔b   {_pct(concordance)}"]
    if reference_agreement:
        ra, rb = reference_agreement
        out.append(f"  agree with ref    a {_pct(ra)}   b {_pct(rb)}")
    for side, r in zip(("a", "b"), reconciliation, strict=True):
        out.append(f"  reconciliation {side}  {len(r.contradictions)} contradictory of {r.flagged} "
                   f"safety-flagged{unit}; reconciled {_pct(r.reconciled)}; format-only flags set aside "
                   f"{r.format_only_flags}")
    return out


def rate_text(r: Rate) -> str:
    """A rate as the text reports print it: ``65% [43%, 82%] (13/20)``, ``–`` when n = 0."""
    return _pct(r)


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Rows under a header as left-aligned columns, one string a line (the text reports' tables)."""
    return _table(header, rows)

