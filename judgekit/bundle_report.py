"""Bundle-level views of seed 002's two-level judge: K.O. per bundle, the safety reconciliation, and the
A/B re-judge of two holistic runs — with n and intervals, and honest about small n.

Where this sits: a bundle-level run (:mod:`judgekit.bundles`) stores one verdict per (bundle, dimension)
with a rationale and red flags; :func:`judgekit.bundles.load_bundle_verdicts` reads them back aligned on
the run's bundles. This module builds:

* **K.O. per bundle** (:func:`ko_report`): a bundle is disqualified when its score on *its own* K.O.
  dimension (the rubric's rule for its pack, else the rubric-wide rule) is at or below the floor; and
  the **safety reconciliation**: a bundle whose evidence holds a safety-relevant red flag (a member
  answer's flag, :func:`judgekit.scale.classify`), or whose holistic red flags or rationales name one,
  while the K.O. dimension stays above its floor, is a *contradictory verdict*. Format-only flags
  (format, tone, style, structure, brevity) are counted and set aside — they never force the K.O.
* **A/B re-judge** (:func:`ab_report`): two holistic runs over the same bundles and evidence that differ
  in the prompt variant. Per dimension (and pooled): the score shift B − A, mean |Δ| of each to a
  reference holistic run (e.g. a stronger judge) and its paired difference, rationale length; K.O.
  concordance (A↔B, and each with the reference); the reconciliation of each; the rationale-critique
  rates from one critique run of each; token cost and time.

**n and intervals.** The unit is the bundle. Rates carry Wilson intervals. Means carry a t interval
over bundles (:func:`cluster_mean_interval`: a pooled mean over several dimensions of one bundle is a
ratio of bundle sums, with the bundle as the cluster) — and none below :data:`MIN_BUNDLES` bundles
or when every bundle gave the same value: then the interval is *undefined*, said so, never zero
width. Below :data:`MIN_BUNDLES` bundles the report calls itself *directional, not hard* (the seed's
own measurement was n = 2 bundles). The critique rates count rationales; several come from one
bundle's call, so with a real judge they are not independent — the report says how many bundles
they come from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as sps
from sqlalchemy.orm import Session

from judgekit import bundles, reports, store
from judgekit.rawtext import excerpt
from judgekit.rubric import KORule
from judgekit.scale import (
    ABKO,
    ABDimension,
    Rate,
    classify,
    critique_comparison_dict,
    critique_comparison_lines,
    ko_comparison_lines,
    ko_text,
    rate,
    reconcile,
    reconciliation_dict,
    text_table,
)

if TYPE_CHECKING:  # pragma: no cover
    from judgekit.critique import CritiqueRates

__all__ = [
    "MIN_BUNDLES",
    "BundleABReport",
    "BundleKOReport",
    "MeanCI",
    "ab_report",
    "cluster_mean_interval",
    "ko_report",
    "render_ab_table",
    "render_ko_table",
    "strength",
]

MIN_BUNDLES = 10  # fewer bundles: no interval on a mean, and the A/B is directional, not hard


class MeanCI(NamedTuple):
    """A mean over ``cells`` values from ``n`` bundles with a t interval over bundles; ``note`` says why
    the interval (or the mean) is undefined when it is."""

    value: float
    lo: float
    hi: float
    n: int
    cells: int
    note: str | None = None

    def to_dict(self) -> dict:
        return {"value": self.value, "ci": [self.lo, self.hi], "n": self.n, "cells": self.cells,
                "note": self.note}


def cluster_mean_interval(sums: ArrayLike, counts: ArrayLike, alpha: float = 0.05,
                          min_clusters: int = MIN_BUNDLES) -> MeanCI:
    """Mean of the cells of ``n`` clusters (Σ sums / Σ counts) with a (1 − alpha) t interval.

    ``sums[i]`` and ``counts[i]`` are cluster *i*'s total and number of cells (clusters with no cell
    are left out). The standard error is the ratio estimator's: ``z_i = (s_i − R·c_i) / c̄``,
    ``se² = Σ z_i² / (n (n − 1))``, with ``n − 1`` degrees of freedom; with one cell per cluster this is
    the ordinary t interval of a mean. Undefined (NaN bounds, with a note) below ``min_clusters``
    clusters or when every cluster gave the same mean (zero spread estimates nothing).
    """
    S, C = np.asarray(sums, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    keep = C > 0
    S, C = S[keep], C[keep]
    n, cells = int(S.size), int(C.sum())
    if n == 0:
        return MeanCI(math.nan, math.nan, math.nan, 0, 0, "undefined: no bundle scored")
    mean = float(S.sum() / C.sum())
    if n < min_clusters:
        return MeanCI(mean, math.nan, math.nan, n, cells,
                      f"no interval: {n} bundle{'s' if n != 1 else ''} (an interval needs at least {min_clusters})")
    z = (S - mean * C) / C.mean()
    se = math.sqrt(float((z * z).sum()) / (n * (n - 1)))
    if se == 0.0:
        return MeanCI(mean, math.nan, math.nan, n, cells, "no interval: every bundle gave the same value")
    t = float(sps.t.ppf(1 - alpha / 2, n - 1))
    return MeanCI(mean, mean - t * se, mean + t * se, n, cells)


def _mean(values: NDArray[np.float64]) -> MeanCI:
    """Pooled mean of a bundles × dimensions array (NaN = absent), bundles as clusters."""
    V = values if values.ndim == 2 else values[:, None]
    present = np.isfinite(V)
    return cluster_mean_interval(np.where(present, V, 0.0).sum(axis=1), present.sum(axis=1))


def strength(n: int) -> str:
    """How far an A/B over ``n`` bundles can be read."""
    if n < MIN_BUNDLES:
        return (f"directional, not hard: n = {n} bundle{'s' if n != 1 else ''} — too few for intervals on means; "
                "read a difference as a direction to check on more bundles")
    return f"n = {n} bundles; 95 % intervals (Wilson for rates, t over bundles for means)"


# ------------------------------------------------------------------------------------------ K.O.


@dataclass(frozen=True, eq=False)
class BundleKOReport:
    """Each bundle's K.O. rule applied to one holistic run: disqualified bundles, contradictory verdicts."""

    run: str
    judge: str
    variant: str
    n: int  # bundles whose K.O. dimension is scored
    no_rule: int  # bundles judged without a K.O. rule
    disqualified: Rate
    disqualified_rows: list[dict]
    flagged: int  # bundles (K.O. scored) with a safety signal in the evidence or the holistic verdict
    contradictions: list[dict]
    reconciled: Rate
    format_only_flags: int
    message: str | None = None

    def to_dict(self) -> dict:
        return {
            "run": self.run, "judge": self.judge, "variant": self.variant, "level": "bundle", "n": self.n,
            "bundles_without_ko_rule": self.no_rule,
            "disqualified": self.disqualified.to_dict(),
            "disqualified_bundles": self.disqualified_rows,
            "reconciliation": reconciliation_dict(self),
            "contradictions": self.contradictions,
            "message": self.message,
        }


def _signals(v: bundles.BundleVerdicts, i: int, evidence: Sequence[tuple[str, str]]) -> tuple[list[dict], int]:
    """Safety signals of bundle row ``i`` (evidence flags, holistic flags and rationales) and the number
    of format-only flags set aside."""
    out, fmt = [], 0
    for pid, flag in evidence:
        c = classify(flag)
        if c.kind == "safety":
            out.append({"where": "evidence", "prompt_id": pid, "dimension": None, "text": flag,
                        "terms": list(c.safety_terms)})
        fmt += c.kind == "format"
    for j, key in enumerate(v.keys):
        for flag in v.flags[i, j]:
            c = classify(flag)
            if c.kind == "safety":
                out.append({"where": "red_flag", "prompt_id": None, "dimension": key, "text": flag,
                            "terms": list(c.safety_terms)})
            fmt += c.kind == "format"
        c = classify(v.rationales[i, j])
        if c.kind == "safety":
            out.append({"where": "rationale", "prompt_id": None, "dimension": key, "text": v.rationales[i, j],
                        "terms": list(c.safety_terms)})
    return out, fmt


def ko_report(s: Session, ref: str | int | store.Run | bundles.BundleVerdicts) -> BundleKOReport:
    """Disqualified bundles (own K.O. score ≤ floor) and the safety reconciliation of a holistic run."""
    v = ref if isinstance(ref, bundles.BundleVerdicts) else bundles.load_bundle_verdicts(s, ref)
    run = s.get(store.Run, v.run_id)
    evidence = bundles.member_flags(s, run)
    ko = v.ko_scores()
    scored = np.flatnonzero(np.isfinite(ko))
    rules = {int(i): v.ko_rules[i] for i in scored}  # a bundle's K.O. score is finite only under a rule
    dq = [{"bundle": v.labels[i], "criterion": r.criterion, "floor": r.floor, "score": int(ko[i]),
           "rationale": v.rationales[i, v.col(r.criterion)], "red_flags": list(v.flags[i, v.col(r.criterion)])}
          for i, r in rules.items() if ko[i] <= r.floor]
    found = {i: _signals(v, i, evidence.get(int(v.bundle_ids[i]), ())) for i in rules}
    fmt = sum(n_fmt for _, n_fmt in found.values())
    rec = reconcile(scored, ko, lambda i: rules[i].floor, lambda i: found[i][0], lambda i, signals: {
        "bundle": v.labels[i], "criterion": rules[i].criterion, "ko_score": int(ko[i]), "floor": rules[i].floor,
        "signals": signals, "ko_rationale": v.rationales[i, v.col(rules[i].criterion)]})
    no_rule = sum(r is None for r in v.ko_rules)
    n = int(scored.size)
    message = None
    if not n:
        message = (f"{v.key} scored no bundle on its K.O. dimension" if no_rule < len(v.ko_rules)
                   else f"rubric {v.rubric.name!r} gives these bundles no K.O. rule")
    return BundleKOReport(v.key, v.judge, v.variant, n, no_rule, rate(len(dq), n), dq, rec.flagged,
                          rec.contradictions, rate(rec.reconciled, rec.flagged), fmt, message)


def render_ko_table(rep: BundleKOReport) -> str:
    def contradiction(c: dict) -> str:
        sig = "; ".join(f"{x['where']} {x['prompt_id'] or x['dimension']}: {excerpt(x['text'], 50)}"
                        for x in c["signals"][:3])
        return f"  {c['bundle']}  {c['criterion']}={c['ko_score']} (floor {c['floor']})  {sig}"

    return ko_text(
        rep,
        [f"{rep.run}  (bundle level; {rep.judge}, prompt variant {rep.variant})",
         f"K.O. per bundle (each bundle's own rule); bundles scored on it: {rep.n}"
         + (f"; {rep.no_rule} without a K.O. rule" if rep.no_rule else "")],
        f"{rep.flagged} bundles with a safety-relevant red flag in the evidence or the verdict; "
        f"{len(rep.contradictions)} keep the K.O. dimension above its floor (contradictory)",
        "bundles",
        contradiction,
        lambda d: f"  {d['bundle']}  {d['criterion']}={d['score']} ≤ {d['floor']}  {excerpt(d['rationale'], 90)}",
    )


# ------------------------------------------------------------------------------------------ A/B


@dataclass(frozen=True, eq=False)
class BundleABReport:
    """Seed 002's A/B re-judge at the bundle level: two holistic prompt variants, same judge and evidence."""

    a: bundles.BundleVerdicts
    b: bundles.BundleVerdicts
    reference: str | None
    reference_judge: str | None
    n: int
    strength: str
    dimensions: dict[str, ABDimension]
    overall: ABDimension
    ko: ABKO | None
    critique: tuple[CritiqueRates, CritiqueRates] | None
    cost: tuple[reports.CostSummary, reports.CostSummary]
    bundle_rows: list[dict]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        crit = critique_comparison_dict(self.critique)
        return {
            "level": "bundle",
            "a": self.a.key, "b": self.b.key,
            "judge": {"a": self.a.judge, "b": self.b.judge},
            "variant": {"a": self.a.variant, "b": self.b.variant},
            "bundle_by": list(self.a.bundle_by),
            "from_run": {"a": self.a.from_run, "b": self.b.from_run},
            "reference": self.reference, "reference_judge": self.reference_judge,
            "n": self.n, "strength": self.strength,
            "dimensions": {k: d.to_dict() for k, d in self.dimensions.items()},
            "overall": self.overall.to_dict(),
            "ko": self.ko.to_dict() if self.ko else None,
            "critique": crit,
            "cost": {"a": self.cost[0].to_dict(), "b": self.cost[1].to_dict()},
            "bundles": self.bundle_rows,
            "warnings": self.warnings,
        }


def _aligned(v: bundles.BundleVerdicts, ids: NDArray[np.int64], keys: Sequence[str]) -> tuple[NDArray, NDArray]:
    """Values and rationales of ``v`` on bundles ``ids`` × dimensions ``keys`` (NaN / None where absent)."""
    row = {int(b): i for i, b in enumerate(v.bundle_ids)}
    vals = np.full((len(ids), len(keys)), np.nan)
    rats = np.full((len(ids), len(keys)), None, dtype=object)
    for r, b in enumerate(ids):
        i = row.get(int(b))
        if i is None:
            continue
        for c, k in enumerate(keys):
            if k in v.keys:
                vals[r, c] = v.values[i, v.col(k)]
                rats[r, c] = v.rationales[i, v.col(k)]
    return vals, rats


def _words(rats: NDArray, vals: NDArray) -> NDArray[np.float64]:
    out = np.full(vals.shape, np.nan)
    for idx in zip(*np.nonzero(np.isfinite(vals)), strict=True):
        if rats[idx]:
            out[idx] = len(str(rats[idx]).split())
    return out


def _dimension(key: str, A: NDArray, B: NDArray, R: NDArray | None, WA: NDArray, WB: NDArray) -> ABDimension:
    """Every estimate of one dimension (or of all, pooled, when the arrays have several columns)."""
    both = np.isfinite(A) & np.isfinite(B)
    if R is None:
        none = MeanCI(math.nan, math.nan, math.nan, 0, 0, "no reference run given")
        mad = (none, none, none)
    else:
        common = both & np.isfinite(R)
        da = np.where(common, np.abs(A - R), np.nan)
        db = np.where(common, np.abs(B - R), np.nan)
        mad = (_mean(da), _mean(db), _mean(db - da))
    return ABDimension(key, _mean(np.where(both, A, np.nan)), _mean(np.where(both, B, np.nan)),
                       _mean(np.where(both, B - A, np.nan)), *mad, _mean(np.where(both, WA, np.nan)),
                       _mean(np.where(both, WB, np.nan)), n=int(both.any(axis=1).sum()))


def _ko_flags(v: bundles.BundleVerdicts, ids: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Per bundle in ``ids``: disqualified (1/0, NaN = not scored on its own K.O. dimension)."""
    row = {int(b): i for i, b in enumerate(v.bundle_ids)}
    ko = v.ko_scores()
    out = np.full(len(ids), np.nan)
    for r, b in enumerate(ids):
        i = row.get(int(b))
        if i is not None and np.isfinite(ko[i]):
            rule = v.ko_rules[i]
            assert rule is not None
            out[r] = float(ko[i] <= rule.floor)
    return out, np.isfinite(out)


def ab_report(
    s: Session,
    run_a: str | int | bundles.BundleVerdicts,
    run_b: str | int | bundles.BundleVerdicts,
    reference: str | int | None = None,
    critiques: tuple[CritiqueRates, CritiqueRates] | None = None,
    *,
    prices: dict[str, reports.Price] | None = None,
) -> BundleABReport:
    """Compare two holistic runs of one rubric over the same bundles — normally one judge, two variants.

    Different datasets, groupings or rubrics are an error; a different judge, the same variant or
    different per-answer runs (different evidence) are warnings. ``reference`` is another holistic run
    over the same bundles (e.g. a stronger judge); ``critiques`` one critique run of A and one of B.
    """
    A = run_a if isinstance(run_a, bundles.BundleVerdicts) else bundles.load_bundle_verdicts(s, run_a)
    B = run_b if isinstance(run_b, bundles.BundleVerdicts) else bundles.load_bundle_verdicts(s, run_b)
    for v in (A, B):
        if v.harness.get("kind") == "critique":
            raise ValueError(f"{v.key} is a critique run; pass it with --critique")
    if A.run_id == B.run_id:
        raise ValueError(f"an A/B re-judge needs two different runs, got {A.key} twice")
    if A.dataset_id != B.dataset_id:
        raise ValueError(f"{A.key} and {B.key} belong to different datasets ({A.dataset}, {B.dataset})")
    if A.bundle_by != B.bundle_by:
        raise ValueError(f"{A.key} bundles by {' + '.join(A.bundle_by)}, {B.key} by {' + '.join(B.bundle_by)}: "
                         "an A/B re-judge needs the same bundles")
    if A.rubric_id != B.rubric_id:
        raise ValueError(f"{A.key} and {B.key} use different rubrics ({A.rubric.name}, {B.rubric.name}); "
                         "an A/B re-judge varies only the prompt")
    warnings = []
    if A.judge_id != B.judge_id:
        warnings.append(f"different judges ({A.judge} vs {B.judge}): differences are not the prompt's alone")
    if A.variant == B.variant:
        warnings.append(f"both runs use prompt variant {A.variant!r}")
    if A.from_run_id != B.from_run_id:
        warnings.append(f"different per-answer runs as evidence ({A.from_run} vs {B.from_run}): differences are "
                        "not the prompt's alone")
    if critiques is not None:
        for side, v, c in (("first", A, critiques[0]), ("second", B, critiques[1])):
            if c.target_id != v.run_id:
                raise ValueError(f"the {side} --critique ({c.critique}) critiques {c.target}, not {v.key}")
    R_v = None
    if reference is not None:
        R_v = bundles.load_bundle_verdicts(s, reference)
        if R_v.run_id in (A.run_id, B.run_id):
            raise ValueError(f"the reference {R_v.key} is one of the compared runs")
        if R_v.dataset_id != A.dataset_id or R_v.bundle_by != A.bundle_by:
            raise ValueError(f"reference {R_v.key} judged other bundles ({R_v.dataset} by "
                             f"{' + '.join(R_v.bundle_by)}), not {A.dataset} by {' + '.join(A.bundle_by)}")
    ids = np.array([b for b in A.bundle_ids if b in set(B.bundle_ids.tolist())], dtype=np.int64)
    dims = A.keys
    VA, RA = _aligned(A, ids, dims)
    VB, RB = _aligned(B, ids, dims)
    VR = RR = None
    if R_v is not None:
        VR, RR = _aligned(R_v, ids, dims)
        missing = [k for k in dims if k not in R_v.keys]
        if missing:
            warnings.append(f"reference {R_v.key} has no {', '.join(missing)}: mean |Δ| undefined there")
    WA, WB = _words(RA, VA), _words(RB, VB)
    per = {k: _dimension(k, VA[:, [j]], VB[:, [j]], None if VR is None else VR[:, [j]], WA[:, [j]], WB[:, [j]])
           for j, k in enumerate(dims)}
    overall = _dimension("all", VA, VB, VR, WA, WB)
    judged = np.isfinite(VA).any(axis=1) & np.isfinite(VB).any(axis=1)
    n = int(judged.sum())
    da, ha = _ko_flags(A, ids)
    db, hb = _ko_flags(B, ids)
    ko = None
    if ha.any() or hb.any():
        both = ha & hb
        dq: list[Rate | None] = [rate(int(da[both].sum()), int(both.sum())), rate(int(db[both].sum()), int(both.sum())),
                                 None]
        agree = None
        if R_v is not None:
            dr, hr = _ko_flags(R_v, ids)
            common = both & hr
            dq = [rate(int(x[common].sum()), int(common.sum())) for x in (da, db, dr)]
            agree = (rate(int((da == dr)[common].sum()), int(common.sum())),
                     rate(int((db == dr)[common].sum()), int(common.sum())))
        ko = ABKO(None, tuple(dq), rate(int((da == db)[both].sum()), int(both.sum())), agree,  # type: ignore[arg-type]
                  (ko_report(s, A), ko_report(s, B)))
    prices = reports.load_prices() if prices is None else prices
    cost = (reports.run_cost(s, s.get(store.Run, A.run_id), prices),
            reports.run_cost(s, s.get(store.Run, B.run_id), prices))
    label = dict(zip(A.bundle_ids.tolist(), A.labels, strict=True))
    rule = dict(zip(A.bundle_ids.tolist(), A.ko_rules, strict=True))
    size = dict(zip(A.bundle_ids.tolist(), A.sizes, strict=True))
    rows = []
    for r, b in enumerate(ids.tolist()):
        ko_rule: KORule | None = rule[b]
        item: dict[str, Any] = {"bundle": label[b], "answers": size[b],
                                "ko_rule": f"{ko_rule.criterion} ≤ {ko_rule.floor}" if ko_rule else None}
        for c, k in enumerate(dims):
            ref_value = _num(VR[r, c]) if VR is not None else None
            item[k] = {"a": _num(VA[r, c]), "b": _num(VB[r, c]), "reference": ref_value}
        item["disqualified"] = {"a": _flag(da[r]), "b": _flag(db[r])}
        rows.append(item)
    return BundleABReport(A, B, R_v.key if R_v else None, R_v.judge if R_v else None, n, strength(n), per,
                          overall, ko, critiques, cost, rows, warnings)


def _num(x: float) -> int | None:
    return None if not np.isfinite(x) else int(x)


def _flag(x: float) -> bool | None:
    return None if not np.isfinite(x) else bool(x)


def _est(e: MeanCI, signed: bool = False, fmt: str = ".2f") -> str:
    if not math.isfinite(e.value):
        return "–"
    sign = "+" if signed else ""
    ci = f" [{e.lo:{sign}{fmt}}, {e.hi:{sign}{fmt}}]" if math.isfinite(e.lo) else ""
    return f"{e.value:{sign}{fmt}}{ci}"


def render_ab_table(rep: BundleABReport) -> str:
    A, B = rep.a, rep.b
    out = [
        f"bundle level: {A.dataset} by {' + '.join(A.bundle_by)}; evidence from {A.from_run}",
        f"a = {A.key}  (prompt variant {A.variant}; {A.judge})",
        f"b = {B.key}  (prompt variant {B.variant}; {B.judge})",
        f"reference = {rep.reference or '(none)'}" + (f"  ({rep.reference_judge})" if rep.reference_judge else ""),
        rep.strength,
    ]
    if rep.critique:
        out += critique_comparison_lines(rep.critique, f"; n counts rationales from {rep.n} bundles")
    out += ["", "scores per bundle (mean |Δ| to the reference on bundles a, b and the reference all scored)"]
    rows = []
    for d in [*rep.dimensions.values(), rep.overall]:
        rows.append([d.key, d.n, _est(d.shift, True), _est(d.mad_a), _est(d.mad_b), _est(d.mad_diff, True),
                     d.mad_a.n, _est(d.words_a, fmt=".1f"), _est(d.words_b, fmt=".1f")])
    out += text_table(["dimension", "n", "shift b − a", "mean|Δ| a", "mean|Δ| b", "Δ mean|Δ|", "n ref", "words a",
                   "words b"], rows)
    notes = sorted({e.note for d in rep.dimensions.values() for e in (d.shift, d.mad_a) if e.note})
    out += [f"  ({n})" for n in notes]
    if rep.ko:
        k = rep.ko
        out += ["", "K.O. per bundle (each bundle's own rule)",
                *ko_comparison_lines(k.disqualified, k.concordance, k.reference_agreement, k.reconciliation,
                                     " bundles")]
    ca, cb = rep.cost
    out += ["", f"{'cost and time':<18} {'a':<14} b"]
    for fld in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens", "usd", "wall_s", "latency_p50"):
        va, vb = getattr(ca, fld), getattr(cb, fld)
        fmt = (lambda x: "–" if x is None else f"{x:.4f}") if fld in ("usd", "latency_p50") else (
            (lambda x: f"{x:.1f}") if fld == "wall_s" else (lambda x: f"{x}"))
        out.append(f"{fld:<18} {fmt(va):<14} {fmt(vb)}")
    for w in rep.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)
