"""Pure statistics over verdict matrices: the numbers every judgekit report is made of.

Where this sits in the flow: :mod:`judgekit.store` holds verdicts and labels, :mod:`judgekit.reports`
aligns them into arrays and calls the functions here, pages and the CLI render what reports returns.
Nothing in this module knows about runs, databases or criteria names.

Data representation (the contract with ``reports.py``):

* A *source* -- one judge run, one annotator, or the human consensus -- is a float matrix ``V`` of shape
  ``(n_examples, n_criteria)``, rows aligned on the same example order. ``1.0`` = pass, ``0.0`` = fail,
  ``nan`` = missing / unscored. Scale criteria (1-5) are binarised first with :func:`binarize`.
* Unscored values are dropped **pairwise**: every statistic over two columns uses the rows where both are
  present, and reports that ``n``.
* Where a statistic is undefined (a constant column, ``n == 0``, no overlap) the result is ``nan``;
  nothing here raises on degenerate data.
* Wherever pass/fail is indexed, index 0 = pass and 1 = fail. Where a "positive class" is needed
  (TPR/TNR against humans) the positive class is **fail**: the judge's job is to find failures.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

__all__ = [
    "PASS",
    "FAIL",
    "Agreement",
    "AgreementMatrix",
    "AuditVerdict",
    "Crosstab",
    "CriterionFlip",
    "KappaCI",
    "PhiCI",
    "PhiMatrix",
    "agreement",
    "agreement_matrix",
    "all_pass_rate",
    "association_audit",
    "binarize",
    "compare",
    "consensus",
    "consensus_scale",
    "crosstab",
    "failure_attribution",
    "krippendorff_alpha",
    "mcnemar_exact",
    "mean_abs_delta",
    "phi",
    "phi_bootstrap_ci",
    "phi_matrix",
    "spearman",
    "weighted_kappa",
]

PASS = 0
"""Index of the *pass* outcome in every 2x2 table and (pass, fail) pair."""
FAIL = 1
"""Index of the *fail* outcome in every 2x2 table and (pass, fail) pair."""

Outcome = Literal["pass", "fail"]
Level = Literal["nominal", "ordinal", "interval", "ratio"]
Weights = Literal["linear", "quadratic"]

_OUTCOME_INDEX = {"pass": PASS, "fail": FAIL}


# --------------------------------------------------------------------------------------------- helpers


def _as_float(x: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(x, dtype=np.float64)


def _as_matrix(V: ArrayLike) -> NDArray[np.float64]:
    """A source as a 2-D float array; a 1-D array is one criterion."""
    V = _as_float(V)
    return V[:, None] if V.ndim == 1 else V


def _div(num: ArrayLike, den: ArrayLike) -> NDArray[np.float64]:
    """``num / den`` with ``nan`` wherever ``den == 0`` (no warnings)."""
    num = _as_float(num)
    den = _as_float(den)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    return np.where(den == 0, np.nan, out)


def _scalar(x: ArrayLike) -> float:
    return float(np.asarray(x).reshape(()))


def _pearson_from_sums(n, sx, sy, sxx, syy, sxy) -> NDArray[np.float64]:
    """Pearson r from pairwise sums; ``nan`` where either side is constant (or n < 2).

    Works element-wise on any broadcastable shape, which is what lets the phi matrix, the bootstrap
    replicates and the scalar ``phi`` share one formula.
    """
    n, sx, sy, sxx, syy, sxy = (_as_float(a) for a in (n, sx, sy, sxx, syy, sxy))
    cov = n * sxy - sx * sy
    var_x = n * sxx - sx * sx
    var_y = n * syy - sy * sy
    # For 0/1 data every term is an exact integer in float64, so a constant column gives exactly 0;
    # the relative tolerance only matters for non-binary input, where cancellation leaves crumbs.
    tol = 1e-12
    bad = (var_x <= tol * n * sxx) | (var_y <= tol * n * syy) | (n < 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = cov / np.sqrt(var_x * var_y)
    return np.where(bad, np.nan, np.clip(r, -1.0, 1.0))


def binarize(scores: ArrayLike, pass_at: ArrayLike) -> NDArray[np.float64]:
    """Binary view of scale scores: ``1.0`` where ``score >= pass_at``, ``0.0`` below, ``nan`` stays ``nan``.

    ``pass_at`` may be a scalar or one threshold per column (broadcast against ``scores``).
    """
    s = _as_float(scores)
    with np.errstate(invalid="ignore"):
        passed = (s >= _as_float(pass_at)).astype(np.float64)
    return np.where(np.isnan(s), np.nan, passed)


# --------------------------------------------------------------------------------------------- phi


class PhiMatrix(NamedTuple):
    """Pairwise phi coefficients of one source.

    ``phi[i, j]`` is the Pearson correlation of criteria i and j over the ``n[i, j]`` rows where both are
    scored: near 0 = the two verdicts move independently, near 1 = they pass and fail together, negative =
    one tends to pass when the other fails. ``nan`` where either column is constant on the overlap (or
    the overlap is empty); the diagonal is 1.0 wherever the criterion has both passes and failures.
    """

    phi: NDArray[np.float64]
    n: NDArray[np.int64]


def phi_matrix(V: ArrayLike) -> PhiMatrix:
    """Phi matrix of a ``(n_examples, k)`` 0/1/NaN source with pairwise deletion.

    All pairwise sums come from masked matrix products (``X.T @ M`` etc.), so the cost is a handful of
    ``k x n x k`` products regardless of how NaNs are spread.
    """
    V = _as_matrix(V)
    M = (~np.isnan(V)).astype(np.float64)
    X = np.where(M > 0, V, 0.0)
    n = M.T @ M
    sx = X.T @ M  # sx[i, j] = sum of column i over rows where i and j are both present
    sxx = (X * X).T @ M
    sxy = X.T @ X
    r = _pearson_from_sums(n, sx, sx.T, sxx, sxx.T, sxy)
    return PhiMatrix(phi=r, n=n.astype(np.int64))


def phi(a: ArrayLike, b: ArrayLike) -> float:
    """Phi (Pearson r on 0/1) of two columns over the rows where both are present; ``nan`` if undefined."""
    return _scalar(phi_matrix(np.column_stack([_as_float(a), _as_float(b)])).phi[0, 1])


class PhiCI(NamedTuple):
    """Percentile bootstrap interval for every entry of a phi matrix, each ``(k, k)``."""

    lo: NDArray[np.float64]
    hi: NDArray[np.float64]


def _is_binary(V: NDArray[np.float64]) -> bool:
    finite = V[~np.isnan(V)]
    return bool(np.all((finite == 0.0) | (finite == 1.0)))


def phi_bootstrap_ci(
    V: ArrayLike,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    method: Literal["auto", "cells", "rows"] = "auto",
) -> PhiCI:
    """Percentile bootstrap ``(1 - alpha)`` CIs for :func:`phi_matrix`, resampling examples (rows).

    Two exact implementations of the same row bootstrap:

    * ``"cells"`` (0/1 data; the default via ``"auto"``): resampling ``N`` rows with replacement puts a
      pair's rows into its five cells (pass/pass, pass/fail, fail/pass, fail/fail, not both scored) with
      ``Multinomial(N, observed cell shares)`` counts, so each pair's replicates are drawn directly from
      that multinomial -- ``O(pairs x n_boot)`` work independent of ``N``. Pairs are resampled
      independently of one another, which leaves every entry's interval distributionally identical to
      the joint row bootstrap (only the cross-pair dependence of replicates, unused here, differs).
    * ``"rows"`` (any numeric data, chosen by ``"auto"`` when values are not all 0/1): draws multinomial
      row weights per replicate and computes all pairwise weighted sums with one matrix product per
      replicate; every pair sees the same resample.

    Replicates in which phi is undefined (a column constant in the resample) are left out of the
    percentiles; an entry is ``nan`` when its point estimate is undefined or no replicate is defined.
    The diagonal is ``(1, 1)`` where defined.
    """
    V = _as_matrix(V)
    N, k = V.shape
    lo = np.full((k, k), np.nan)
    hi = np.full((k, k), np.nan)
    point = phi_matrix(V).phi
    if N == 0 or k == 0 or n_boot < 1:
        return PhiCI(lo, hi)
    if method == "auto":
        method = "cells" if _is_binary(V) else "rows"
    rng = np.random.default_rng(seed)
    iu, ju = np.triu_indices(k, 1)
    if method == "cells":
        reps = _phi_replicates_cells(V, iu, ju, n_boot, rng)
    else:
        reps = _phi_replicates_rows(V, iu, ju, n_boot, rng)
    defined = ~np.isnan(point[iu, ju]) & np.any(~np.isnan(reps), axis=1)
    q_lo = np.full(len(iu), np.nan)
    q_hi = np.full(len(iu), np.nan)
    if np.any(defined):
        q = np.nanquantile(reps[defined], [alpha / 2, 1 - alpha / 2], axis=1)
        q_lo[defined], q_hi[defined] = q[0], q[1]
    lo[iu, ju] = lo[ju, iu] = q_lo
    hi[iu, ju] = hi[ju, iu] = q_hi
    diag = np.diag(point) == 1.0
    lo[diag, diag] = hi[diag, diag] = 1.0
    return PhiCI(lo, hi)


def _phi_replicates_cells(V, iu, ju, n_boot, rng) -> NDArray[np.float64]:
    """(pairs, n_boot) phi replicates from per-pair multinomial cell counts (0/1 data only)."""
    N = V.shape[0]
    M = (~np.isnan(V)).astype(np.float64)
    X = np.where(M > 0, V, 0.0)
    n = (M.T @ M)[iu, ju]
    n11 = (X.T @ X)[iu, ju]
    sx = (X.T @ M)[iu, ju]
    sy = (M.T @ X)[iu, ju]
    cells = np.stack([n11, sx - n11, sy - n11, n - sx - sy + n11, N - n], axis=1)  # (pairs, 5)
    draws = rng.multinomial(N, cells[:, None, :] / N, size=(len(iu), n_boot)).astype(np.float64)
    b11, b10, b01, b00 = draws[..., 0], draws[..., 1], draws[..., 2], draws[..., 3]
    bn = b11 + b10 + b01 + b00
    bx = b11 + b10
    by = b11 + b01
    return _pearson_from_sums(bn, bx, by, bx, by, b11)


def _phi_replicates_rows(V, iu, ju, n_boot, rng) -> NDArray[np.float64]:
    """(pairs, n_boot) phi replicates from multinomial row weights (any numeric data)."""
    N, k = V.shape
    M = (~np.isnan(V)).astype(np.float64)
    X = np.where(M > 0, V, 0.0)
    G = np.concatenate([M, X, X * X], axis=1)  # (N, 3k): one Gram matrix yields every pairwise sum
    Gt = G.T.copy()
    weights = rng.multinomial(N, np.full(N, 1.0 / N), size=n_boot).astype(np.float64)
    out = np.empty((len(iu), n_boot))
    for b in range(n_boot):  # one BLAS product per replicate; no loop over examples
        S = (Gt * weights[b]) @ G
        n = S[:k, :k]
        sx = S[k : 2 * k, :k]
        sxx = S[2 * k :, :k]
        sxy = S[k : 2 * k, k : 2 * k]
        out[:, b] = _pearson_from_sums(n, sx, sx.T, sxx, sxx.T, sxy)[iu, ju]
    return out


# --------------------------------------------------------------------------------------------- crosstab


@dataclass(frozen=True, eq=False)
class Crosstab:
    """2x2 cross-tabulation of two 0/1/NaN columns over the rows where both are scored.

    ``counts[r][c]``: rows where the row criterion has outcome r and the column criterion outcome c
    (index 0 = pass, 1 = fail). ``col_fail_rate[r]`` is the share of column failures *within* row
    outcome r, i.e. P(col fails | row = r) -- dividing by the row total is what makes the two rows
    comparable. ``ratio`` = ``col_fail_rate[fail] / col_fail_rate[pass]``: how many times likelier the
    column criterion fails when the row criterion fails (1 = unrelated; ``nan`` if either rate is
    undefined or the pass-row rate is 0). ``phi`` is the correlation of the two columns on the same rows.
    ``masks[r, c]`` is a boolean mask over *all* input rows selecting that cell; :meth:`cell` lists
    its row indices.
    """

    n: int
    counts: NDArray[np.int64]
    row_totals: NDArray[np.int64]
    col_totals: NDArray[np.int64]
    col_fail_rate: NDArray[np.float64]
    ratio: float
    phi: float
    masks: NDArray[np.bool_]

    def cell(self, row: Outcome, col: Outcome) -> NDArray[np.intp]:
        """Row indices (positions in the input arrays) of the examples in cell (row, col)."""
        return np.flatnonzero(self.masks[_OUTCOME_INDEX[row], _OUTCOME_INDEX[col]])


def _phi_from_counts(counts: NDArray) -> NDArray[np.float64]:
    """phi = (a d - b c) / sqrt(r_pass r_fail c_pass c_fail) over the last two axes of ``counts``."""
    c = _as_float(counts)
    a, b, cc, d = c[..., 0, 0], c[..., 0, 1], c[..., 1, 0], c[..., 1, 1]
    den = (a + b) * (cc + d) * (a + cc) * (b + d)
    return np.clip(_div(a * d - b * cc, np.sqrt(den)), -1.0, 1.0)


def crosstab(row: ArrayLike, col: ArrayLike) -> Crosstab:
    """Cross-tabulate two 1-D 0/1/NaN arrays (values other than 0/1 count as unscored)."""
    r = _as_float(row)
    c = _as_float(col)
    rp, rf = r == 1.0, r == 0.0
    cp, cf = c == 1.0, c == 0.0
    masks = np.stack([np.stack([rp & cp, rp & cf]), np.stack([rf & cp, rf & cf])])
    counts = np.count_nonzero(masks, axis=2).astype(np.int64)
    row_totals = counts.sum(axis=1)
    col_totals = counts.sum(axis=0)
    col_fail_rate = _div(counts[:, FAIL], row_totals)
    rate_pass = col_fail_rate[PASS]
    ratio = _scalar(_div(col_fail_rate[FAIL], rate_pass)) if rate_pass > 0 else math.nan
    return Crosstab(
        n=int(counts.sum()),
        counts=counts,
        row_totals=row_totals,
        col_totals=col_totals,
        col_fail_rate=col_fail_rate,
        ratio=ratio,
        phi=_scalar(_phi_from_counts(counts)),
        masks=masks,
    )


# --------------------------------------------------------------------------------------------- compare


def mcnemar_exact(b: ArrayLike, c: ArrayLike) -> float | NDArray[np.float64]:
    """Exact two-sided McNemar p-value from the discordant counts ``b`` and ``c``.

    Under H0 (both harnesses fail equally often) each discordant example is a fair coin, so
    p = P(|Binomial(b + c, 1/2) - (b+c)/2| >= |b - (b+c)/2|) = min(1, 2 * BinomCDF(min(b, c))), which is
    exactly ``scipy.stats.binomtest(b, b + c, 0.5).pvalue``; 1.0 when there are no discordant pairs.
    Vectorised: arrays in, array out.
    """
    b_arr = np.asarray(b, dtype=np.float64)
    c_arr = np.asarray(c, dtype=np.float64)
    m = b_arr + c_arr
    p = np.minimum(1.0, 2.0 * stats.binom.cdf(np.minimum(b_arr, c_arr), m, 0.5))
    p = np.where(m == 0, 1.0, p)
    return float(p) if p.ndim == 0 else p


@dataclass(frozen=True, eq=False)
class CriterionFlip:
    """How one criterion's verdicts moved between source A and source B (e.g. single call -> split).

    Counted over the ``n`` rows where both sources scored the criterion. ``fail_to_pass`` = failed under
    A and passed under B; ``pass_to_fail`` the reverse; so ``a_fail - fail_to_pass`` examples fail under
    both and ``b_fail = (a_fail - fail_to_pass) + pass_to_fail``. ``mcnemar_p`` tests whether the two
    failure rates differ (exact, on the discordant pairs). The ``*_rows`` arrays list the flipped rows.
    """

    criterion: int
    n: int
    a_fail: int
    b_fail: int
    fail_to_pass: int
    pass_to_fail: int
    mcnemar_p: float
    fail_to_pass_rows: NDArray[np.intp]
    pass_to_fail_rows: NDArray[np.intp]


def compare(A: ArrayLike, B: ArrayLike) -> list[CriterionFlip]:
    """Per-criterion flips between two aligned ``(n, k)`` sources (one entry per column)."""
    A = _as_matrix(A)
    B = _as_matrix(B)
    a_valid = (A == 0.0) | (A == 1.0)
    b_valid = (B == 0.0) | (B == 1.0)
    both = a_valid & b_valid
    a_f = both & (A == 0.0)
    b_f = both & (B == 0.0)
    f2p = a_f & (B == 1.0)
    p2f = (A == 1.0) & b_f
    n_f2p = f2p.sum(axis=0)
    n_p2f = p2f.sum(axis=0)
    p = np.atleast_1d(mcnemar_exact(n_f2p, n_p2f))
    n, af, bf = both.sum(axis=0), a_f.sum(axis=0), b_f.sum(axis=0)
    return [
        CriterionFlip(
            criterion=j,
            n=int(n[j]),
            a_fail=int(af[j]),
            b_fail=int(bf[j]),
            fail_to_pass=int(n_f2p[j]),
            pass_to_fail=int(n_p2f[j]),
            mcnemar_p=float(p[j]),
            fail_to_pass_rows=np.flatnonzero(f2p[:, j]),
            pass_to_fail_rows=np.flatnonzero(p2f[:, j]),
        )
        for j in range(A.shape[1])
    ]


def all_pass_rate(V: ArrayLike) -> float:
    """Share of fully scored rows on which every criterion passes (the gate's number); ``nan`` if none."""
    V = _as_matrix(V)
    full = ~np.isnan(V).any(axis=1)
    n = int(full.sum())
    if n == 0:
        return math.nan
    return float((V[full] == 1.0).all(axis=1).sum() / n)


def failure_attribution(V: ArrayLike) -> NDArray[np.int64]:
    """Failures recorded against each criterion (count of 0.0 per column; unscored rows don't count)."""
    return (_as_matrix(V) == 0.0).sum(axis=0).astype(np.int64)


# --------------------------------------------------------------------------------------------- agreement


class KappaCI(NamedTuple):
    lo: float
    hi: float


@dataclass(frozen=True, eq=False)
class AgreementMatrix:
    """Judge-vs-human agreement for every criterion (each field has shape ``(k,)``).

    See :class:`Agreement` for what each number means; ``counts[j]`` is criterion j's 2x2 table indexed
    ``[human][judge]`` with 0 = pass, 1 = fail.
    """

    n: NDArray[np.int64]
    counts: NDArray[np.int64]
    accuracy: NDArray[np.float64]
    kappa: NDArray[np.float64]
    kappa_se: NDArray[np.float64]
    kappa_lo: NDArray[np.float64]
    kappa_hi: NDArray[np.float64]
    tpr: NDArray[np.float64]
    tnr: NDArray[np.float64]
    prevalence: NDArray[np.float64]
    auc: NDArray[np.float64]
    n_auc: NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Agreement:
    """How far one judge's verdicts on one criterion are from the human column.

    Over the ``n`` rows where both are scored:

    * ``accuracy``: share of rows where judge and human agree.
    * ``kappa``: Cohen's kappa, agreement corrected for what the two marginal pass rates would produce by
      chance (0 = chance level, 1 = perfect). ``kappa_ci`` is a Wald interval with the large-sample
      (non-null) standard error of Fleiss, Cohen & Everitt (1969) -- the SAS/statsmodels "ASE" --
      clipped to [-1, 1]. It is analytic, not a bootstrap, and optimistic for n below ~30.
    * ``tpr`` / ``tnr`` with **fail as the positive class**: ``tpr`` = P(judge fails | human fails)
      (failures the judge catches), ``tnr`` = P(judge passes | human passes).
    * ``prevalence``: share of human fails.
    * ``auc`` (only with ``p_pass``): probability that a random human-*pass* example gets a higher
      P(pass) than a random human-*fail* example (ties count 1/2), over the ``n_auc`` rows where the
      human label and ``p_pass`` are both present; ``nan`` when humans show one class only.
    * ``counts``: the 2x2 table ``[human][judge]``, 0 = pass, 1 = fail.
    """

    n: int
    counts: NDArray[np.int64]
    accuracy: float
    kappa: float
    kappa_se: float
    kappa_ci: KappaCI
    tpr: float
    tnr: float
    prevalence: float
    auc: float
    n_auc: int


def _auc_pass(human: NDArray[np.float64], score: NDArray[np.float64]) -> tuple[float, int]:
    """Mann-Whitney AUC that ``score`` ranks human passes above human fails."""
    ok = ((human == 0.0) | (human == 1.0)) & np.isfinite(score)
    h = human[ok]
    n = int(ok.sum())
    n_pos = int((h == 1.0).sum())
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan, n
    ranks = stats.rankdata(score[ok])
    u = ranks[h == 1.0].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg)), n


def agreement_matrix(
    judge: ArrayLike, human: ArrayLike, p_pass: ArrayLike | None = None, alpha: float = 0.05
) -> AgreementMatrix:
    """:class:`Agreement` for every column of two aligned ``(n, k)`` sources at once (vectorised)."""
    J = _as_matrix(judge)
    H = _as_matrix(human)
    hp, hf = H == 1.0, H == 0.0
    jp, jf = J == 1.0, J == 0.0
    pp = (hp & jp).sum(axis=0)
    pf = (hp & jf).sum(axis=0)
    fp = (hf & jp).sum(axis=0)
    ff = (hf & jf).sum(axis=0)
    counts = np.stack([np.stack([pp, pf], axis=-1), np.stack([fp, ff], axis=-1)], axis=-2).astype(np.int64)
    n = counts.sum(axis=(1, 2))
    p = _as_float(counts) / np.maximum(n, 1)[:, None, None]  # (k, 2, 2) cell shares
    rows = p.sum(axis=2)  # human margins (pass, fail)
    cols = p.sum(axis=1)  # judge margins
    po = p[:, 0, 0] + p[:, 1, 1]
    pe = (rows * cols).sum(axis=1)
    kappa = _div(po - pe, 1.0 - pe)
    kappa = np.where(n == 0, np.nan, kappa)
    # Fleiss, Cohen & Everitt (1969) asymptotic variance of kappa (not under H0).
    one_k = 1.0 - kappa
    diag = np.stack([p[:, 0, 0], p[:, 1, 1]], axis=1)
    term_a = (diag * (1.0 - (rows + cols) * one_k[:, None]) ** 2).sum(axis=1)
    off = (cols[:, :, None] + rows[:, None, :]) ** 2 * p  # [i, j]: p_ij (p_.i + p_j.)^2
    term_b = one_k**2 * (off[:, 0, 1] + off[:, 1, 0])
    term_c = (kappa - pe * one_k) ** 2
    var = _div(term_a + term_b - term_c, (1.0 - pe) ** 2 * n)
    se = np.sqrt(np.maximum(var, 0.0))
    z = stats.norm.ppf(1 - alpha / 2)
    auc = np.full(J.shape[1], np.nan)
    n_auc = np.zeros(J.shape[1], dtype=np.int64)
    if p_pass is not None:
        P = _as_matrix(p_pass)
        for j in range(J.shape[1]):  # rank-based AUC needs a sort per criterion
            auc[j], n_auc[j] = _auc_pass(H[:, j], P[:, j])
    return AgreementMatrix(
        n=n,
        counts=counts,
        accuracy=_div(pp + ff, n),
        kappa=kappa,
        kappa_se=np.where(np.isnan(kappa), np.nan, se),
        kappa_lo=np.clip(kappa - z * se, -1.0, 1.0),
        kappa_hi=np.clip(kappa + z * se, -1.0, 1.0),
        tpr=_div(ff, fp + ff),
        tnr=_div(pp, pp + pf),
        prevalence=_div(fp + ff, n),
        auc=auc,
        n_auc=n_auc,
    )


def agreement(
    judge: ArrayLike, human: ArrayLike, p_pass: ArrayLike | None = None, alpha: float = 0.05
) -> Agreement:
    """Agreement of one judge criterion (1-D 0/1/NaN) with the human column; see :class:`Agreement`."""
    j = _as_float(judge).reshape(-1, 1)
    h = _as_float(human).reshape(-1, 1)
    pp_ = None if p_pass is None else _as_float(p_pass).reshape(-1, 1)
    m = agreement_matrix(j, h, pp_, alpha=alpha)
    return Agreement(
        n=int(m.n[0]),
        counts=m.counts[0],
        accuracy=float(m.accuracy[0]),
        kappa=float(m.kappa[0]),
        kappa_se=float(m.kappa_se[0]),
        kappa_ci=KappaCI(float(m.kappa_lo[0]), float(m.kappa_hi[0])),
        tpr=float(m.tpr[0]),
        tnr=float(m.tnr[0]),
        prevalence=float(m.prevalence[0]),
        auc=float(m.auc[0]),
        n_auc=int(m.n_auc[0]),
    )


# --------------------------------------------------------------------------------------------- scale


def _pair(a: ArrayLike, b: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    a = _as_float(a).ravel()
    b = _as_float(b).ravel()
    ok = ~(np.isnan(a) | np.isnan(b))
    return a[ok], b[ok]


def mean_abs_delta(a: ArrayLike, b: ArrayLike) -> float:
    """Mean |a - b| in scale points over rows where both are scored; ``nan`` if none."""
    x, y = _pair(a, b)
    return float(np.abs(x - y).mean()) if x.size else math.nan


def weighted_kappa(
    a: ArrayLike,
    b: ArrayLike,
    weights: Weights | None = "quadratic",
    labels: ArrayLike = (1, 2, 3, 4, 5),
) -> float:
    """Cohen's weighted kappa between two 1-5 scorings: 1 - sum(w * observed) / sum(w * expected).

    Disagreements cost ``|i - j|`` (``"linear"``) or ``(i - j)^2`` (``"quadratic"``) label steps;
    ``weights=None`` gives unweighted kappa. Rows where either value is missing or not one of ``labels``
    (e.g. a half-point median) are left out. Matches ``sklearn.metrics.cohen_kappa_score`` with the same
    ``labels``.
    ``nan`` when undefined (no rows, or both raters use a single identical label).
    """
    x, y = _pair(a, b)
    lab = np.sort(np.asarray(labels, dtype=np.float64))  # weights count steps in sorted label order
    L = lab.size
    ix = np.clip(np.searchsorted(lab, x), 0, L - 1)
    iy = np.clip(np.searchsorted(lab, y), 0, L - 1)
    ok = (lab[ix] == x) & (lab[iy] == y)
    if not ok.any():
        return math.nan
    ix, iy = ix[ok], iy[ok]
    observed = np.bincount(ix * L + iy, minlength=L * L).reshape(L, L).astype(np.float64)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    steps = np.abs(np.arange(L)[:, None] - np.arange(L)[None, :]).astype(np.float64)
    if weights is None:
        w = (steps > 0).astype(np.float64)
    elif weights == "linear":
        w = steps
    else:
        w = steps**2
    den = float((w * expected).sum())
    return math.nan if den == 0 else 1.0 - float((w * observed).sum()) / den


def spearman(a: ArrayLike, b: ArrayLike) -> float:
    """Spearman rank correlation (Pearson on average ranks) over rows where both are present.

    ``nan`` when fewer than two rows overlap or either side is constant there.
    """
    x, y = _pair(a, b)
    if x.size < 2:
        return math.nan
    rx = stats.rankdata(x)
    ry = stats.rankdata(y)
    n = float(x.size)
    return _scalar(
        _pearson_from_sums(n, rx.sum(), ry.sum(), (rx * rx).sum(), (ry * ry).sum(), (rx * ry).sum())
    )


# --------------------------------------------------------------------------------------------- humans


def consensus(L: ArrayLike) -> NDArray[np.float64]:
    """Majority vote of annotators per cell: ``L`` is ``(n_annotators, n, k)`` (or ``(n_annotators, n)``).

    1.0 where more annotators said pass than fail, 0.0 for the reverse, ``nan`` for ties (including
    cells nobody labelled) -- a tie is *unresolved*, never silently a pass or a fail.
    """
    L = _as_float(L)
    passes = (L == 1.0).sum(axis=0)
    fails = (L == 0.0).sum(axis=0)
    return np.where(passes > fails, 1.0, np.where(fails > passes, 0.0, np.nan))


def consensus_scale(L: ArrayLike, method: Literal["median", "majority"] = "median") -> NDArray[np.float64]:
    """Consensus of 1-5 scores across annotators; ``L`` is ``(n_annotators, n, ...)`` with NaN missing.

    ``"median"`` (default): the median of the available scores -- robust to one outlier, and uses every
    annotator. With an even number of annotators whose middle scores differ it is a half-point (3 and 4
    give 3.5): fine for mean deltas, Spearman and ``binarize``; :func:`weighted_kappa` skips such rows.
    ``"majority"``: the most frequent score, ``nan`` when two scores tie for most frequent (unresolved,
    as in :func:`consensus`). Cells nobody scored are ``nan`` under both.
    """
    L = _as_float(L)
    if method == "median":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells -> nan, as documented
            return np.nanmedian(L, axis=0)
    values = np.unique(L[~np.isnan(L)])
    if values.size == 0:
        return np.full(L.shape[1:], np.nan)
    counts = (L[None, ...] == values.reshape((-1,) + (1,) * L.ndim)).sum(axis=1)  # (values, n, ...)
    top = counts.max(axis=0)
    winners = (counts == top).sum(axis=0)
    mode = values[np.argmax(counts, axis=0)]
    return np.where((top > 0) & (winners == 1), mode, np.nan)


def krippendorff_alpha(L: ArrayLike, level: Level = "nominal") -> float:
    """Krippendorff's alpha for ``(n_annotators, n_units)`` ratings with NaN for missing.

    alpha = 1 - D_o / D_e: one minus the ratio of disagreement observed within units to the
    disagreement expected if the same pool of values were paired at random. 1 = perfect reliability,
    0 = chance level, negative = systematic disagreement. Units with fewer than two ratings are not
    pairable and are ignored. ``level`` chooses the difference function: ``nominal`` (any difference
    counts 1), ``ordinal`` (rank distance weighted by how many values lie between), ``interval``
    (squared difference), ``ratio`` (squared relative difference). Computed from the coincidence matrix
    (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability"); ``nan`` when no unit is pairable
    or only one value occurs.
    """
    L = _as_float(L)
    if L.ndim != 2 or L.size == 0:
        return math.nan
    present = ~np.isnan(L)
    values = np.unique(L[present])
    V = values.size
    if V < 2:
        return math.nan
    n_units = L.shape[1]
    unit_idx = np.broadcast_to(np.arange(n_units), L.shape)[present]
    codes = np.searchsorted(values, L[present])
    N = np.bincount(unit_idx * V + codes, minlength=n_units * V).reshape(n_units, V).astype(np.float64)
    m = N.sum(axis=1)
    w = _div(1.0, m - 1.0)
    w = np.where(m >= 2, w, 0.0)
    o = (N * w[:, None]).T @ N - np.diag((N * w[:, None]).sum(axis=0))  # coincidence matrix
    n_c = o.sum(axis=1)
    total = n_c.sum()
    if total <= 1:
        return math.nan
    if level == "nominal":
        d2 = 1.0 - np.eye(V)
    elif level == "interval":
        d2 = (values[:, None] - values[None, :]) ** 2
    elif level == "ratio":
        s = values[:, None] + values[None, :]
        d2 = np.where(s == 0, 0.0, _div(values[:, None] - values[None, :], s) ** 2)
    elif level == "ordinal":
        cs = np.cumsum(n_c)
        i, j = np.minimum.outer(np.arange(V), np.arange(V)), np.maximum.outer(np.arange(V), np.arange(V))
        between = cs[j] - cs[i] + n_c[i]  # sum of n_g for g from the lower to the upper value
        d2 = (between - (n_c[i] + n_c[j]) / 2.0) ** 2
    else:
        raise ValueError(f"unknown level {level!r}")  # a programming error, not a data condition
    d_e = float((np.outer(n_c, n_c) * d2).sum())
    if d_e == 0:
        return math.nan
    return 1.0 - (total - 1.0) * float((o * d2).sum()) / d_e


# --------------------------------------------------------------------------------------------- audit


class AuditVerdict(NamedTuple):
    """Outcome of :func:`association_audit` for one criterion pair.

    ``verdict`` is ``"real"``, ``"induced"``, ``"undecided"`` or ``"no human column"``; ``induced_by``
    names the harnesses blamed when the verdict is ``"induced"`` (empty otherwise); ``note`` says why.
    """

    verdict: str
    induced_by: list[str]
    note: str


def _fmt(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.2f}"


def association_audit(values: dict[str, tuple[float, float, float]], human_key: str) -> AuditVerdict:
    """Is one criterion pair's association a fact about the answers or an artefact of a harness?

    ``values`` maps each source (harness runs and the human column ``human_key``) to ``(phi, lo, hi)``,
    its point estimate and CI for this pair. Rules, applied in order:

    1. **no human column** -- ``human_key`` is absent, or its phi or CI is undefined (``nan``).
    2. Each harness (every other key with a defined phi) is *inside* when its point phi lies within the
       human CI ``[lo, hi]`` (inclusive), *outside* otherwise. Harnesses with undefined phi are ignored
       (named in the note).
    3. **real** -- the human CI excludes 0 (``lo > 0`` or ``hi < 0``): humans, who share no mechanism
       with any harness, see the association. Harnesses outside the human CI are named in the note as
       distorting its size, but ``induced_by`` stays empty because the association itself is genuine.
    4. **induced** -- the human CI includes 0, at least one harness is outside it and at least one
       other harness is inside it. An outside point is then necessarily further from 0 than anything the
       humans admit, and the inside harness shows the instrument *can* reproduce the human reading, so
       the excess is blamed on the outside harnesses (``induced_by``, in ``values`` order).
    5. **undecided** -- otherwise: every harness inside (no association shown by anyone, but the human
       sample cannot exclude one either), or none inside (no harness reproduces the humans, so there is
       no witness that the gap is the call structure's doing), or no harness at all.
    """
    h = values.get(human_key)
    if h is None:
        return AuditVerdict("no human column", [], f"no values for human source {human_key!r}")
    h_phi, h_lo, h_hi = (float(x) for x in h)
    if math.isnan(h_phi) or math.isnan(h_lo) or math.isnan(h_hi):
        return AuditVerdict("no human column", [], f"human phi or CI undefined for {human_key!r}")
    inside: list[str] = []
    outside: list[str] = []
    undefined: list[str] = []
    for key, (p, _lo, _hi) in values.items():
        if key == human_key:
            continue
        p = float(p)
        if math.isnan(p):
            undefined.append(key)
        elif h_lo <= p <= h_hi:
            inside.append(key)
        else:
            outside.append(key)
    human = f"human phi {_fmt(h_phi)} [{_fmt(h_lo)}, {_fmt(h_hi)}]"
    tail = f"; undefined for {', '.join(undefined)}" if undefined else ""
    if h_lo > 0 or h_hi < 0:
        note = f"{human} excludes 0"
        if outside:
            shown = ", ".join(f"{k} {_fmt(float(values[k][0]))}" for k in outside)
            note += f"; outside the human CI (size distorted): {shown}"
        return AuditVerdict("real", [], note + tail)
    if outside and inside:
        shown = ", ".join(f"{k} {_fmt(float(values[k][0]))}" for k in outside)
        note = f"{human} includes 0; outside it: {shown}; inside it: {', '.join(inside)}"
        return AuditVerdict("induced", outside, note + tail)
    if not inside and not outside:
        why = "no harness values"
    elif inside:
        why = "every harness lies inside the human CI, which includes 0"
    else:
        why = "no harness lies inside the human CI, so none shows the humans' reading is reachable"
    return AuditVerdict("undecided", [], f"{human}; {why}{tail}")
