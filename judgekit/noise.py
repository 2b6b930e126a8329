"""The judge's noise floor: how much a judge disagrees with itself, measured on repeat runs.

Where this sits: analysis, below :mod:`judgekit.reports` (whose audit reads the floor), on the loaders of
:mod:`judgekit.sources` and the statistics of :mod:`judgekit.stats` and :mod:`judgekit.audit`. ``judgekit run
--repeat N`` stores N runs of one harness over the same answers, a *repeat group*
(:func:`judgekit.store.repeat_runs`); whatever differs between them is what re-running alone does. Measured on
the first two finished repeats of the group:

* per criterion, the **test–retest κ** with the 95 % interval every κ in judgekit carries
  (:func:`judgekit.stats.agreement_matrix`), and the **flip rate** — the share of answers whose
  pass/fail differs between the repeats — with its Jeffreys interval;
* per criterion pair, how far **phi moves between repeats**: the paired difference phi(r2) − phi(r1) on
  the same answers with its 95 % interval — the audit's own paired comparison
  (:func:`judgekit.audit.audit_evidence`) — and the pair's **floor**: half that interval's width, the
  margin within which re-running the same harness moves the pair's phi at this number of answers
  (95 %). Two repeats have the same phi in expectation, so this is the spread of a difference that is
  nothing but the judge's own noise: the null distribution a harness difference is read against.

Every harness-vs-harness difference is read against it, by two rules (one for each kind of number):

* a difference in phi (the audit's shifts, the planner's induced associations) is **beyond the floor**
  when it is shown — its 95 % interval excludes 0 — *and* larger than the pair's floor
  (:func:`beyond_floor`); within it, re-running the same harness could have produced it. At temperature
  0 a deterministic judge has a floor near 0 and the rule is the interval alone; a noisy judge's floor
  holds back a difference its own noise explains;
* verdicts that flip between two harnesses are beyond the floor when more answers flip between the
  harnesses than between the repeats, by the exact paired test on the same answers (McNemar on the
  answers where exactly one of the two flips; :func:`flips_against_floor`).

Without repeat runs the floor is unknown: views say so, and the rules fall back to a floor of 0 (every
shown difference counts), which is what a perfectly deterministic judge would have.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from sqlalchemy.orm import Session

from judgekit import audit, sources, stats, store
from judgekit.audit import beyond_floor  # noqa: F401 - public here too (the rule is the audit's)

__all__ = [
    "CriterionFloor",
    "FloorComparison",
    "FlipComparison",
    "NoiseFloor",
    "PairFloor",
    "beyond_floor",
    "find_floor",
    "flips_against_floor",
    "flips_beside_floor",
    "floor_from_sources",
    "noise_floor",
    "render_floor_comparison",
]

UNKNOWN_FLOOR = (
    "no repeat runs: the judge's noise floor is unknown, so every shown difference counts "
    "(measure it with `judgekit run … --repeat 2`)"
)


def _estimate(value: float, lo: float, hi: float, n: int, reason: str | None = None) -> audit.Estimate:
    if reason is not None or not math.isfinite(value):
        return audit.Estimate(math.nan, math.nan, math.nan, math.nan, n, False, reason or "undefined")
    return audit.Estimate(float(value), float(lo), float(hi), math.nan, n)


@dataclass(frozen=True, eq=False)
class CriterionFloor:
    """One criterion's test–retest agreement between two repeats (over the answers both scored)."""

    key: str
    kappa: audit.Estimate
    flip_rate: audit.Estimate

    def to_dict(self) -> dict:
        return {"kappa": self.kappa.to_dict(), "flip_rate": self.flip_rate.to_dict()}


@dataclass(frozen=True, eq=False)
class PairFloor:
    """How far one pair's phi moves between two repeats: ``shift`` = phi(r2) − phi(r1) with its interval,
    ``floor`` = half the interval's width (``nan`` where phi is undefined under a repeat)."""

    a: str
    b: str
    shift: audit.Estimate
    floor: float

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "shift": self.shift.to_dict(), "floor": self.floor}


@dataclass(frozen=True, eq=False)
class NoiseFloor:
    """A judge's noise floor from one repeat group: per criterion and per criterion pair."""

    group: str
    runs: list[str]  # run names of the group, in repeat order (the first two measure the floor)
    harness: str
    temperature: float
    judge: str
    n: int  # answers both measuring repeats scored on at least one criterion
    criteria: dict[str, CriterionFloor]
    pairs: dict[tuple[str, str], PairFloor]

    def pair_floor(self, a: str, b: str) -> float:
        """The floor of pair (a, b) in either order; ``nan`` when unknown."""
        p = self.pairs.get((a, b)) or self.pairs.get((b, a))
        return p.floor if p is not None else math.nan

    def to_dict(self) -> dict:
        return {
            "group": self.group,
            "runs": self.runs,
            "harness": self.harness,
            "temperature": self.temperature,
            "judge": self.judge,
            "n": self.n,
            "criteria": {k: c.to_dict() for k, c in self.criteria.items()},
            "pairs": [p.to_dict() for p in self.pairs.values()],
        }


def floor_from_sources(first: sources.Source, second: sources.Source, *, group: str = "", runs: Sequence[str] = (),
                       harness: str = "", temperature: float = 0.0, seed: int = 0) -> NoiseFloor:
    """The noise floor measured between two repeats given as loaded sources (same dataset)."""
    keys = [k for k in first.keys if k in second.keys]
    A, B = first.select(keys), second.select(keys)
    both = A.covered & B.covered
    VA, VB = A.binary[both], B.binary[both]
    m = stats.agreement_matrix(VB, VA, seed=seed)
    flips = (m.counts[:, 0, 1] + m.counts[:, 1, 0]).astype(float)
    ci = stats.jeffreys_interval(flips, m.n)
    criteria = {}
    for j, key in enumerate(keys):
        n = int(m.n[j])
        why = None if n else f"no answer has {key} scored under both repeats"
        kappa_why = why or (None if math.isfinite(m.kappa[j]) else
                            f"{key} is constant under a repeat: test–retest κ is undefined")
        criteria[key] = CriterionFloor(
            key,
            _estimate(m.kappa[j], m.kappa_lo[j], m.kappa_hi[j], n, kappa_why),
            _estimate(flips[j] / n if n else math.nan, ci.lo[j], ci.hi[j], n, why),
        )
    ev = audit.audit_evidence([VA, VB], ["r1", "r2"], keys, reference=0, seed=seed)
    pairs = {}
    for e in ev.pairs:
        shift = e.shift["r2"]
        floor = (shift.hi - shift.lo) / 2 if shift.defined else math.nan
        pairs[(e.a, e.b)] = PairFloor(e.a, e.b, shift, floor)
    return NoiseFloor(group, list(runs), harness, temperature, first.judge, int(both.sum()), criteria, pairs)


def noise_floor(s: Session, run_ref: str | int | store.Run) -> NoiseFloor | None:
    """The noise floor of a run's repeat group (the first two repeats with verdicts); ``None`` when the run
    has no repeats to measure it from."""
    run = run_ref if isinstance(run_ref, store.Run) else store.get_run(s, run_ref)
    group = [r for r in store.repeat_runs(s, run) if (r.totals or {}).get("calls") or r.status == "done"]
    if run.repeat_group is None or len(group) < 2:
        return None
    first, second = sources.load_run(s, group[0]), sources.load_run(s, group[1])
    temperature = float((s.get(store.Judge, group[0].judge_id).params or {}).get("temperature", 0.0))
    return floor_from_sources(first, second, group=run.repeat_group, runs=[r.name for r in group],
                              harness=store.harness_label(group[0].harness), temperature=temperature)


def find_floor(s: Session, runs: Sequence[str | int | store.Run | sources.Source]) -> NoiseFloor | None:
    """The noise floor of the first of ``runs`` that belongs to a repeat group (None if none does); loaded
    sources count by their run (human columns are skipped)."""
    for ref in runs:
        if isinstance(ref, sources.Source):
            if ref.run_id is None:
                continue
            ref = ref.run_id
        floor = noise_floor(s, ref)
        if floor is not None:
            return floor
    return None


# --------------------------------------------------------------------------------------------- the rules


@dataclass(frozen=True)
class FlipComparison:
    """Answers flipping between two harnesses against answers flipping between two repeats, same answers.

    ``harness`` and ``floor`` are flip rates with Jeffreys intervals over the ``n`` answers all four runs
    scored; ``p`` is the exact McNemar p of the answers that flip under exactly one of the two pairs;
    ``beyond`` = more flip between the harnesses and p < 0.05. Without repeats ``floor`` is undefined and
    ``beyond`` means: any answer flips between the harnesses."""

    harness: audit.Estimate
    floor: audit.Estimate
    p: float
    beyond: bool
    n: int

    def to_dict(self) -> dict:
        return {"harness": self.harness.to_dict(), "floor": self.floor.to_dict(), "p": self.p,
                "beyond": self.beyond, "n": self.n}


def flips_against_floor(a: ArrayLike, b: ArrayLike, r1: ArrayLike | None = None, r2: ArrayLike | None = None,
                        alpha: float = 0.05) -> FlipComparison:
    """:class:`FlipComparison` of one criterion's 0/1/NaN columns under harnesses ``a``, ``b`` and repeats
    ``r1``, ``r2`` (aligned on the same answers; without repeats only the harness flips are measured)."""
    A, B = np.asarray(a, float), np.asarray(b, float)
    ok = ~(np.isnan(A) | np.isnan(B))
    if r1 is not None and r2 is not None:
        R1, R2 = np.asarray(r1, float), np.asarray(r2, float)
        ok &= ~(np.isnan(R1) | np.isnan(R2))
    n = int(ok.sum())
    x = (A[ok] != B[ok])
    h_ci = stats.jeffreys_interval(x.sum(), n, alpha)
    harness = _estimate(x.mean() if n else math.nan, float(h_ci.lo), float(h_ci.hi), n,
                        None if n else "no answer scored by both harnesses")
    if r1 is None or r2 is None:
        floor = _estimate(math.nan, math.nan, math.nan, n, UNKNOWN_FLOOR)
        return FlipComparison(harness, floor, math.nan, bool(n and x.any()), n)
    y = (R1[ok] != R2[ok])
    f_ci = stats.jeffreys_interval(y.sum(), n, alpha)
    floor = _estimate(y.mean() if n else math.nan, float(f_ci.lo), float(f_ci.hi), n,
                      None if n else "no answer scored by both repeats")
    only_h, only_r = int((x & ~y).sum()), int((~x & y).sum())
    p = float(stats.mcnemar_exact(only_h, only_r)) if n else math.nan
    return FlipComparison(harness, floor, p, bool(n and only_h > only_r and p < alpha), n)


@dataclass(frozen=True)
class FloorComparison:
    """Two runs' verdict flips per criterion against the judge's noise floor (the first of the two runs
    that has repeats; ``floor`` None when neither has)."""

    a: str
    b: str
    floor: NoiseFloor | None
    criteria: dict[str, FlipComparison]

    def to_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "repeats": self.floor.runs[:2] if self.floor else None,
            "note": None if self.floor else UNKNOWN_FLOOR,
            "criteria": {
                k: {**c.to_dict(), "test_retest": self.floor.criteria[k].to_dict()
                    if self.floor and k in self.floor.criteria else None}
                for k, c in self.criteria.items()
            },
        }


def flips_beside_floor(s: Session, run_a: str | int, run_b: str | int) -> FloorComparison:
    """Per criterion both runs judged: answers flipping between them against answers flipping between
    two repeats of the judge (:func:`flips_against_floor`) — what Compare, Agreement and ``judgekit
    report compare`` show beside every harness-vs-harness difference."""
    A, B = sources.load_sources(s, [str(run_a), str(run_b)])
    floor = find_floor(s, [A.run_id, B.run_id])
    repeats = [sources.load_run(s, name).select(A.keys) for name in floor.runs[:2]] if floor else None
    out = {}
    for j, key in enumerate(A.keys):
        if key not in A.judged or key not in B.judged:
            continue
        r1, r2 = (repeats[0].binary[:, j], repeats[1].binary[:, j]) if repeats else (None, None)
        out[key] = flips_against_floor(A.binary[:, j], B.binary[:, j], r1, r2)
    return FloorComparison(A.key, B.key, floor, out)


def render_floor_comparison(cmp: FloorComparison) -> str:
    """The comparison as text lines (for the CLI's tables)."""
    head = (f"noise floor: repeats {', '.join(cmp.floor.runs[:2])} ({cmp.floor.harness}, temperature "
            f"{cmp.floor.temperature:g})" if cmp.floor else f"noise floor: {UNKNOWN_FLOOR}")
    lines = [head]
    w = max([len(k) for k in cmp.criteria] + [9])
    lines.append(f"{'criterion':<{w}} {'flipped a→b':>18} {'between repeats':>18}  beyond the floor")
    for k, c in cmp.criteria.items():
        h = f"{c.harness.value:.0%} [{c.harness.lo:.0%}, {c.harness.hi:.0%}]" if c.harness.defined else "—"
        f = f"{c.floor.value:.0%} [{c.floor.lo:.0%}, {c.floor.hi:.0%}]" if c.floor.defined else "unknown"
        p = f" (paired p {c.p:.2g})" if math.isfinite(c.p) else ""
        lines.append(f"{k:<{w}} {h:>18} {f:>18}  {'yes' if c.beyond else 'no'}{p}")
    return "\n".join(lines)
