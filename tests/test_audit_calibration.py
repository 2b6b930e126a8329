"""The audit's calibration claim, checked end to end on planted truth: ``bench/audit_calibration.py --quick``
(the interval-method comparison on sparse tables, and two planted corpora graded by the simulated judge,
audited against 80-label human columns) meets the issue's targets. The full benchmark (``make bench``)
runs three structures, three human-column sizes and more seeds; its table is in the README."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import audit_calibration  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def result():
    return audit_calibration.run(quick=True, log=lambda _: None)


def test_the_chosen_interval_beats_the_alternatives_on_sparse_tables(result):
    cov = result["methods"]["coverage"]
    chosen = np.array(cov["phi"]["Dirichlet, Jeffreys prior 0.5 (chosen)"])
    wald = np.array(cov["phi"]["delta-method Wald on Fisher z"])
    # --quick draws 200 tables per scenario (Monte Carlo SE ~0.016 at 95 %): the worst scenario may read
    # ~2 SE under its true coverage (0.92 in the full benchmark's 1000 tables), hence 0.88 for the minimum
    assert 0.93 <= chosen.mean() <= 0.97 and chosen.min() >= 0.88, chosen
    assert wald.min() < 0.8  # the sparse tables are where a large-sample interval breaks
    kappa = np.array(cov["kappa"]["Dirichlet, Jeffreys prior 0.5 (chosen)"])
    former = np.array(cov["kappa"]["Fleiss–Cohen–Everitt Wald (former)"])
    assert 0.93 <= kappa.mean() <= 0.97 and former.min() < kappa.min()
    paired = np.array(cov["paired"]["joint Dirichlet, 0.5/4 per cell (chosen)"])
    assert 0.92 <= paired.mean() <= 0.97


def test_the_audit_meets_its_targets_on_planted_truth(result):
    s = result["structures"]["main"]
    assert s["induced_recall"][0] >= 0.8 and s["induced_recall"][1] >= 20
    assert s["null_called_real"][0] <= 0.05
    assert s["induced_at_g0"][0] <= 0.02
    assert s["reversal_blamed"][0] >= 0.8
    assert s["real_called_none"][0] <= 0.05
    # the printed intervals (human phi, harness phi, paired shifts, harness - human) cover near 95 %
    for kind in ("human phi, n = 80", "harness phi (600 answers)", "single − split (600 answers)",
                 "harness − human, n = 80"):
        assert 0.90 <= s["cover"][kind][0] <= 0.99, (kind, s["cover"][kind])
