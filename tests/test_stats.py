"""judgekit.stats: hand-computed values (arithmetic in comments), scipy/scikit-learn as oracles,
degenerate inputs, and a few Hypothesis properties."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, pearsonr, spearmanr
from sklearn.metrics import cohen_kappa_score, matthews_corrcoef, roc_auc_score
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from judgekit import stats

NAN = math.nan


def _column_pair(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two 0/1 arrays realising a 2x2 table counts[row][col] (index 0 = pass, 1 = fail)."""
    row, col = [], []
    for r in (0, 1):
        for c in (0, 1):
            row += [1.0 - r] * int(counts[r, c])
            col += [1.0 - c] * int(counts[r, c])
    return np.array(row), np.array(col)


def _random_source(rng, n, k, nan_share=0.05, strength=0.7):
    """Correlated 0/1 columns (a shared latent factor) with scattered NaN."""
    z = rng.normal(size=(n, 1))
    V = (rng.normal(size=(n, k)) + strength * z > rng.normal(0, 0.5, size=k)).astype(float)
    V[rng.random((n, k)) < nan_share] = np.nan
    return V


# --------------------------------------------------------------------------------------------- seed 003


SEED_TABLE = np.array([[358, 8], [161, 73]])  # rows: C3 cites (pass, fail); cols: C1 answers (pass, fail)


def test_seed_003_crosstab_by_hand():
    row, col = _column_pair(SEED_TABLE)
    ct = stats.crosstab(row, col)
    np.testing.assert_array_equal(ct.counts, SEED_TABLE)
    assert ct.n == 600
    np.testing.assert_array_equal(ct.row_totals, [366, 234])
    np.testing.assert_array_equal(ct.col_totals, [519, 81])
    # col_fail_rate: 8 / 366 = 0.021858..., 73 / 234 = 0.311966...
    assert round(ct.col_fail_rate[stats.PASS], 4) == 0.0219
    assert round(ct.col_fail_rate[stats.FAIL], 4) == 0.3120
    # ratio = (73 / 234) / (8 / 366) = (73 * 366) / (234 * 8) = 26718 / 1872 = 14.2724...
    assert ct.ratio == pytest.approx(26718 / 1872)
    assert round(ct.ratio, 2) == 14.27
    # phi = (a d - b c) / sqrt(r1 r2 c1 c2)
    #     = (358*73 - 8*161) / sqrt(366 * 234 * 519 * 81)
    #     = (26134 - 1288) / sqrt(85644 * 42039) = 24846 / sqrt(3600387716) = 24846 / 60003.23 = 0.41408
    assert ct.phi == pytest.approx(24846 / math.sqrt(366 * 234 * 519 * 81))
    assert round(ct.phi, 3) == 0.414
    assert stats.phi(row, col) == pytest.approx(ct.phi)
    # The 8 citing answers that fail C1 are listable, and they are exactly that cell.
    cell = ct.cell("pass", "fail")
    assert len(cell) == 8
    assert np.all(row[cell] == 1) and np.all(col[cell] == 0)
    assert len(ct.cell("fail", "pass")) == 161


def test_crosstab_drops_unscored_rows_pairwise():
    row, col = _column_pair(SEED_TABLE)
    row = np.r_[row, NAN, 1.0, NAN]
    col = np.r_[col, 0.0, NAN, NAN]
    ct = stats.crosstab(row, col)
    assert ct.n == 600
    np.testing.assert_array_equal(ct.counts, SEED_TABLE)
    assert ct.masks.shape == (2, 2, 603)


def test_seed_003_flip_accounting():
    # C1 under single call (A) vs split (B) on 600 answers:
    #   both fail 4, fail->pass 128, pass->fail 7, both pass 600 - 139 = 461
    #   a_fail = 4 + 128 = 132, b_fail = 4 + 7 = 11
    A = np.r_[np.zeros(4), np.zeros(128), np.ones(7), np.ones(461)]
    B = np.r_[np.zeros(4), np.ones(128), np.zeros(7), np.ones(461)]
    (flip,) = stats.compare(A[:, None], B[:, None])
    assert (flip.n, flip.a_fail, flip.b_fail) == (600, 132, 11)
    assert (flip.fail_to_pass, flip.pass_to_fail) == (128, 7)
    assert flip.a_fail - flip.fail_to_pass == 4
    assert flip.a_fail - flip.fail_to_pass + flip.pass_to_fail == flip.b_fail
    np.testing.assert_array_equal(flip.fail_to_pass_rows, np.arange(4, 132))
    np.testing.assert_array_equal(flip.pass_to_fail_rows, np.arange(132, 139))
    assert flip.mcnemar_p == pytest.approx(binomtest(128, 135, 0.5).pvalue)
    assert flip.mcnemar_p < 1e-25


def test_compare_pairwise_and_per_criterion():
    A = np.array([[0, 1], [0, NAN], [1, 0], [NAN, 0], [1, 1]], dtype=float)
    B = np.array([[1, 1], [0, 1], [0, 0], [1, 1], [1, NAN]], dtype=float)
    f0, f1 = stats.compare(A, B)
    # criterion 0: rows 0,1,2,4 both scored; A fails rows 0,1; B fails rows 1,2
    assert (f0.n, f0.a_fail, f0.b_fail, f0.fail_to_pass, f0.pass_to_fail) == (4, 2, 2, 1, 1)
    assert f0.mcnemar_p == 1.0
    # criterion 1: rows 0,2,3 both scored; A fails 2,3; B fails 2
    assert (f1.n, f1.a_fail, f1.b_fail, f1.fail_to_pass, f1.pass_to_fail) == (3, 2, 1, 1, 0)
    np.testing.assert_array_equal(f1.fail_to_pass_rows, [3])


def test_all_pass_rate_and_failure_attribution():
    V = np.array([[1, 1, 1], [1, 0, 1], [NAN, 1, 1], [1, 1, 1], [0, 0, 1]], dtype=float)
    # fully scored rows: 0, 1, 3, 4 -> all pass in rows 0 and 3 -> 2 / 4
    assert stats.all_pass_rate(V) == 0.5
    np.testing.assert_array_equal(stats.failure_attribution(V), [1, 2, 0])
    assert math.isnan(stats.all_pass_rate(np.full((3, 2), NAN)))
    assert math.isnan(stats.all_pass_rate(np.empty((0, 2))))


# --------------------------------------------------------------------------------------------- phi


def test_binarize():
    out = stats.binarize([1, 2, 3, NAN, 5], 3)
    np.testing.assert_array_equal(out, [0, 0, 1, NAN, 1])
    per_col = stats.binarize([[3, 3], [4, 2]], [4, 2])
    np.testing.assert_array_equal(per_col, [[0, 1], [1, 1]])


def test_phi_matrix_matches_pearsonr_and_mcc_pairwise():
    rng = np.random.default_rng(3)
    V = _random_source(rng, 400, 5, nan_share=0.1)
    pm = stats.phi_matrix(V)
    for i in range(5):
        for j in range(5):
            ok = ~np.isnan(V[:, i]) & ~np.isnan(V[:, j])
            assert pm.n[i, j] == ok.sum()
            if i == j:
                assert pm.phi[i, j] == pytest.approx(1.0)
                continue
            r = pearsonr(V[ok, i], V[ok, j]).statistic
            assert pm.phi[i, j] == pytest.approx(r, abs=1e-12)
            assert pm.phi[i, j] == pytest.approx(matthews_corrcoef(V[ok, i], V[ok, j]), abs=1e-12)
    np.testing.assert_allclose(pm.phi, pm.phi.T)


def test_phi_degenerate_inputs_are_nan():
    V = np.array(
        [
            [1, 1, NAN, 1, 0],
            [0, 1, NAN, 1, NAN],
            [1, 1, NAN, NAN, 1],
            [0, 1, NAN, NAN, 0],
        ],
        dtype=float,
    )
    pm = stats.phi_matrix(V)
    assert math.isnan(pm.phi[0, 1])  # column 1 constant
    assert math.isnan(pm.phi[1, 1])  # constant column: even the diagonal is undefined
    assert math.isnan(pm.phi[0, 2]) and pm.n[0, 2] == 0  # all-NaN column
    assert pm.n[3, 4] == 1 and math.isnan(pm.phi[3, 4])  # a single overlapping row
    # columns 0 and 4 overlap on rows 0, 2, 3: (1,0), (1,1), (0,0) -> table [[1, 1], [0, 1]]
    # phi = (1*1 - 1*0) / sqrt(2 * 1 * 1 * 2) = 1 / 2, on n = 3
    assert pm.phi[0, 4] == pytest.approx(0.5) and pm.n[0, 4] == 3
    empty = stats.phi_matrix(np.empty((0, 3)))
    assert np.isnan(empty.phi).all() and (empty.n == 0).all()
    assert math.isnan(stats.phi([], []))
    assert math.isnan(stats.phi([1, NAN], [NAN, 0]))  # no overlap


def test_phi_hand_small():
    # a = 1 1 0 0 1, b = 1 0 0 0 1 -> table [[2, 1], [0, 2]]
    # phi = (2*2 - 1*0) / sqrt(3 * 2 * 2 * 3) = 4 / 6 = 0.6667
    assert stats.phi([1, 1, 0, 0, 1], [1, 0, 0, 0, 1]) == pytest.approx(4 / 6)


# --------------------------------------------------------------------------------------------- bootstrap


def test_bootstrap_ci_contains_point_and_shrinks_with_n():
    rng = np.random.default_rng(5)
    big = _random_source(rng, 5000, 4)
    small = big[:200]
    point = stats.phi_matrix(big).phi
    ci_big = stats.phi_bootstrap_ci(big, n_boot=400, seed=1)
    ci_small = stats.phi_bootstrap_ci(small, n_boot=400, seed=1)
    off = ~np.eye(4, dtype=bool)
    assert np.all(ci_big.lo[off] <= point[off]) and np.all(point[off] <= ci_big.hi[off])
    assert np.all((ci_big.hi - ci_big.lo)[off] < (ci_small.hi - ci_small.lo)[off])
    np.testing.assert_array_equal(np.diag(ci_big.lo), 1.0)
    np.testing.assert_allclose(ci_big.lo, ci_big.lo.T)


def test_bootstrap_cells_and_rows_methods_agree():
    # Both are exact implementations of the same row bootstrap; their intervals differ only by
    # Monte-Carlo noise (~1/sqrt(n_boot) of the interval width).
    rng = np.random.default_rng(7)
    V = _random_source(rng, 1500, 3, nan_share=0.1)
    cells = stats.phi_bootstrap_ci(V, n_boot=1000, seed=2, method="cells")
    rows = stats.phi_bootstrap_ci(V, n_boot=1000, seed=2, method="rows")
    np.testing.assert_allclose(cells.lo, rows.lo, atol=0.015)
    np.testing.assert_allclose(cells.hi, rows.hi, atol=0.015)


def test_bootstrap_is_seeded_and_handles_degenerate_columns():
    rng = np.random.default_rng(9)
    V = _random_source(rng, 300, 3)
    V[:, 2] = 1.0  # constant
    a = stats.phi_bootstrap_ci(V, n_boot=100, seed=4)
    b = stats.phi_bootstrap_ci(V, n_boot=100, seed=4)
    np.testing.assert_array_equal(a.lo, b.lo)
    assert np.isnan(a.lo[2]).all() and np.isnan(a.hi[:, 2]).all()
    assert not np.isnan(a.lo[0, 1])
    empty = stats.phi_bootstrap_ci(np.empty((0, 2)), n_boot=10)
    assert np.isnan(empty.lo).all()
    nan_only = stats.phi_bootstrap_ci(np.full((20, 2), NAN), n_boot=10)
    assert np.isnan(nan_only.hi).all()


def test_bootstrap_rows_method_for_non_binary_values():
    rng = np.random.default_rng(11)
    x = rng.normal(size=400)
    V = np.column_stack([x, x + rng.normal(size=400)])
    ci = stats.phi_bootstrap_ci(V, n_boot=300, seed=0)  # auto -> rows
    r = pearsonr(V[:, 0], V[:, 1]).statistic
    assert ci.lo[0, 1] < r < ci.hi[0, 1]


# --------------------------------------------------------------------------------------------- posterior intervals


def _tables_to_columns(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _column_pair(np.asarray(cells, dtype=float).reshape(2, 2))


@pytest.mark.parametrize("cells", [[5, 1, 1, 2], [30, 4, 0, 2], [10, 0, 3, 7], [3, 3, 3, 3]])
def test_phi_and_kappa_of_cells_match_scikit_learn(cells):
    a, b = _tables_to_columns(cells)
    assert float(stats.phi_of_cells(cells)) == pytest.approx(matthews_corrcoef(a, b), abs=1e-12)
    assert float(stats.kappa_of_cells(cells)) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    # shares give the same numbers as counts
    shares = np.asarray(cells, float) / sum(cells)
    assert float(stats.phi_of_cells(shares)) == pytest.approx(float(stats.phi_of_cells(cells)))


def test_degenerate_tables():
    bad = stats.degenerate_table([[0, 0, 0, 0], [5, 3, 0, 0], [5, 0, 3, 0], [1, 0, 0, 1], [4, 1, 1, 0]])
    # empty; a always passes; b always passes; diagonal (defined); no fail/fail cell but both vary (defined)
    np.testing.assert_array_equal(bad, [True, True, True, False, False])


def test_fdr_bh_matches_statsmodels():
    rng = np.random.default_rng(3)
    p = np.concatenate([rng.uniform(size=40), rng.uniform(0, 0.01, size=10)])
    expected = multipletests(p, alpha=0.05, method="fdr_bh")[1]
    np.testing.assert_allclose(stats.fdr_bh(p), expected, rtol=1e-12)
    with_nan = np.array([0.01, NAN, 0.04, 0.03])
    got = stats.fdr_bh(with_nan)
    assert math.isnan(got[1])
    np.testing.assert_allclose(got[[0, 2, 3]], multipletests([0.01, 0.04, 0.03], method="fdr_bh")[1])
    assert np.isnan(stats.fdr_bh([NAN, NAN])).all()


def test_jeffreys_interval_matches_statsmodels():
    x = np.array([0, 1, 7, 19, 20, 55])
    n = np.array([20, 20, 20, 20, 20, 60])
    got = stats.jeffreys_interval(x, n)
    for i in range(len(x)):
        lo, hi = proportion_confint(x[i], n[i], alpha=0.05, method="jeffreys")
        lo, hi = (0.0 if x[i] == 0 else lo), (1.0 if x[i] == n[i] else hi)  # the boundary rule
        assert got.lo[i] == pytest.approx(lo, rel=1e-9) and got.hi[i] == pytest.approx(hi, rel=1e-9)
    assert np.isnan(stats.jeffreys_interval([0], [0]).lo).all()


def test_every_interval_holds_its_own_estimate_at_the_boundaries():
    """A rate of 0 or 1 and a phi or kappa of ±1: the Jeffreys posterior never reaches them, so the interval
    is stretched to the estimate (a true value there would otherwise never be covered)."""
    assert stats.jeffreys_interval([0], [20]).lo[0] == 0.0
    assert stats.jeffreys_interval([20], [20]).hi[0] == 1.0
    same = np.array([[1, 1], [0, 0], [1, 1], [0, 0], [1, 1], [0, 0]], dtype=float)
    opposite = np.array([[1, 0], [0, 1], [1, 0], [0, 1], [1, 0], [0, 1]], dtype=float)
    for V, phi in ((same, 1.0), (opposite, -1.0)):
        ci = stats.phi_ci(V)
        assert ci.lo[0, 1] <= phi <= ci.hi[0, 1] and ci.lo[0, 1] < ci.hi[0, 1]
    m = stats.agreement_matrix(same[:, :1], same[:, 1:])
    assert m.kappa[0] == 1.0 and m.kappa_lo[0] < 1.0 == m.kappa_hi[0]


def test_gamma_masses_have_gamma_quantiles():
    # exact draws below 10, Wilson-Hilferty above: both match scipy's gamma quantiles
    from scipy.stats import gamma

    g = stats.gamma_masses(np.array([0.5, 3.0, 10.0, 80.0]), 100_000, np.random.default_rng(1))
    for a, row in zip([0.5, 3.0, 10.0, 80.0], g, strict=True):
        np.testing.assert_allclose(np.quantile(row, [0.05, 0.5, 0.95]), gamma.ppf([0.05, 0.5, 0.95], a), rtol=0.03)


def test_phi_ci_is_undefined_on_degenerate_tables_never_zero_width():
    V = np.array([[1, 1, 1], [0, 0, 1], [1, 0, 1], [0, 1, 1], [1, 1, 1]], dtype=float)  # column 2 constant
    ci = stats.phi_ci(V, n_draws=500)
    assert np.isnan(ci.lo[:, 2]).all() and np.isnan(ci.hi[2, :]).all()
    assert np.isnan(np.diag(ci.lo)).all()  # the diagonal is 1 by definition, not a measurement
    assert ci.lo[0, 1] < stats.phi_matrix(V).phi[0, 1] < ci.hi[0, 1]
    # n = 2 perfectly associated: the percentile bootstrap said [1, 1]; the posterior is wide
    two = stats.phi_interval([1, 0, 0, 1], 2000, np.random.default_rng(0))
    assert two.lo < 0 and two.hi > 0.9
    # an empty fail/fail cell no longer forces the interval below 0
    sparse = stats.phi_interval([26, 2, 2, 0], 2000, np.random.default_rng(0))
    assert sparse.lo < 0 < sparse.hi


def _coverage(draw_cells, truth, interval, reps=1500, seed=0):
    rng = np.random.default_rng(seed)
    tables = draw_cells(rng, reps)
    ci = interval(tables.astype(float), rng)
    ok = np.isfinite(ci.lo)
    return float(np.mean((ci.lo[ok] <= truth) & (truth <= ci.hi[ok]))), float(ok.mean())


@pytest.mark.parametrize("n, fail_a, fail_b, phi", [(30, 0.10, 0.10, 0.0), (60, 0.10, 0.10, 0.0), (60, 0.05, 0.30, 0.2),
                                                     (150, 0.20, 0.35, 0.5)])
def test_phi_interval_holds_its_coverage_on_sparse_tables(n, fail_a, fail_b, phi):
    # Simulated coverage (no reference implementation exists): nominal 95 %, measured within 92-98 % on
    # 1500 tables (Monte-Carlo SD ~0.6 %). The percentile bootstrap covered 48-60 % in the first two cases.
    from judgekit import planted

    p = planted.cell_probabilities(fail_a, fail_b, phi)
    cover, defined = _coverage(lambda rng, r: rng.multinomial(n, p, size=r), phi,
                               lambda t, rng: stats.phi_interval(t, 1000, rng))
    assert 0.92 <= cover <= 0.98, (cover, defined)


@pytest.mark.parametrize("n, prevalence, tpr, tnr", [(40, 0.15, 0.6, 0.9), (60, 0.10, 0.9, 0.95), (150, 0.35, 0.8, 0.7)])
def test_kappa_interval_holds_its_coverage(n, prevalence, tpr, tnr):
    p = np.array([(1 - prevalence) * tnr, (1 - prevalence) * (1 - tnr), prevalence * (1 - tpr), prevalence * tpr])
    truth = float(stats.kappa_of_cells(p))

    def interval(tables, rng):
        lo, hi = [], []
        for start in range(0, len(tables), 500):  # agreement_matrix: one column per table
            chunk = tables[start:start + 500]
            J = np.concatenate([_tables_to_columns(t)[1][:, None] for t in chunk], axis=1)
            H = np.concatenate([_tables_to_columns(t)[0][:, None] for t in chunk], axis=1)
            m = stats.agreement_matrix(J, H, n_draws=1000, seed=int(rng.integers(1 << 30)))
            lo.append(m.kappa_lo)
            hi.append(m.kappa_hi)
        return stats.Interval(np.concatenate(lo), np.concatenate(hi))

    cover, _ = _coverage(lambda rng, r: rng.multinomial(n, p, size=r), truth, interval, reps=1000)
    assert 0.92 <= cover <= 0.98, cover


def test_pooled_agreement_by_hand_and_coverage():
    # two criteria: tables [human][judge] [[5,1],[1,2]] (kappa 0.5) and [[4,0],[2,3]]
    # (po = 7/9, pe = (4/9)(6/9) + (5/9)(3/9) = 39/81, kappa = (63 - 39)/(81 - 39) = 24/42)
    h1, j1 = _column_pair(np.array([[5, 1], [1, 2]]))
    h2, j2 = _column_pair(np.array([[4, 0], [2, 3]]))
    p = stats.pooled_agreement(np.column_stack([j1, j2]), np.column_stack([h1, h2]), n_draws=2000)
    assert p.macro_kappa.value == pytest.approx((0.5 + 24 / 42) / 2)
    # pooled table [[9, 1], [3, 5]]: po = 14/18, pe = (10/18)(12/18) + (8/18)(6/18) = 168/324
    assert p.micro_kappa.value == pytest.approx((14 / 18 - 168 / 324) / (1 - 168 / 324))
    assert p.accuracy.value == pytest.approx(14 / 18)
    assert p.n == 9 and p.criteria == 2
    for v in (p.macro_kappa, p.micro_kappa, p.accuracy):
        assert v.lo < v.value < v.hi
    # coverage of macro kappa: 4 criteria whose errors share a per-example "hard" factor, n = 80
    rng = np.random.default_rng(4)
    big_h = (rng.random((200_000, 4)) > np.array([0.1, 0.2, 0.3, 0.15])).astype(float)
    hard = rng.random((200_000, 1)) < 0.2
    flip = rng.random((200_000, 4)) < np.where(hard, 0.3, 0.05)
    big_j = np.where(flip, 1 - big_h, big_h)
    truth = stats.pooled_agreement(big_j, big_h, n_draws=2).macro_kappa.value
    hits = []
    for r in range(300):
        rows = rng.choice(200_000, 80, replace=False)
        v = stats.pooled_agreement(big_j[rows], big_h[rows], n_draws=1000, seed=r).macro_kappa
        hits.append(v.lo <= truth <= v.hi)
    assert 0.90 <= np.mean(hits) <= 0.99


# --------------------------------------------------------------------------------------------- McNemar


def test_mcnemar_matches_binomtest():
    for b in range(0, 25, 3):
        for c in range(0, 25, 4):
            expected = 1.0 if b + c == 0 else binomtest(b, b + c, 0.5).pvalue
            assert stats.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9)
    # hand: b=0, c=5 -> 2 * 0.5^5 = 0.0625
    assert stats.mcnemar_exact(0, 5) == pytest.approx(0.0625)
    assert stats.mcnemar_exact(0, 0) == 1.0
    vec = stats.mcnemar_exact(np.array([0, 5, 3]), np.array([5, 0, 3]))
    np.testing.assert_allclose(vec, [0.0625, 0.0625, 1.0])


# --------------------------------------------------------------------------------------------- agreement


def test_agreement_by_hand():
    human = np.array([1, 1, 1, 1, 1, 1, 0, 0, 0, 0, NAN], dtype=float)
    judge = np.array([1, 1, 1, 1, 1, 0, 0, 0, 1, NAN, 0], dtype=float)
    a = stats.agreement(judge, human)
    # overlap: rows 0-8 -> n = 9; table [human][judge]: pass/pass 5, pass/fail 1, fail/pass 1, fail/fail 2
    np.testing.assert_array_equal(a.counts, [[5, 1], [1, 2]])
    assert a.n == 9
    assert a.accuracy == pytest.approx(7 / 9)
    assert a.tpr == pytest.approx(2 / 3)  # judge fails 2 of the 3 human fails
    assert a.tnr == pytest.approx(5 / 6)  # judge passes 5 of the 6 human passes
    assert a.prevalence == pytest.approx(3 / 9)
    # po = 7/9; pe = (6/9)(6/9) + (3/9)(3/9) = 45/81; kappa = (63/81 - 45/81) / (36/81) = 18/36 = 0.5
    assert a.kappa == pytest.approx(0.5)
    assert a.kappa_ci.lo < 0.5 < a.kappa_ci.hi
    assert math.isnan(a.auc)


def test_agreement_matches_sklearn_and_auc_orientation():
    rng = np.random.default_rng(13)
    n, k = 800, 4
    truth = rng.random((n, k)) < 0.7
    human = truth.astype(float)
    p_pass = np.clip(truth * 0.3 + rng.random((n, k)) * 0.7, 0, 1)
    judge = (p_pass > 0.5).astype(float)
    human[rng.random((n, k)) < 0.05] = np.nan
    judge[rng.random((n, k)) < 0.05] = np.nan
    m = stats.agreement_matrix(judge, human, p_pass)
    for j in range(k):
        ok = ~np.isnan(human[:, j]) & ~np.isnan(judge[:, j])
        h, g = human[ok, j], judge[ok, j]
        assert m.kappa[j] == pytest.approx(cohen_kappa_score(h, g), abs=1e-12)
        assert m.accuracy[j] == pytest.approx((h == g).mean())
        assert m.tpr[j] == pytest.approx(((g == 0) & (h == 0)).sum() / (h == 0).sum())
        ok_auc = ~np.isnan(human[:, j])
        # orientation: P(pass) should rank human passes (label 1) above human fails
        assert m.auc[j] == pytest.approx(roc_auc_score(human[ok_auc, j], p_pass[ok_auc, j]), abs=1e-12)
        assert m.auc[j] > 0.5
        assert m.n_auc[j] == ok_auc.sum()
        single = stats.agreement(judge[:, j], human[:, j], p_pass[:, j])
        assert single.kappa == pytest.approx(m.kappa[j])
        assert single.auc == pytest.approx(m.auc[j])


def test_kappa_standard_error_matches_bootstrap_spread():
    # The posterior SD of kappa should match the bootstrap SD of kappa for a large sample.
    rng = np.random.default_rng(17)
    n = 3000
    human = (rng.random(n) < 0.65).astype(float)
    flip = rng.random(n) < 0.2
    judge = np.where(flip, 1 - human, human)
    a = stats.agreement(judge, human)
    idx = rng.integers(0, n, size=(500, n))
    boot = [cohen_kappa_score(human[i], judge[i]) for i in idx]
    assert a.kappa_se == pytest.approx(np.std(boot), rel=0.12)


def test_agreement_degenerate():
    one_class = stats.agreement([1, 0, 1], [1, 1, 1], p_pass=[0.9, 0.2, 0.8])
    assert math.isnan(one_class.tpr) and math.isnan(one_class.auc)
    assert one_class.tnr == pytest.approx(2 / 3)
    # humans constant: kappa would be 0 by arithmetic, but only measures chance agreement -> undefined,
    # and so is its interval (formerly "0.00 [-0.00, 0.00]")
    assert math.isnan(one_class.kappa) and math.isnan(one_class.kappa_ci.lo) and math.isnan(one_class.kappa_se)
    judge_constant = stats.agreement([1, 1, 1, 1], [1, 0, 1, 0])
    assert math.isnan(judge_constant.kappa) and math.isnan(judge_constant.kappa_ci.hi)
    assert judge_constant.accuracy == 0.5 and judge_constant.accuracy_ci.lo < 0.5 < judge_constant.accuracy_ci.hi
    # both raters constant and equal: pe = 1 -> kappa undefined
    same = stats.agreement([1, 1, 1], [1, 1, 1])
    assert math.isnan(same.kappa) and same.accuracy == 1.0
    none = stats.agreement([NAN, 1], [0, NAN])
    assert none.n == 0
    assert all(math.isnan(x) for x in (none.accuracy, none.kappa, none.tpr, none.tnr, none.prevalence))
    assert math.isnan(none.kappa_ci.lo)
    empty = stats.agreement([], [])
    assert empty.n == 0 and math.isnan(empty.kappa)


# --------------------------------------------------------------------------------------------- scale


def test_scale_statistics_by_hand():
    a = np.array([1, 2, 3, 4, 5, NAN])
    b = np.array([1, 3, 3, 5, NAN, 2])
    # overlap rows 0-3: |0| + |1| + |0| + |1| = 2 -> 2 / 4
    assert stats.mean_abs_delta(a, b) == 0.5
    assert stats.weighted_kappa([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == 1.0
    assert math.isnan(stats.mean_abs_delta([NAN], [1]))
    assert math.isnan(stats.weighted_kappa([3, 3], [3, 3]))  # single shared label: expected disagreement 0
    assert math.isnan(stats.weighted_kappa([5, 5, 5, 5], [1, 3, 4, 5]))  # one constant rater: chance only
    assert math.isnan(stats.weighted_kappa([], []))
    assert math.isnan(stats.spearman([1, 2], [3, NAN]))
    assert math.isnan(stats.spearman([1, 2, 3], [4, 4, 4]))


@pytest.mark.parametrize("weights", ["quadratic", "linear", None])
def test_weighted_kappa_matches_sklearn(weights):
    rng = np.random.default_rng(19)
    a = rng.integers(1, 6, 500).astype(float)
    b = np.clip(a + rng.integers(-1, 2, 500), 1, 5)
    a[::37] = np.nan
    ok = ~np.isnan(a)
    expected = cohen_kappa_score(a[ok], b[ok], weights=weights, labels=[1, 2, 3, 4, 5])
    assert stats.weighted_kappa(a, b, weights=weights) == pytest.approx(expected, abs=1e-12)


def test_weighted_kappa_skips_half_points():
    a = [1, 2, 3.5, 4]
    b = [1, 2, 3, 5]
    assert stats.weighted_kappa(a, b) == pytest.approx(stats.weighted_kappa([1, 2, 4], [1, 2, 5]))


def test_spearman_matches_scipy():
    rng = np.random.default_rng(23)
    a = rng.integers(1, 6, 300).astype(float)
    b = np.clip(a + rng.integers(-2, 3, 300), 1, 5)
    b[::11] = np.nan
    ok = ~np.isnan(b)
    assert stats.spearman(a, b) == pytest.approx(spearmanr(a[ok], b[ok]).statistic, abs=1e-12)


# --------------------------------------------------------------------------------------------- humans


def test_consensus_majority_and_ties():
    L = np.array(
        [
            [[1, 0], [1, NAN], [0, NAN]],
            [[1, 1], [0, NAN], [NAN, NAN]],
            [[0, 1], [NAN, NAN], [NAN, NAN]],
        ]
    )  # 3 annotators x 3 examples x 2 criteria
    out = stats.consensus(L)
    # (1,1,0) -> 1; (0,1,1) -> 1; (1,0) tie -> nan; nobody -> nan; (0) -> 0; nobody -> nan
    np.testing.assert_array_equal(out, [[1, 1], [NAN, NAN], [0, NAN]])


def test_consensus_scale():
    L = np.array([[3, 4, 5, NAN], [4, 4, 1, NAN], [4, NAN, 2, NAN]], dtype=float)
    # medians: (3,4,4) -> 4; (4,4) -> 4; (5,1,2) -> 2; nobody -> nan
    np.testing.assert_array_equal(stats.consensus_scale(L), [4, 4, 2, NAN])
    # majority: 4; 4; three-way tie -> nan; nan
    np.testing.assert_array_equal(stats.consensus_scale(L, "majority"), [4, 4, NAN, NAN])
    np.testing.assert_array_equal(stats.consensus_scale(np.array([[3.0], [4.0]])), [3.5])
    assert np.isnan(stats.consensus_scale(np.full((2, 3), NAN), "majority")).all()


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4-coder x 12-unit reliability
# data with missing values; published: nominal .743, ordinal .815, interval .849, ratio .797.
KRIPPENDORFF_DATA = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    ]
)


@pytest.mark.parametrize(
    ("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_krippendorff_classic_example(level, published):
    assert round(stats.krippendorff_alpha(KRIPPENDORFF_DATA, level), 3) == published


def test_krippendorff_small_by_hand_and_degenerate():
    # 2 coders, 3 units: (0,0), (1,1), (0,1). Coincidences: o00 = 2, o11 = 2, o01 = o10 = 1; n_c = (3, 3),
    # n = 6. alpha = 1 - (n - 1) * sum(o * d) / sum(n_c n_k d) = 1 - 5 * 2 / 18 = 0.4444
    L = np.array([[0, 1, 0], [0, 1, 1]], dtype=float)
    assert stats.krippendorff_alpha(L) == pytest.approx(1 - 10 / 18)
    assert stats.krippendorff_alpha(np.array([[1, 2, 3], [1, 2, 3]], dtype=float), "interval") == 1.0
    assert math.isnan(stats.krippendorff_alpha(np.array([[2, 2], [2, 2]], dtype=float)))  # one value
    assert math.isnan(stats.krippendorff_alpha(np.array([[1, NAN], [NAN, 2]])))  # nothing pairable
    assert math.isnan(stats.krippendorff_alpha(np.full((3, 4), NAN)))
    assert math.isnan(stats.krippendorff_alpha(np.empty((0, 0))))


# --------------------------------------------------------------------------------------------- properties


verdict = st.sampled_from([0.0, 1.0, NAN])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(verdict, verdict), max_size=60))
def test_phi_symmetric_bounded_and_crosstab_consistent(pairs):
    a = np.array([p[0] for p in pairs], dtype=float)
    b = np.array([p[1] for p in pairs], dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # degenerate input must not even warn
        ab, ba = stats.phi(a, b), stats.phi(b, a)
        ct = stats.crosstab(a, b)
    assert (math.isnan(ab) and math.isnan(ba)) or ab == pytest.approx(ba)
    assert math.isnan(ab) or -1.0 <= ab <= 1.0
    overlap = int((~np.isnan(a) & ~np.isnan(b)).sum())
    assert ct.counts.sum() == ct.n == overlap
    assert ct.masks.sum() == overlap
    assert (math.isnan(ct.phi) and math.isnan(ab)) or ct.phi == pytest.approx(ab)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(verdict, min_size=3, max_size=3), min_size=1, max_size=5))
def test_consensus_is_symmetric_under_relabelling(annotators):
    L = np.array(annotators, dtype=float)  # (n_annotators, 3 examples)
    flipped = np.where(np.isnan(L), np.nan, 1.0 - L)
    out = stats.consensus(L)
    out_flipped = stats.consensus(flipped)
    np.testing.assert_array_equal(np.where(np.isnan(out), np.nan, 1.0 - out), out_flipped)
