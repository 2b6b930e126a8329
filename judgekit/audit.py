"""The association audit: is a criterion pair's association a fact about the answers, or made by a harness?

Where this sits in the flow: :mod:`judgekit.reports` loads every source (harness runs and the human column)
as ``(n_examples, n_criteria)`` 0/1/NaN matrices aligned on the same examples and calls
:func:`audit_evidence`, which measures -- for every criterion pair at once, vectorised -- the evidence
below; :func:`association_verdict` then turns one pair's evidence into a verdict by the numbered rules in
its docstring; :func:`label_plan` turns the undecided pairs into the answers to label next (the
``decide`` label-set strategy of :mod:`judgekit.labeling`). Pure numpy; nothing here knows about runs,
databases or pages.

The evidence for a pair (a, b), every interval 95 % and equal-tailed, from ONE joint posterior:

* **shift of harness H**: phi_H − phi_R on the answers both judged, where R is the *reference* harness --
  the least-conditioned one (the caller picks it: split before grouped before single). Paired: both
  harnesses graded the same stored answers, so answer-to-answer variation cancels and 600 answers
  measure a shift of ±0.07 where two separate samples could not.
* **human phi**: the humans' association, post-stratified on R's cell for the pair (pass/pass,
  pass/fail, fail/pass, fail/fail): each cell's labelled answers stand for all answers R put in that
  cell. This is right whatever cells the labels were drawn from (random, ``cell`` or ``decide`` label
  sets) and narrower than the labelled answers alone when R's cells predict the labels.
* **H − human**: phi_H − phi_human on the labelled answers, post-stratified the same way.

The joint posterior: every answer's *pattern* (its cell for the pair under every harness and the human
column, or "not scored") is counted; each distinct pattern gets one Gamma(count) draw per posterior draw
(a Bayesian bootstrap of answers, so every comparison resamples the same answers jointly), and each
comparison's own table also gets a small Gamma prior per cell (Jeffreys: 0.5 per cell of a 2x2 table,
spread over the cells of a joint table) so that cells not seen yet keep some probability. Sums of Gamma
draws are Gamma draws, so every table below is an exact Dirichlet posterior of its cells.
``bench/audit_calibration.py`` measures the intervals' coverage and the verdicts' error rates on planted
truth through the simulated judge.

Multiple comparisons: each kind of evidence (human phi ≠ 0; shift ≠ 0; H − human ≠ 0) is tested across
all pairs (and harnesses) with the Benjamini-Hochberg procedure at false discovery rate ``q`` (5 %); the
humans' tests are weighted towards the pairs the reference harness shows an association for
(:func:`_filter_weights`), which spends few labels where they can decide something.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from scipy import stats as sps

from judgekit import stats

__all__ = [
    "FDR_Q",
    "UNFLAGGED_WEIGHT",
    "NEGLIGIBLE_PHI",
    "POWER",
    "AuditEvidence",
    "AuditVerdict",
    "Estimate",
    "LabelMore",
    "PlanItem",
    "PairEvidence",
    "Verdict",
    "association_verdict",
    "audit_evidence",
    "beyond_floor",
    "label_plan",
    "pick_answers",
]

FDR_Q = 0.05
"""False discovery rate controlled within each kind of evidence, across pairs and harnesses."""
NEGLIGIBLE_PHI = 0.2
"""|phi| below which an association is too weak to act on: *none* needs the humans' interval inside ±this."""
POWER = 0.8
"""Chance of deciding an undecided pair after the recommended extra labels (the power calculation)."""

Verdict = Literal["real", "induced", "distorted", "none", "undecided", "no human column"]
CELL_NAMES = ("pass/pass", "pass/fail", "fail/pass", "fail/fail")
_MISSING = 4  # pattern digit: the source did not score both criteria of the pair
_PAIR_DIGIT = np.array([0, 1, 4, 2, 3, 4, 4, 4, 4], dtype=np.int32)  # (pass|fail|missing)² -> cell or 4
_HUMAN_PRIOR = 0.25  # prior count per (stratum, human cell); bench/audit_calibration.py compares 0.125-0.5


class Estimate(NamedTuple):
    """A measured quantity: point value, 95 % interval, two-sided posterior p of 0, the number of answers
    it rests on, whether it survived the false-discovery control and its adjusted p (``q``). ``reason``
    says why it is undefined (``value`` is then ``nan``)."""

    value: float
    lo: float
    hi: float
    p: float
    n: int
    significant: bool = False
    reason: str | None = None
    q: float = math.nan  # the p-value adjusted for the false-discovery control (significant: q <= 5 %)

    @property
    def defined(self) -> bool:
        return math.isfinite(self.value)

    def to_dict(self) -> dict:
        return {
            "value": self.value,
            "lo": self.lo,
            "hi": self.hi,
            "p": self.p,
            "n": self.n,
            "significant": self.significant,
            "q": self.q,
            "reason": self.reason,
        }


def _undefined(reason: str, n: int = 0) -> Estimate:
    return Estimate(math.nan, math.nan, math.nan, math.nan, n, False, reason)


@dataclass(frozen=True)
class LabelMore:
    """What would decide an undecided pair: about ``k`` more labelled answers, drawn from the reference
    harness's cells of the pair in the shares ``cells`` (cell name → share; pass/fail = a passes, b
    fails). ``feasible`` is False when the dataset has fewer unlabelled answers than ``k``."""

    k: int
    cells: dict[str, float]
    feasible: bool = True

    def to_dict(self) -> dict:
        return {"k": self.k, "cells": self.cells, "feasible": self.feasible}


@dataclass(frozen=True)
class PairEvidence:
    """Everything the rules of :func:`association_verdict` read for one criterion pair.

    ``harness`` maps each harness to its own phi (over the answers it judged) with interval;
    ``reference`` names the least-conditioned harness (None without harnesses); ``shift`` maps every
    other harness to phi_H − phi_reference on the answers both judged; ``human`` is the post-stratified
    human phi (None without a human column); ``vs_human`` maps each harness to phi_H − phi_human on the
    labelled answers. ``human_sd``/``n_labelled``/``unlabelled``, ``cell_shares`` (the best split of
    labels over the reference's cells) and ``labelled_cells`` (labels there now) feed rule 6.
    """

    a: str
    b: str
    harness: dict[str, Estimate]
    reference: str | None
    shift: dict[str, Estimate]
    human: Estimate | None
    vs_human: dict[str, Estimate]
    human_key: str = "human"
    human_sd: float = math.nan
    n_labelled: int = 0
    unlabelled: int = 0
    cell_shares: dict[str, float] = field(default_factory=dict)
    labelled_cells: dict[str, int] = field(default_factory=dict)


class AuditVerdict(NamedTuple):
    """Outcome of :func:`association_verdict` for one pair.

    ``verdict``: ``real`` | ``induced`` | ``distorted`` | ``none`` | ``undecided`` | ``no human column``;
    ``induced_by`` names the harnesses blamed for an induced association, ``distorted_by`` those that
    change a real association's size or sign; ``note`` gives the evidence in words; ``label_more`` what
    would decide an undecided pair.
    """

    verdict: Verdict
    induced_by: list[str]
    note: str
    distorted_by: list[str] = []
    label_more: LabelMore | None = None


# --------------------------------------------------------------------------------------------- evidence


@dataclass(frozen=True, eq=False)
class AuditEvidence:
    """:func:`audit_evidence` for every pair ``(iu[p], ju[p])``, in pair order."""

    iu: NDArray[np.intp]
    ju: NDArray[np.intp]
    pairs: list[PairEvidence]


@functools.cache
def _pattern_table(S: int) -> NDArray[np.int32]:
    """Pattern code (base 5, one digit per source) of every pair of per-criterion joint states (base 3)."""
    za, zb = np.divmod(np.arange(9**S), 3**S)
    code = np.zeros(9**S, dtype=np.int32)
    for s in range(S):
        code += _PAIR_DIGIT[3 * (za // 3**s % 3) + zb // 3**s % 3] * 5**s
    return code


class _Patterns:
    """Every pair's distinct answer patterns across the sources, with one Gamma(count) draw each.

    ``pat[u, s]`` is source s's cell (0..3 = pass/pass, pass/fail, fail/pass, fail/fail; 4 = not both
    scored) in pattern u of pair ``pair[u]``; ``count[u]`` answers show it; ``g[u]`` holds its draws.
    :meth:`table` adds patterns up into any table of cells, observed and drawn, with one sparse product.
    """

    def __init__(self, sources: Sequence[NDArray[np.float64]], iu: NDArray, ju: NDArray, B: int,
                 rng: np.random.Generator) -> None:
        S, P = len(sources), len(iu)
        base = 5**S
        # Each answer's state on a criterion across all sources (pass 0, fail 1, not scored 2 per source)
        # is one base-3 number; a lookup table turns the two criteria's numbers into the pair's pattern
        # code. One gather per pair instead of a dozen array passes per source: at 100k answers x 45
        # pairs x 4 sources this was most of the audit's cost.
        joint = np.zeros(sources[0].shape, dtype=np.int32)
        for s, V in enumerate(sources):
            joint += np.where(np.isnan(V), 2, (V == 0.0)).astype(np.int32) * 3**s
        code = _pattern_table(S)[joint[:, iu] * 3**S + joint[:, ju]]
        code += (np.arange(P) * base).astype(code.dtype)
        counts = np.bincount(code.ravel(), minlength=P * base)
        nz = np.flatnonzero(counts)
        self.P, self.B = P, B
        self.pair = nz // base
        self.pat = (nz % base)[:, None] // (5 ** np.arange(S)) % 5
        self.count = counts[nz].astype(np.float64)
        self.g = stats.gamma_masses(self.count, B, rng)

    def observed(self, cell: NDArray[np.int64], ncell: int) -> NDArray[np.float64]:
        """Observed ``(P, ncell)`` counts of the table whose cell for pattern u is ``cell[u]`` (-1: left out)."""
        keep = cell >= 0
        return np.bincount(self.pair[keep] * ncell + cell[keep], weights=self.count[keep],
                           minlength=self.P * ncell).reshape(self.P, ncell)

    def table(self, cell: NDArray[np.int64], ncell: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Observed ``(P, ncell)`` counts and drawn ``(P, ncell, B)`` masses of that table."""
        keep = cell >= 0
        rows = self.pair[keep] * ncell + cell[keep]
        A = sparse.csr_matrix((np.ones(int(keep.sum())), (rows, np.flatnonzero(keep))),
                              shape=(self.P * ncell, len(cell)))
        drawn = np.asarray(A @ self.g).reshape(self.P, ncell, self.B)
        return self.observed(cell, ncell), drawn


def _estimates(point: NDArray, draws: NDArray, n: NDArray, reasons: Sequence[str | None],
               alpha: float) -> list[Estimate]:
    ci = stats.equal_tailed(draws, alpha).holding(point)
    p = stats.posterior_p(draws)
    return [
        _undefined(reasons[i], int(n[i])) if reasons[i] is not None
        else Estimate(float(point[i]), float(ci.lo[i]), float(ci.hi[i]), float(p[i]), int(n[i]))
        for i in range(len(point))
    ]


def _table_reason(cells: NDArray, a: str, b: str, name: str | None = None, reference: str = "") -> str | None:
    """Why a 2x2 table's phi is undefined, in words (None if defined): the verdicts of run ``name``, or
    (``name`` None) the labels on the answers the ``reference`` run scored."""
    n = int(cells.sum())
    if n == 0:
        if name:
            return f"no answer has {a} and {b} both scored by {name}: phi undefined"
        scored = f" and both scored by the reference {reference}" if reference else ""
        return f"no labelled answer has {a} and {b} both labelled{scored}: phi undefined"
    for key, passes, fails in ((a, cells[0] + cells[1], cells[2] + cells[3]),
                               (b, cells[0] + cells[2], cells[1] + cells[3])):
        if passes == 0 or fails == 0:
            outcome = "fail" if passes == 0 else "pass"
            whose = f"verdict of {key} under {name}" if name else f"label of {key}"
            return f"every {whose} is {outcome} ({n} of {n}): phi undefined"
    return None


def _cells_last(x: NDArray) -> NDArray:
    """(P, 4, B) → (P, B, 4): cells on the last axis, as :func:`stats.phi_of_cells` wants them."""
    return np.moveaxis(x, 1, -1)


def _neyman_shares(table: NDArray, cond: NDArray, Ns: NDArray) -> NDArray:
    """The best split of labels over the reference's four cells for estimating the humans' phi (Neyman
    allocation): cell s gets a share ∝ its size N_s × the spread, within it, of phi's influence function
    IF(h) = z_a z_b − phi (z_a² + z_b²) / 2 (z: a criterion's standardised fail indicator) over the human
    cells h. Failures carry most of phi's information, so the fail cells get far more than their size.
    ``table``: (P, 4) human cell shares; ``cond``: (P, s, 4) P(human cell | reference cell)."""
    fa = table[:, 2] + table[:, 3]
    fb = table[:, 1] + table[:, 3]
    sa = np.sqrt(np.clip(fa * (1 - fa), 1e-9, None))
    sb = np.sqrt(np.clip(fb * (1 - fb), 1e-9, None))
    phi = np.nan_to_num(stats.phi_of_cells(table))
    xa = np.array([0.0, 0.0, 1.0, 1.0])  # a fails in human cells fail/pass, fail/fail
    xb = np.array([0.0, 1.0, 0.0, 1.0])
    za = (xa[None, :] - fa[:, None]) / sa[:, None]
    zb = (xb[None, :] - fb[:, None]) / sb[:, None]
    inf = za * zb - phi[:, None] * (za**2 + zb**2) / 2  # (P, 4)
    mean = np.einsum("psh,ph->ps", cond, inf)
    sd = np.sqrt(np.clip(np.einsum("psh,ph->ps", cond, inf**2) - mean**2, 0.0, None))
    raw = Ns * sd
    total = raw.sum(axis=1, keepdims=True)
    return np.where(total > 0, raw / np.where(total > 0, total, 1.0), 0.25)


UNFLAGGED_WEIGHT = 0.25
"""Weight, in the humans' false-discovery control, of a pair the reference harness shows no association for."""


def _shows_association(e: Estimate) -> bool:
    """The reference harness's own 95 % interval excludes 0 (on every answer it judged)."""
    return e.defined and (e.lo > 0 or e.hi < 0)


def _filter_weights(flagged: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Weights for the weighted Benjamini-Hochberg procedure (Genovese, Roeder & Wasserman 2006) on the
    humans' tests: pairs the reference harness shows an association for get more, the rest
    ``UNFLAGGED_WEIGHT``, averaging 1. The weights come from the harness, not from the labels, so under
    "no association in the humans" they are (nearly) independent of the humans' p-values and the false
    discovery rate stays controlled; they spend the humans' few labels where a harness points. All equal
    (plain BH) when every pair or none is flagged."""
    m, m_hi = flagged.size, int(flagged.sum())
    if m_hi in (0, m):
        return np.ones(m)
    hi = (m - UNFLAGGED_WEIGHT * (m - m_hi)) / m_hi
    return np.where(flagged, hi, UNFLAGGED_WEIGHT)


def audit_evidence(
    harnesses: Sequence[ArrayLike],
    names: Sequence[str],
    criteria: Sequence[str],
    *,
    reference: int | None = 0,
    human: ArrayLike | None = None,
    human_key: str = "human",
    harness_ci: Sequence[stats.PhiCI] | None = None,
    n_draws: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    q: float = FDR_Q,
    human_prior: float = _HUMAN_PRIOR,
) -> AuditEvidence:
    """The audit's evidence for every criterion pair (see the module docstring).

    ``harnesses``: aligned ``(n, k)`` 0/1/NaN matrices named ``names``; ``reference``: index of the
    least-conditioned harness (ignored without harnesses); ``human``: the human column on the same rows
    (None: no human column). ``harness_ci`` reuses intervals already computed for the phi columns
    (:func:`stats.phi_ci`), so the audit and the columns print the same numbers.

    H − human is measured as (H − reference on every answer both judged) + (reference − human,
    post-stratified on the labelled answers), from the same joint draws: the same target as H − human
    on the labelled answers, with the harness part measured on all answers.
    """
    Hs = [np.asarray(h, dtype=np.float64) for h in harnesses]
    Y = None if human is None else np.asarray(human, dtype=np.float64)
    k = len(criteria)
    iu, ju = np.triu_indices(k, 1)
    P = len(iu)
    sources = Hs + ([Y] if Y is not None else [])
    if P == 0 or not sources or sources[0].shape[0] == 0:
        return AuditEvidence(iu, ju, [])
    rng = np.random.default_rng(seed)
    B = max(int(n_draws), stats.MIN_DRAWS)  # verdicts never rest on a handful of draws, whatever the caller asks
    pats = _Patterns(sources, iu, ju, B, rng)
    pat = pats.pat
    R = (reference if reference is not None else 0) if Hs else None
    hy = len(Hs) if Y is not None else None
    a_keys = [criteria[i] for i in iu]
    b_keys = [criteria[j] for j in ju]

    def prior(shape: tuple[int, ...], count: float) -> NDArray[np.float64]:
        return stats.gamma_masses(np.full(shape, count), B, rng)

    # --- each harness's own phi (the interval of its phi column)
    harness_est: list[dict[str, Estimate]] = [{} for _ in range(P)]
    for h, name in enumerate(names):
        obs = pats.observed(np.where(pat[:, h] < 4, pat[:, h], -1), 4)
        point = stats.phi_of_cells(obs)
        if harness_ci is not None:
            lo, hi = harness_ci[h].lo[iu, ju], harness_ci[h].hi[iu, ju]
        else:
            ci = stats.equal_tailed(stats.phi_of_cells(stats.dirichlet_shares(obs, B, rng)), alpha).holding(point)
            lo, hi = ci.lo, ci.hi
        for p in range(P):
            reason = _table_reason(obs[p], a_keys[p], b_keys[p], name)
            harness_est[p][name] = (_undefined(reason, int(obs[p].sum())) if reason else
                                    Estimate(float(point[p]), float(lo[p]), float(hi[p]), math.nan,
                                             int(obs[p].sum())))

    # --- shifts: phi_H - phi_R on the answers both judged (a 16-cell joint table per pair)
    shift_est: list[dict[str, Estimate]] = [{} for _ in range(P)]
    shift_draws: dict[str, NDArray] = {}
    shift_point: dict[str, NDArray] = {}
    for h, name in enumerate(names):
        if R is None or h == R:
            continue
        both = (pat[:, h] < 4) & (pat[:, R] < 4)
        obs, drawn = pats.table(np.where(both, 4 * pat[:, h] + pat[:, R], -1), 16)
        drawn = (drawn + prior((P, 16), stats.JEFFREYS / 4)).reshape(P, 4, 4, B)
        oh, orr = obs.reshape(P, 4, 4).sum(axis=2), obs.reshape(P, 4, 4).sum(axis=1)
        shift_draws[name] = (stats.phi_of_cells(_cells_last(drawn.sum(axis=2)))
                             - stats.phi_of_cells(_cells_last(drawn.sum(axis=1))))
        shift_point[name] = stats.phi_of_cells(oh) - stats.phi_of_cells(orr)
        reasons = [_table_reason(oh[p], a_keys[p], b_keys[p], name)
                   or _table_reason(orr[p], a_keys[p], b_keys[p], names[R]) for p in range(P)]
        for p, e in enumerate(_estimates(shift_point[name], shift_draws[name], obs.sum(axis=1), reasons, alpha)):
            shift_est[p][name] = e

    # --- the humans, post-stratified on R's cell (one stratum without harnesses)
    human_est: list[Estimate | None] = [None] * P
    vs_est: list[dict[str, Estimate]] = [{} for _ in range(P)]
    human_sd = np.full(P, np.nan)
    have = np.zeros((P, 4))
    n_lab = np.zeros(P, dtype=np.int64)
    unlabelled = np.zeros(P, dtype=np.int64)
    shares = np.full((P, 4), np.nan)
    if hy is not None:
        if R is not None:
            stratum, nstrata = pat[:, R], 4
        else:
            stratum, nstrata = np.where(pat[:, hy] < 4, 0, _MISSING), 1
        labelled = (stratum < 4) & (pat[:, hy] < 4)
        Ns, W = pats.table(np.where(stratum < 4, stratum, -1), nstrata)  # (P, s), (P, s, B)
        M, L = pats.table(np.where(labelled, 4 * stratum + pat[:, hy], -1), 4 * nstrata)
        M = M.reshape(P, nstrata, 4)
        L = L.reshape(P, nstrata, 4, B) + prior((P, nstrata, 4), human_prior)
        wshare = W / np.maximum(W.sum(axis=1, keepdims=True), 1e-300)
        qh = np.einsum("psb,pshb->phb", wshare, L / L.sum(axis=2, keepdims=True))
        hdraws = stats.phi_of_cells(_cells_last(qh))
        cond_mean = (M + human_prior) / (M.sum(axis=2, keepdims=True) + 4 * human_prior)
        weights = Ns / np.maximum(Ns.sum(axis=1, keepdims=True), 1.0)
        # point estimate: each stratum's labelled shares (its prior mean where nobody labelled it)
        m_s = M.sum(axis=2, keepdims=True)
        cond_obs = np.where(m_s > 0, M / np.maximum(m_s, 1.0), cond_mean)
        hpoint = stats.phi_of_cells(np.einsum("ps,psh->ph", weights, cond_obs))
        plain = M.sum(axis=1)  # the labelled answers' own table
        n_lab = plain.sum(axis=1).astype(np.int64)
        unlabelled = (Ns.sum(axis=1) - n_lab).astype(np.int64)
        ref_name = names[R] if R is not None else ""
        reasons = [_table_reason(plain[p], a_keys[p], b_keys[p], reference=ref_name) for p in range(P)]
        human_est = list(_estimates(hpoint, hdraws, n_lab, reasons, alpha))
        human_sd = np.where([r is None for r in reasons], hdraws.std(axis=-1), np.nan)
        if nstrata == 4:
            shares = _neyman_shares(np.einsum("ps,psh->ph", weights, cond_mean), cond_mean, Ns)
            have = M.sum(axis=2)
            ref_draws = stats.phi_of_cells(_cells_last(W)) - hdraws
            ref_point = stats.phi_of_cells(Ns) - hpoint
            for h, name in enumerate(names):
                if h == R:
                    draws, point = ref_draws, ref_point
                else:
                    draws, point = shift_draws[name] + ref_draws, shift_point[name] + ref_point
                why = [reasons[p] or harness_est[p][name].reason or harness_est[p][names[R]].reason
                       for p in range(P)]
                for p, e in enumerate(_estimates(point, draws, n_lab, why, alpha)):
                    vs_est[p][name] = e

    # --- false discovery control, per kind of evidence, across pairs (and harnesses)
    def control(entries: list[tuple[int, str]], table: list[dict[str, Estimate]],
                weights: NDArray[np.float64] | None = None) -> None:
        ps = np.array([table[p][key].p for p, key in entries], dtype=np.float64)
        adjusted = stats.fdr_bh(ps if weights is None else np.minimum(ps / weights, 1.0))
        for (p, key), adj in zip(entries, adjusted, strict=True):
            table[p][key] = table[p][key]._replace(significant=bool(np.isfinite(adj) and adj <= q), q=float(adj))

    if hy is not None:
        holder = [{"h": e} for e in human_est if e is not None]
        flagged = np.array([R is not None and _shows_association(harness_est[p][names[R]]) for p in range(P)])
        control([(p, "h") for p in range(len(holder))], holder, _filter_weights(flagged))
        human_est = [d["h"] for d in holder]
        control([(p, nm) for p in range(P) for nm in vs_est[p]], vs_est)
    control([(p, nm) for p in range(P) for nm in shift_est[p]], shift_est)

    pairs = [
        PairEvidence(
            a=a_keys[p],
            b=b_keys[p],
            harness=harness_est[p],
            reference=names[R] if R is not None else None,
            shift=shift_est[p],
            human=human_est[p],
            vs_human=vs_est[p],
            human_key=human_key,
            human_sd=float(human_sd[p]),
            n_labelled=int(n_lab[p]),
            unlabelled=int(unlabelled[p]),
            cell_shares=({c: float(x) for c, x in zip(CELL_NAMES, shares[p], strict=True)}
                         if np.isfinite(shares[p]).all() else {}),
            labelled_cells={c: int(x) for c, x in zip(CELL_NAMES, have[p], strict=True)},
        )
        for p in range(P)
    ]
    return AuditEvidence(iu, ju, pairs)


# --------------------------------------------------------------------------------------------- rules


def _f(x: float, fmt: str = "+.2f") -> str:
    return "undefined" if not math.isfinite(x) else format(x, fmt)


def _ci(e: Estimate) -> str:
    return f"{_f(e.value)} [{_f(e.lo)}, {_f(e.hi)}]"


def _round_up(k: float) -> int:
    return int(10 * math.ceil(max(k, 1.0) / 10))


def _label_more(e: PairEvidence) -> LabelMore | None:
    """Power calculation for an undecided pair: how many more labels, at the current design, would give
    an 80 % chance that the human interval either excludes 0 (the association is real) or fits inside
    ±NEGLIGIBLE_PHI (there is none)? The interval narrows as sqrt(n / (n + k))."""
    h = e.human
    if h is None or not h.defined or not math.isfinite(e.human_sd) or e.n_labelled == 0:
        return None
    z = sps.norm.ppf(0.975) + sps.norm.ppf(POWER)
    m = abs(h.value)
    target = m if m >= NEGLIGIBLE_PHI / 2 else NEGLIGIBLE_PHI - m  # the nearer of the two decisions
    need = e.n_labelled * ((e.human_sd * z / max(target, 1e-3)) ** 2) - e.n_labelled
    k = _round_up(need)
    # the k new labels go where the labelled answers fall short of the best split of n + k
    deficit = {c: max(0.0, (e.n_labelled + k) * s - e.labelled_cells.get(c, 0)) for c, s in e.cell_shares.items()}
    total = sum(deficit.values())
    cells = {c: d / total for c, d in deficit.items()} if total > 0 else dict(e.cell_shares)
    return LabelMore(k, cells, feasible=k <= e.unlabelled)


def _cells_text(lm: LabelMore) -> str:
    if not lm.cells:
        return "at random"
    top = sorted(lm.cells.items(), key=lambda kv: -kv[1])
    return "from the reference harness's cells " + ", ".join(f"{c} {s:.0%}" for c, s in top if s >= 0.005)


def beyond_floor(shift: Estimate, floor: float, *, shown: bool | None = None) -> bool:
    """Whether a difference in phi between two harnesses is beyond the judge's noise floor
    (:mod:`judgekit.noise`): defined, shown (``shown``, default: its 95 % interval excludes 0 — pass the
    false-discovery-controlled flag where one applies) and larger in size than ``floor``, the margin within
    which re-running one harness moves the pair's phi (a ``nan`` floor — unknown — counts as 0)."""
    if not shift.defined:
        return False
    is_shown = (shift.lo > 0 or shift.hi < 0) if shown is None else shown
    return bool(is_shown and abs(shift.value) > (floor if math.isfinite(floor) else 0.0))


def _shifted_away(shift: Estimate | None, vs_human: Estimate, ref_vs_human: Estimate | None, floor: float) -> bool:
    """A harness's significant shift from the reference, beyond the noise floor, took it further from the
    humans than the reference is, in the direction it differs from them: the call structure moved it away
    from what they see."""
    return (shift is not None and beyond_floor(shift, floor, shown=shift.significant)
            and (shift.value > 0) == (vs_human.value > 0)
            and (ref_vs_human is None or not ref_vs_human.defined or abs(vs_human.value) > abs(ref_vs_human.value)))


def association_verdict(e: PairEvidence, floor: float = math.nan) -> AuditVerdict:
    """Is pair (a, b)'s association a fact about the answers or an artefact of a harness?

    ``floor``: the pair's noise floor (:mod:`judgekit.noise`, from repeat runs; ``nan`` = unknown, counted
    as 0): a harness is never blamed for a shift from the reference that re-running one harness could
    produce — in rules 3b and 4 a shift counts only when it is also larger than the floor
    (:func:`beyond_floor`), and the note says which significant shifts stayed within it.

    Rules, applied in order ("significant" = after the Benjamini-Hochberg control of its kind of evidence):

    1. **no human column** -- there is no human source. (Harness shifts are still in the evidence.)
    2. **undecided** -- the humans' phi is undefined for this pair (no labelled answer has both, or one
       criterion is constant among the labels); the note says which and what to label.
    3. If the humans' phi is significantly different from 0 (direction s), the association is *real*;
       a harness *distorts* it when
       a. its own phi is significantly of the opposite sign (its 95 % interval excludes 0 on the other
          side) -- a sign reversal; or
       b. its difference from the humans (H − human) is significant, or its shift from the reference
          on the same answers is significant and took it further from the humans than the reference is
          (the shift points the way H differs from them) -- it changes the size (or moves it towards, or
          across, 0).
       Verdict **distorted** (``distorted_by`` = those harnesses, in order) if any, else **real**.
    4. Otherwise (the humans do not show an association): a non-reference harness H *induces* one when
       its shift phi_H − phi_reference on the same answers is significant, unless the humans back H's
       side -- the reference's difference from the humans is significant and points the other way
       (the humans sit on H's side of the reference). Verdict **induced** (``induced_by`` = those
       harnesses, in order) if any.
    5. **none** -- the humans' 95 % interval lies inside ±``NEGLIGIBLE_PHI`` (0.2): whatever association
       there is, it is too weak to act on.
    6. **undecided** -- otherwise, with ``label_more``: about k more labels would give an 80 % chance that
       the interval excludes 0 or fits inside ±0.2 (whichever is nearer), assuming it narrows as
       1/sqrt(labels); they should come from the reference harness's cells where the labelled answers fall
       short of the Neyman split (each cell by its size times the spread of phi's influence function in
       it -- mostly the cells where a criterion fails).
    """
    if e.human is None:
        return AuditVerdict("no human column", [], "no human column: label answers (Label page or "
                            "`judgekit import-labels`) to tell a real association from an induced one")
    h = e.human
    if not h.defined:
        cells = "answers the reference harness fails on either criterion" if e.reference else "more answers"
        return AuditVerdict("undecided", [], f"undecided: {h.reason}; label {cells} to define it", [], None)
    human = f"the humans' phi {_ci(h)} over {h.n} labelled answers"
    shifts = {k: s for k, s in e.shift.items() if s.defined}
    if h.significant:
        sign = 1.0 if h.value > 0 else -1.0
        seen = f"the humans see it: phi {_ci(h)} over {h.n} labelled answers (false-discovery-adjusted p {_p(h.q)})"
        blamed, how = [], []
        for name, est in e.harness.items():
            vs = e.vs_human.get(name)
            if est.defined and (est.hi < 0 if sign > 0 else est.lo > 0):
                blamed.append(name)
                how.append(f"{name} reverses its sign ({_ci(est)})")
            elif vs is not None and vs.defined and (
                vs.significant or _shifted_away(e.shift.get(name), vs, e.vs_human.get(e.reference or ""), floor)
            ):
                blamed.append(name)
                word = "larger" if (vs.value > 0) == (sign > 0) else "smaller"
                why = (f"{name} − humans {_ci(vs)}" if vs.significant else
                       f"{name} − {e.reference} {_ci(e.shift[name])} on the same answers, away from the humans")
                how.append(f"{name} measures it {word} ({why})")
        if blamed:
            return AuditVerdict("distorted", [], f"real, distorted: {seen}; " + "; ".join(how), blamed)
        extra = "".join(f"; {n} − {e.reference} {_ci(s)} on the same answers" for n, s in shifts.items()
                        if s.significant)
        return AuditVerdict("real", [], f"real: {seen}; every harness agrees with them{extra}{_within(e, floor)}")
    ref_vs = e.vs_human.get(e.reference) if e.reference else None
    induced, how = [], []
    for name, s in shifts.items():
        if not beyond_floor(s, floor, shown=s.significant):
            continue
        backed = (ref_vs is not None and ref_vs.defined and ref_vs.significant
                  and (ref_vs.value > 0) != (s.value > 0))
        if backed:
            continue
        induced.append(name)
        how.append(f"on the {s.n} answers both judged {name} measures phi {_f(s.value)} [{_f(s.lo)}, {_f(s.hi)}] "
                   f"{'more' if s.value > 0 else 'less'} than {e.reference}")
    if induced:
        return AuditVerdict("induced", induced, "induced: " + "; ".join(how) + f"; {human} does not show it")
    quiet = _within(e, floor)
    if h.lo > -NEGLIGIBLE_PHI and h.hi < NEGLIGIBLE_PHI:
        beyond = " beyond the judge's noise floor" if math.isfinite(floor) else ""
        return AuditVerdict("none", [], f"none: {human} lies within ±{NEGLIGIBLE_PHI:.1f}, and no harness shifts it"
                                        f"{beyond}{quiet}")
    lm = _label_more(e)
    backed = [n for n, s in shifts.items() if beyond_floor(s, floor, shown=s.significant)]
    why = f"; {', '.join(backed)} shift it, but the humans lean their way" if backed else ""
    why += quiet
    if lm is None:
        return AuditVerdict("undecided", [], f"undecided: {human} cannot tell an association from none{why}")
    want = f"label about {lm.k} more answers {_cells_text(lm)} to decide"
    if not lm.feasible:
        want += f" (only {e.unlabelled} answers are unlabelled: this dataset cannot decide it)"
    return AuditVerdict("undecided", [], f"undecided: {human} cannot tell an association from none{why}; {want}",
                        [], lm)


def _within(e: PairEvidence, floor: float) -> str:
    """The note's clause for significant shifts that stayed within the noise floor (not blamed)."""
    if not math.isfinite(floor):
        return ""
    held = [f"{n} − {e.reference} {_ci(s)}" for n, s in e.shift.items()
            if s.defined and s.significant and not beyond_floor(s, floor, shown=True)]
    if not held:
        return ""
    return (f"; within the judge's noise floor ±{floor:.2f} (re-running one harness moves this pair as much), "
            f"not blamed: {', '.join(held)}")


def _p(x: float) -> str:
    return "undefined" if not math.isfinite(x) else ("< 0.001" if x < 0.001 else f"{x:.3f}")


# --------------------------------------------------------------------------------------------- decide


class PlanItem(NamedTuple):
    """What one undecided pair asks of the next labels: ``counts`` answers from each of the reference
    harness's cells of the pair (``k`` in all)."""

    pair: int
    counts: dict[str, int]
    k: int


def label_plan(verdicts: Sequence[AuditVerdict], evidence: Sequence[PairEvidence]) -> list[PlanItem]:
    """The labels every undecided pair asks for (rule 6's ``label_more``: k answers split over the
    reference's cells, largest remainder), nearest-to-decided first. Pairs whose humans' phi is undefined
    ask for 30 answers the reference fails on, in equal parts. Empty when nothing is undecided."""
    plan: list[PlanItem] = []
    for i, (v, e) in enumerate(zip(verdicts, evidence, strict=True)):
        if v.verdict != "undecided":
            continue
        if v.label_more is not None and v.label_more.cells:
            k, shares = v.label_more.k, v.label_more.cells
        elif e.human is not None and not e.human.defined and e.reference:
            k, shares = 30, {"pass/fail": 1 / 3, "fail/pass": 1 / 3, "fail/fail": 1 / 3}
        else:
            continue
        raw = {c: k * x for c, x in shares.items()}
        counts = {c: int(math.floor(x)) for c, x in raw.items()}
        for c in sorted(raw, key=lambda c: -(raw[c] - counts[c]))[: k - sum(counts.values())]:
            counts[c] += 1
        plan.append(PlanItem(i, {c: n for c, n in counts.items() if n > 0}, k))
    return sorted(plan, key=lambda item: item.k)


def pick_answers(
    plan: Sequence[PlanItem],
    reference: ArrayLike,
    available: ArrayLike,
    size: int,
    rng: np.random.Generator,
) -> NDArray[np.intp]:
    """``size`` unlabelled answers that serve the most of the plan at once (the ``decide`` strategy).

    An answer's labels count for every pair at once (an annotator labels all criteria of an answer), so
    answers are scored by the pairs whose wanted cells they fall in -- each pair weighted by 1/k, so the
    pairs nearest to a decision come first -- and taken in rounds: a fifth of what is left per round, at
    random among the best-scoring answers, then the counts still wanted are updated. Random choice among
    equals keeps each pair's picks random within the reference's cells, which is what the audit's
    post-stratified human estimate needs. When no wanted cell has answers left, the rest is topped up at
    random. ``reference`` is the reference harness's ``(n, k)`` 0/1/NaN matrix (pair indices follow
    ``np.triu_indices(k, 1)``); labeling order is shuffled."""
    V = np.asarray(reference, dtype=np.float64)
    free = np.asarray(available, dtype=bool).copy()
    iu, ju = np.triu_indices(V.shape[1], 1)
    chosen: list[int] = []
    if plan:
        pairs = np.array([item.pair for item in plan])
        a, b = V[:, iu[pairs]], V[:, ju[pairs]]
        cell = np.where(np.isnan(a) | np.isnan(b), -1, 2 * (a == 0.0) + (b == 0.0))  # (n, open pairs)
        want = np.array([[item.counts.get(c, 0) for c in CELL_NAMES] for item in plan], dtype=np.float64)
        weight = np.array([1.0 / max(item.k, 1) for item in plan])
        cols = np.arange(len(plan))
        while len(chosen) < size and free.any():
            wanted = np.where(cell >= 0, want[cols, np.clip(cell, 0, 3)] > 0, False)  # (n, open pairs)
            score = np.where(free, wanted @ weight, 0.0)
            best = score.max()
            if best <= 0:
                break
            top = np.flatnonzero(np.isclose(score, best) & free)
            take = rng.choice(top, size=min(top.size, max(1, (size - len(chosen)) // 5)), replace=False)
            for i in take:
                hit = wanted[i]
                want[cols[hit], cell[i, hit]] -= 1
            free[take] = False
            chosen += [int(x) for x in take]
    if len(chosen) < size and free.any():
        extra = rng.choice(np.flatnonzero(free), size=min(size - len(chosen), int(free.sum())), replace=False)
        chosen += [int(x) for x in extra]
    return rng.permutation(np.asarray(chosen[:size], dtype=np.intp))
