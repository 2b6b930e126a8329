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
    "CriterionFlip",
    "Crosstab",
    "Interval",
    "JEFFREYS",
    "KappaCI",
    "PhiCI",
    "PhiMatrix",
    "PooledAgreement",
    "PooledValue",
    "agreement",
    "agreement_matrix",
    "all_pass_rate",
    "binarize",
    "check_draws",
    "compare",
    "consensus",
    "consensus_scale",
    "crosstab",
    "degenerate_table",
    "dirichlet_shares",
    "equal_tailed",
    "failure_attribution",
    "fdr_bh",
    "gamma_masses",
    "jeffreys_interval",
    "kappa_of_cells",
    "krippendorff_alpha",
    "wilson_interval",
    "Rate",
    "rate",
    "MIN_DRAWS",
    "mcnemar_exact",
    "mean_abs_delta",
    "pair_tables",
    "phi",
    "phi_bootstrap_ci",
    "phi_ci",
    "phi_interval",
    "phi_matrix",
    "phi_of_cells",
    "pooled_agreement",
    "posterior_p",
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

MIN_DRAWS = 200
"""Fewest posterior (or bootstrap) draws a printed 95 % interval or a verdict may rest on: with fewer, an
equal-tailed bound is one of the handful most extreme draws and moves from seed to seed."""


def check_draws(n_draws: int, *, none: bool = True, option: str = "--n-boot") -> int:
    """``n_draws`` if an interval can rest on it: at least :data:`MIN_DRAWS`, or 0 (intervals left out)
    when ``none``; otherwise ValueError in one line naming ``option``."""
    if n_draws >= MIN_DRAWS or (none and n_draws == 0):
        return n_draws
    if n_draws < 0:
        raise ValueError(f"{option} {n_draws}: a number of draws cannot be negative")
    tail = int(n_draws * 0.025) + 1  # the equal-tailed bound's rank from either end
    rank = {1: "", 2: "second ", 3: "third ", 4: "fourth ", 5: "fifth "}[tail]
    raise ValueError(
        f"{option} {n_draws}: a 95 % interval needs at least {MIN_DRAWS} draws (with {n_draws}, each bound is the "
        f"{rank}most extreme draw and moves with the seed)"
        + ("; 0 leaves the intervals out" if none else "")
    )


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
    """An interval for every entry of a phi matrix, each ``(k, k)``; ``nan`` where undefined."""

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

    Reports use :func:`phi_ci` for 0/1 data: on small sparse tables this interval under-covers badly (with
    an empty fail/fail cell every replicate has phi <= 0). Kept for non-binary columns and as the
    comparison baseline of the benchmarks.

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


# --------------------------------------------------------------------------------------------- posterior intervals
#
# Why a posterior and not a bootstrap: on small, sparse 2x2 tables (n 30-150, failure rates 5-35 %) the
# percentile bootstrap can only resample the cells it saw -- with an empty fail/fail cell every replicate
# has phi <= 0, so the interval excludes 0 whatever the truth (48 % coverage at n = 30 with rare failures).
# Drawing the four cell shares from their Dirichlet posterior under the Jeffreys prior (0.5 per cell)
# keeps probability on cells not seen yet. ``bench/audit_calibration.py`` measures every interval below
# on planted truth and prints the comparison with the percentile bootstrap, BCa and the delta-method
# Wald interval that chose this method (README: "How the audit is calibrated").

JEFFREYS = 0.5
"""Prior count per cell of a 2x2 table (the Jeffreys prior of a four-cell multinomial)."""
_WILSON_HILFERTY_FROM = 10.0
_BLOCK_ROWS = 1024  # rows of draws computed at once by gamma_masses (bounds its temporaries to ~8 MB per 1000 draws)


class Interval(NamedTuple):
    """An equal-tailed interval; ``nan`` bounds where the quantity is undefined."""

    lo: NDArray[np.float64]
    hi: NDArray[np.float64]

    def holding(self, point: ArrayLike) -> Interval:
        """The interval stretched to hold ``point`` where both are defined. A posterior under the Jeffreys
        prior never reaches a boundary (a rate of 0 or 1, a phi or kappa of ±1), so a sample exactly there
        would lie outside its own interval, and a true value there would never be covered; stretching to
        the estimate is Brown, Cai & DasGupta's boundary rule for the Jeffreys interval."""
        pt = _as_float(point)
        lo, hi = _as_float(self.lo), _as_float(self.hi)
        both = np.isfinite(pt) & np.isfinite(lo) & np.isfinite(hi)
        return Interval(np.where(both, np.minimum(lo, pt), lo), np.where(both, np.maximum(hi, pt), hi))


def gamma_masses(params: ArrayLike, n_draws: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """Unnormalised Dirichlet draws: ``Gamma(params)`` with a new last axis of ``n_draws`` draws.

    ``params`` of shape ``(..., c)`` gives ``(..., c, n_draws)``. Sums of independent Gamma(a_i) are
    Gamma(sum a_i), so cells can be merged *after* drawing and still be exact Dirichlet marginals; that
    is what lets one draw per observed row pattern serve every comparison between sources.
    """
    a = _as_float(params)
    flat = a.ravel()
    out = np.empty((flat.size, n_draws))
    large = np.flatnonzero(flat >= _WILSON_HILFERTY_FROM)
    # Wilson-Hilferty: Gamma(a) ~ a (1 - 1/(9a) + Z / (3 sqrt a))^3, accurate to ~1e-3 in the quantiles for
    # a >= 10 and cheaper than exact draws -- the bulk of the draws at large n. Computed in place, in blocks
    # of rows so the temporaries stay small (drawing consecutive blocks gives the same normals as one draw).
    for start in range(0, large.size, _BLOCK_ROWS):
        rows = large[start:start + _BLOCK_ROWS]
        big = flat[rows][:, None]
        t = rng.standard_normal((rows.size, n_draws))
        t *= 1.0 / (3.0 * np.sqrt(big))
        t += 1.0 - 1.0 / (9.0 * big)
        np.maximum(t, 0.0, out=t)
        np.multiply(t, t * t, out=t)
        t *= big
        out[rows] = t
    small = flat < _WILSON_HILFERTY_FROM
    values, inverse = np.unique(flat[small], return_inverse=True)
    rows = np.flatnonzero(small)
    for i, value in enumerate(values):  # few distinct small values: a scalar shape draws fastest
        at = rows[inverse.ravel() == i]
        out[at] = rng.standard_gamma(value, size=(at.size, n_draws)) if value > 0 else 0.0
    return out.reshape(a.shape + (n_draws,))


def dirichlet_shares(
    counts: ArrayLike, n_draws: int, rng: np.random.Generator, prior: float = JEFFREYS
) -> NDArray[np.float64]:
    """Posterior draws of cell shares ``Dirichlet(counts + prior)``: ``(..., c)`` → ``(..., n_draws, c)``."""
    g = np.moveaxis(gamma_masses(_as_float(counts) + prior, n_draws, rng), -1, -2)
    total = g.sum(axis=-1, keepdims=True)
    return g / np.where(total > 0, total, 1.0)


def phi_of_cells(cells: ArrayLike) -> NDArray[np.float64]:
    """phi of 2x2 tables given as counts or shares ``(..., 4)`` in the order pass/pass, pass/fail,
    fail/pass, fail/fail (first criterion / second); ``nan`` where a margin is empty."""
    c = _as_float(cells)
    return _phi_from_counts(c.reshape(c.shape[:-1] + (2, 2)))


def kappa_of_cells(cells: ArrayLike) -> NDArray[np.float64]:
    """Cohen's kappa of 2x2 tables ``(..., 4)`` (reference pass/pass, pass/fail, fail/pass, fail/fail):
    (p_o - p_e) / (1 - p_e) with p_e from the two margins; ``nan`` where it is 0/0."""
    c = _as_float(cells)
    n = c.sum(axis=-1)
    p = c / np.where(n > 0, n, 1.0)[..., None]
    po = p[..., 0] + p[..., 3]
    r = p[..., 0] + p[..., 1]  # reference passes
    j = p[..., 0] + p[..., 2]  # judge passes
    pe = r * j + (1.0 - r) * (1.0 - j)
    return np.where(n > 0, _div(po - pe, 1.0 - pe), np.nan)


def degenerate_table(cells: ArrayLike) -> NDArray[np.bool_]:
    """True where a 2x2 table ``(..., 4)`` has no rows or a constant column (an empty margin): phi and
    kappa are undefined there and so is any interval for them."""
    c = _as_float(cells)
    a_pass, a_fail = c[..., 0] + c[..., 1], c[..., 2] + c[..., 3]
    b_pass, b_fail = c[..., 0] + c[..., 2], c[..., 1] + c[..., 3]
    return (a_pass == 0) | (a_fail == 0) | (b_pass == 0) | (b_fail == 0)


def equal_tailed(draws: ArrayLike, alpha: float = 0.05) -> Interval:
    """The ``alpha/2`` and ``1 - alpha/2`` quantiles over the last axis (``nan`` where a draw is ``nan``)."""
    d = _as_float(draws)
    if d.shape[-1] == 0:
        nan = np.full(d.shape[:-1], np.nan)
        return Interval(nan, nan.copy())
    q = np.quantile(d, [alpha / 2, 1 - alpha / 2], axis=-1)
    return Interval(q[0], q[1])


def posterior_p(draws: ArrayLike, null: float = 0.0) -> NDArray[np.float64]:
    """Two-sided posterior tail probability of ``null``: ``2 min(P(θ <= null), P(θ >= null))`` over the
    last axis -- the smallest ``alpha`` at which the equal-tailed interval excludes ``null``.

    Where fewer than 20 draws fall beyond ``null`` the counted tail is too coarse to rank hypotheses for
    the false-discovery control, so the normal tail of the draws' mean and standard deviation is used.
    """
    d = _as_float(draws)
    n = d.shape[-1]
    below = (d <= null).sum(axis=-1)
    above = (d >= null).sum(axis=-1)
    counted = np.minimum(1.0, 2.0 * np.minimum(below, above) / max(n, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.abs(d.mean(axis=-1) - null) / d.std(axis=-1)
    normal = np.where(np.isfinite(z), 2.0 * stats.norm.sf(z), np.where(d.mean(axis=-1) == null, 1.0, 0.0))
    p = np.where(np.minimum(below, above) < 20, np.minimum(counted, normal), counted)
    return np.where(np.isnan(d).any(axis=-1), np.nan, p)


def fdr_bh(p: ArrayLike) -> NDArray[np.float64]:
    """Benjamini-Hochberg adjusted p-values (q-values); ``nan`` p-values are left out and stay ``nan``.

    Rejecting every hypothesis with an adjusted value <= q keeps the expected share of false discoveries
    among the rejections at or below q (for independent or positively dependent tests). Equals
    ``statsmodels.stats.multitest.multipletests(p, method="fdr_bh")[1]`` on the finite entries.
    """
    p = _as_float(p)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0:
        return out
    flat = p[ok]
    order = np.argsort(flat, kind="stable")
    scaled = flat[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    back = np.empty(m)
    back[order] = np.minimum(adjusted, 1.0)
    out[ok] = back
    return out


def pair_tables(V: ArrayLike) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.float64]]:
    """Every criterion pair's 2x2 table over the rows where both are scored: ``(iu, ju, cells)`` with
    ``cells[p]`` = counts of pass/pass, pass/fail, fail/pass, fail/fail for pair ``(iu[p], ju[p])``."""
    V = _as_matrix(V)
    k = V.shape[1]
    iu, ju = np.triu_indices(k, 1)
    M = (~np.isnan(V)).astype(np.float64)
    F = np.where(M > 0, 1.0 - V, 0.0)  # 1 where scored and failed
    n = (M.T @ M)[iu, ju]
    ff = (F.T @ F)[iu, ju]
    a_fail = (F.T @ M)[iu, ju]  # i fails, both scored
    b_fail = (M.T @ F)[iu, ju]
    cells = np.stack([n - a_fail - b_fail + ff, b_fail - ff, a_fail - ff, ff], axis=1)
    return iu, ju, cells


def phi_interval(cells: ArrayLike, n_draws: int, rng: np.random.Generator, alpha: float = 0.05) -> Interval:
    """The ``(1 - alpha)`` posterior interval of phi for 2x2 tables ``(..., 4)`` (pass/pass, pass/fail,
    fail/pass, fail/fail counts): the equal-tailed quantiles of phi over ``Dirichlet(cells + 0.5)`` draws
    (Jeffreys prior). ``nan`` -- *undefined* -- where the table is degenerate (no rows, or a column
    constant): no zero-width interval is ever returned."""
    c = _as_float(cells)
    ci = equal_tailed(phi_of_cells(dirichlet_shares(c, max(n_draws, 2), rng)), alpha).holding(phi_of_cells(c))
    bad = degenerate_table(c)
    return Interval(np.where(bad, np.nan, ci.lo), np.where(bad, np.nan, ci.hi))


def phi_ci(V: ArrayLike, n_draws: int = 1000, seed: int = 0, alpha: float = 0.05) -> PhiCI:
    """Equal-tailed ``(1 - alpha)`` posterior interval for every entry of :func:`phi_matrix` (0/1 data).

    Each pair's four cell shares are drawn from ``Dirichlet(counts + 0.5)`` (Jeffreys prior) over the
    rows where both criteria are scored, and phi is computed per draw (:func:`phi_interval`): the interval
    holds 93-97 % coverage on tables of 30-150 rows with 5-35 % failures where the percentile bootstrap
    drops to 48 % (``bench/audit_calibration.py``). An entry is ``nan`` -- *undefined*, never a zero-width
    interval -- where the observed table is degenerate (no rows, or a criterion constant on them); so is
    the diagonal, which is 1 by definition rather than a measurement.
    """
    V = _as_matrix(V)
    k = V.shape[1]
    lo = np.full((k, k), np.nan)
    hi = np.full((k, k), np.nan)
    if V.shape[0] == 0 or k < 2 or n_draws < 1:
        return PhiCI(lo, hi)
    iu, ju, cells = pair_tables(V)
    ci = phi_interval(cells, n_draws, np.random.default_rng(seed), alpha)
    lo[iu, ju] = lo[ju, iu] = ci.lo
    hi[iu, ju] = hi[ju, iu] = ci.hi
    return PhiCI(lo, hi)


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
    accuracy_lo: NDArray[np.float64]
    accuracy_hi: NDArray[np.float64]
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

    * ``accuracy``: share of rows where judge and human agree; ``accuracy_ci`` is the Jeffreys interval
      (Beta(agree + 0.5, disagree + 0.5) quantiles), which holds its coverage for small n.
    * ``kappa``: Cohen's kappa, agreement corrected for what the two marginal pass rates would produce by
      chance (0 = chance level, 1 = perfect). ``kappa_ci`` is the equal-tailed interval of kappa under the
      Dirichlet posterior of the four cells with the Jeffreys prior (0.5 per cell); ``kappa_se`` that
      posterior's standard deviation. Both are ``nan`` -- *undefined* -- when either side is constant
      (every human or every judge verdict the same): kappa then only measures the chance agreement of a
      constant column, and an interval around it would be zero-width.
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
    accuracy_ci: KappaCI
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


class Rate(NamedTuple):
    """``k`` of ``n``: the proportion with its Wilson score interval (NaN when n = 0, not a number to act on)."""

    k: int
    n: int
    rate: float
    lo: float
    hi: float

    def to_dict(self) -> dict:
        return {"k": self.k, "n": self.n, "rate": self.rate, "ci": [self.lo, self.hi]}


def wilson_interval(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for one proportion k/n: ``scipy.stats.binomtest(k, n).proportion_ci(1 - alpha,
    method="wilson")``, i.e. (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n).

    Unlike the normal interval it stays inside [0, 1] and is sensible at k = 0 or k = n and small n (the
    sizes of a rationale-quality check on one pack). ``(nan, nan)`` when n = 0: no proportion to bound.
    """
    if n <= 0:
        return math.nan, math.nan
    ci = stats.binomtest(int(k), int(n)).proportion_ci(1 - alpha, method="wilson")
    return float(ci.low), float(ci.high)


def rate(k: int, n: int, alpha: float = 0.05) -> Rate:
    """``k`` of ``n`` as a :class:`Rate` with its ``(1 - alpha)`` Wilson interval."""
    lo, hi = wilson_interval(k, n, alpha)
    return Rate(int(k), int(n), k / n if n else math.nan, lo, hi)


def jeffreys_interval(successes: ArrayLike, n: ArrayLike, alpha: float = 0.05) -> Interval:
    """Jeffreys interval for a binomial proportion: Beta(x + 1/2, n - x + 1/2) quantiles; ``nan`` for n = 0.

    Equals ``statsmodels.stats.proportion.proportion_confint(x, n, alpha, method="jeffreys")`` except at
    x = 0 and x = n, where the bound is 0 or 1 (Brown, Cai & DasGupta 2001's boundary rule, so the interval
    holds its estimate); its coverage stays near nominal for small n and proportions near 0 or 1, where the
    Wald interval collapses to zero width.
    """
    x = _as_float(successes)
    n = _as_float(n)
    ok = n > 0
    a = np.where(ok, x + 0.5, 1.0)
    b = np.where(ok, n - x + 0.5, 1.0)
    lo = stats.beta.ppf(alpha / 2, a, b)
    hi = stats.beta.ppf(1 - alpha / 2, a, b)
    rate = np.where(ok, x / np.where(ok, n, 1.0), np.nan)
    return Interval(np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)).holding(rate)


def _agreement_cells(J: NDArray[np.float64], H: NDArray[np.float64]) -> NDArray[np.float64]:
    """(k, 4) counts [human pass & judge pass, h pass & j fail, h fail & j pass, h fail & j fail]."""
    hp, hf = H == 1.0, H == 0.0
    jp, jf = J == 1.0, J == 0.0
    return np.stack([(hp & jp).sum(0), (hp & jf).sum(0), (hf & jp).sum(0), (hf & jf).sum(0)], axis=1).astype(
        np.float64
    )


def agreement_matrix(
    judge: ArrayLike,
    human: ArrayLike,
    p_pass: ArrayLike | None = None,
    alpha: float = 0.05,
    n_draws: int = 2000,
    seed: int = 0,
) -> AgreementMatrix:
    """:class:`Agreement` for every column of two aligned ``(n, k)`` sources at once (vectorised)."""
    J = _as_matrix(judge)
    H = _as_matrix(human)
    cells = _agreement_cells(J, H)
    pp, pf, fp, ff = cells.T
    counts = cells.reshape(-1, 2, 2).astype(np.int64)
    n = counts.sum(axis=(1, 2))
    bad = degenerate_table(cells)
    kappa = np.where(bad, np.nan, kappa_of_cells(cells))
    draws = kappa_of_cells(dirichlet_shares(cells, max(n_draws, 2), np.random.default_rng(seed)))
    ci = equal_tailed(draws, alpha).holding(kappa)
    acc_ci = jeffreys_interval(pp + ff, n, alpha)
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
        accuracy_lo=acc_ci.lo,
        accuracy_hi=acc_ci.hi,
        kappa=kappa,
        kappa_se=np.where(bad, np.nan, draws.std(axis=-1)),
        kappa_lo=np.where(bad, np.nan, ci.lo),
        kappa_hi=np.where(bad, np.nan, ci.hi),
        tpr=_div(ff, fp + ff),
        tnr=_div(pp, pp + pf),
        prevalence=_div(fp + ff, n),
        auc=auc,
        n_auc=n_auc,
    )


def agreement(
    judge: ArrayLike, human: ArrayLike, p_pass: ArrayLike | None = None, alpha: float = 0.05, seed: int = 0
) -> Agreement:
    """Agreement of one judge criterion (1-D 0/1/NaN) with the human column; see :class:`Agreement`."""
    j = _as_float(judge).reshape(-1, 1)
    h = _as_float(human).reshape(-1, 1)
    pp_ = None if p_pass is None else _as_float(p_pass).reshape(-1, 1)
    m = agreement_matrix(j, h, pp_, alpha=alpha, seed=seed)
    return Agreement(
        n=int(m.n[0]),
        counts=m.counts[0],
        accuracy=float(m.accuracy[0]),
        accuracy_ci=KappaCI(float(m.accuracy_lo[0]), float(m.accuracy_hi[0])),
        kappa=float(m.kappa[0]),
        kappa_se=float(m.kappa_se[0]),
        kappa_ci=KappaCI(float(m.kappa_lo[0]), float(m.kappa_hi[0])),
        tpr=float(m.tpr[0]),
        tnr=float(m.tnr[0]),
        prevalence=float(m.prevalence[0]),
        auc=float(m.auc[0]),
        n_auc=int(m.n_auc[0]),
    )


class PooledValue(NamedTuple):
    """A pooled figure with its equal-tailed interval (``nan`` where undefined)."""

    value: float
    lo: float
    hi: float


@dataclass(frozen=True, eq=False)
class PooledAgreement:
    """One judge's agreement with the humans summed up over criteria, each with a 95 % interval.

    * ``macro_kappa``: the mean of the per-criterion kappas over the ``criteria`` where kappa is defined
      (every criterion counts the same, however many labels it has).
    * ``micro_kappa``: kappa of the one 2x2 table that adds up every criterion's table (every judged
      label counts the same; rare-failure criteria weigh little).
    * ``accuracy``: share of all (example, criterion) verdicts on which judge and human agree.

    Intervals resample *examples*, so criteria judged on the same examples move together: the
    delete-one-example jackknife standard error with Student-t quantiles (n - 1 degrees of freedom),
    clipped to the statistic's range. ``bench/audit_calibration.py`` measured 93-97 % coverage at 40-150
    labelled examples where a Bayesian bootstrap of the examples gave 88-93 % (too narrow and, with the
    Jeffreys prior, pulled below the estimate). Where the jackknife is 0 -- every example leaves the
    figure unchanged, e.g. perfect agreement -- the interval is the posterior's instead (each distinct
    example pattern a Gamma(count) draw, each criterion's cells a Jeffreys Gamma(0.5)), stretched to hold
    the estimate: never zero-width. ``n`` counts examples with at least one criterion scored by both.
    """

    n: int
    criteria: int
    macro_kappa: PooledValue
    micro_kappa: PooledValue
    accuracy: PooledValue


def _pooled_figures(cells: NDArray[np.float64], defined: NDArray[np.bool_]) -> tuple[NDArray, NDArray, NDArray]:
    """(macro κ over the ``defined`` criteria, micro κ, accuracy) of tables ``(..., k, 4)``."""
    kappas = kappa_of_cells(cells)[..., defined]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a leave-one-out table can lose a criterion
        macro = np.nanmean(kappas, axis=-1) if defined.any() else np.full(cells.shape[:-2], np.nan)
    total = cells.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = (total[..., 0] + total[..., 3]) / total.sum(axis=-1)
    return macro, kappa_of_cells(total), accuracy


def pooled_agreement(
    judge: ArrayLike, human: ArrayLike, alpha: float = 0.05, n_draws: int = 2000, seed: int = 0
) -> PooledAgreement:
    """:class:`PooledAgreement` of two aligned ``(n, k)`` 0/1/NaN sources."""
    J = _as_matrix(judge)
    H = _as_matrix(human)
    k = J.shape[1]
    both = ((J == 0.0) | (J == 1.0)) & ((H == 0.0) | (H == 1.0))
    code = np.where(both, 2 * (H == 0.0) + (J == 0.0), 4).astype(np.int8)  # 0..3 as in _agreement_cells
    rows = code[both.any(axis=1)]
    cells = _agreement_cells(J, H)
    defined = ~degenerate_table(cells)
    nan = PooledValue(math.nan, math.nan, math.nan)
    if rows.shape[0] == 0 or k == 0:
        return PooledAgreement(0, 0, nan, nan, nan)
    if k <= 27:  # one base-5 integer per row: a 1-D unique is ~100x faster than unique(axis=0)
        codes, count = np.unique(rows.astype(np.int64) @ (5 ** np.arange(k, dtype=np.int64)), return_counts=True)
        patterns = (codes[:, None] // 5 ** np.arange(k, dtype=np.int64)) % 5
    else:
        patterns, count = np.unique(rows, axis=0, return_counts=True)  # (U, k), (U,)
    onehot = (patterns[:, :, None] == np.arange(4)).astype(np.float64)  # (U, k, 4)
    n = float(count.sum())
    point = _pooled_figures(cells, defined)
    loo = _pooled_figures(cells[None] - onehot, defined)  # each distinct example pattern left out once
    t = stats.t.ppf(1 - alpha / 2, max(n - 1, 1))
    posterior = None
    ok = (bool(defined.any()), not bool(degenerate_table(cells.sum(axis=0))), bool(cells.sum() > 0))
    bounds = ((-1.0, 1.0), (-1.0, 1.0), (0.0, 1.0))
    out = []
    for i in range(3):
        if not ok[i]:
            out.append(nan)
            continue
        value, drops = float(point[i]), loo[i]
        use = np.isfinite(drops)
        mean = np.sum(count[use] * drops[use]) / max(count[use].sum(), 1)
        se = math.sqrt((n - 1) / n * np.sum(count[use] * (drops[use] - mean) ** 2)) if use.any() else 0.0
        if se > 1e-12:
            lo, hi = value - t * se, value + t * se
        else:
            if posterior is None:
                posterior = _pooled_posterior(onehot, count, defined, n_draws, seed)
            ci = equal_tailed(posterior[i][np.isfinite(posterior[i])], alpha)
            # the prior keeps the posterior off a perfect 1.0: stretch the interval to hold the estimate
            lo, hi = min(float(ci.lo), value), max(float(ci.hi), value)
        out.append(PooledValue(value, float(max(lo, bounds[i][0])), float(min(hi, bounds[i][1]))))
    return PooledAgreement(int(n), int(defined.sum()), *out)


def _pooled_posterior(onehot: NDArray, count: NDArray, defined: NDArray, n_draws: int, seed: int) -> tuple:
    """Posterior draws of the pooled figures: a Gamma(count) draw per example pattern plus a Jeffreys
    Gamma(0.5) per criterion cell (every criterion's cells then follow Dirichlet(counts + 0.5))."""
    rng = np.random.default_rng(seed)
    U, k, _ = onehot.shape
    B = max(n_draws, 2)
    masses = (onehot.reshape(U, 4 * k).T @ gamma_masses(count.astype(np.float64), B, rng)).reshape(k, 4, B)
    masses = np.moveaxis(masses + gamma_masses(np.full((k, 4), JEFFREYS), B, rng), -1, 0)  # (B, k, 4)
    return _pooled_figures(masses, defined)


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
    ``labels`` wherever both raters use two labels or more.
    ``nan`` when undefined: no rows, or either rater gives one label throughout (sklearn then says 0; as for
    binary κ, a constant column agrees only by chance and its κ means nothing).
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
    if np.unique(ix).size < 2 or np.unique(iy).size < 2:
        return math.nan
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
