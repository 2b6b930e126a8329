"""Benchmark judgekit.stats against the obvious per-pair pandas / scikit-learn implementation.

Workload (full size): 100,000 examples x 10 criteria x 4 sources (one human column + 3 judge runs) of 0/1
verdicts with ~2% NaN. It times, through judgekit.stats,

* every source's phi matrix with its 95 % posterior intervals (``stats.phi_ci``, 200 draws),
* the association audit's evidence (``audit.audit_evidence``: the paired shifts of two runs against the
  least-conditioned one, the post-stratified human phi and every run − human difference, 200 draws),
* every pairwise crosstab (45 pairs x 4 sources, cell masks included),
* every agreement table (3 judge sources vs the human source, 10 criteria each, κ posterior intervals)
  and its pooled macro κ, micro κ and accuracy with intervals,

and the same results computed per pair / per criterion with ``pandas.crosstab`` and scikit-learn
(``matthews_corrcoef`` for phi and for each bootstrap replicate, ``confusion_matrix`` +
``cohen_kappa_score`` for agreement). The slow path is timed on a subset of calls and extrapolated
linearly to the full call count; the output says which.

Usage: ``python bench/stats_bench.py [--quick]``. The last line is machine-readable:
``RESULT stats_seconds=... baseline_seconds=... ratio=... target_seconds=1.0 holds=true|false``.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score, confusion_matrix, matthews_corrcoef

from judgekit import audit, stats

TARGET_SECONDS = 1.0
N_BOOT = 200


def make_sources(
    n: int, k: int, n_judges: int = 3, nan_share: float = 0.02, seed: int = 0
) -> list[np.ndarray]:
    """Human column + judge runs: correlated 0/1 verdicts, judges flip some human verdicts."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 1))
    human = (rng.normal(size=(n, k)) + 0.6 * latent > -0.5).astype(float)
    sources = [human]
    for j in range(n_judges):
        flip = rng.random((n, k)) < 0.05 + 0.05 * j
        sources.append(np.where(flip, 1.0 - human, human))
    for s in sources:
        s[rng.random((n, k)) < nan_share] = np.nan
    return sources


def stats_path(sources: list[np.ndarray], n_boot: int = N_BOOT) -> tuple[dict, dict[str, float]]:
    """Everything through judgekit.stats / judgekit.audit; returns the results and seconds per part."""
    k = sources[0].shape[1]
    pairs = list(itertools.combinations(range(k), 2))
    keys = [f"c{i}" for i in range(k)]
    t0 = time.perf_counter()
    phis = [stats.phi_matrix(V) for V in sources]
    t1 = time.perf_counter()
    cis = [stats.phi_ci(V, n_draws=n_boot, seed=0) for V in sources]
    t2 = time.perf_counter()
    evidence = audit.audit_evidence(sources[1:], ["a", "b", "c"], keys, reference=len(sources) - 2,
                                    human=sources[0], harness_ci=cis[1:], n_draws=n_boot)
    t3 = time.perf_counter()
    tabs = [[stats.crosstab(V[:, i], V[:, j]) for i, j in pairs] for V in sources]
    t4 = time.perf_counter()
    agreements = [stats.agreement_matrix(J, sources[0], n_draws=n_boot) for J in sources[1:]]
    pooled = [stats.pooled_agreement(J, sources[0], n_draws=n_boot) for J in sources[1:]]
    t5 = time.perf_counter()
    results = {"phi": phis, "ci": cis, "audit": evidence, "crosstab": tabs, "agreement": agreements, "pooled": pooled}
    return results, {"phi": t1 - t0, "intervals": t2 - t1, "audit": t3 - t2, "crosstab": t4 - t3,
                     "agreement": t5 - t4}


def _timed(fn, calls: list) -> tuple[float, list]:
    t0 = time.perf_counter()
    out = [fn(*c) for c in calls]
    return time.perf_counter() - t0, out


def _baseline_phi(a: np.ndarray, b: np.ndarray) -> float:
    ok = ~(np.isnan(a) | np.isnan(b))
    return matthews_corrcoef(a[ok], b[ok])


def _baseline_crosstab(a: np.ndarray, b: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame({"row": a, "col": b}).dropna()
    return pd.crosstab(df["row"], df["col"])


def _baseline_agreement(judge: np.ndarray, human: np.ndarray) -> tuple:
    ok = ~(np.isnan(judge) | np.isnan(human))
    cm = confusion_matrix(human[ok], judge[ok], labels=[1.0, 0.0])
    kappa = cohen_kappa_score(human[ok], judge[ok])
    tpr = cm[1, 1] / cm[1].sum()
    tnr = cm[0, 0] / cm[0].sum()
    return kappa, tpr, tnr


def baseline_path(
    sources: list[np.ndarray], n_boot: int, subset: int, boot_subset: int, seed: int = 0
) -> dict:
    """Per-pair pandas / scikit-learn timings; each part timed on ``subset`` calls and extrapolated."""
    rng = np.random.default_rng(seed)
    n, k = sources[0].shape
    pairs = list(itertools.combinations(range(k), 2))
    pair_calls = [(V[:, i], V[:, j]) for V in sources for i, j in pairs]
    agree_calls = [(J[:, c], sources[0][:, c]) for J in sources[1:] for c in range(k)]
    parts = {}

    def part(name, fn, calls, total_calls):
        take = calls[: min(subset, len(calls))]
        secs, out = _timed(fn, take)
        parts[name] = {
            "timed_calls": len(take),
            "total_calls": total_calls,
            "seconds": secs * total_calls / len(take),
        }
        return out

    phi_out = part("phi", _baseline_phi, pair_calls, len(pair_calls))
    part("crosstab", _baseline_crosstab, pair_calls, len(pair_calls))
    part("agreement", _baseline_agreement, agree_calls, len(agree_calls))
    # Bootstrap: one matthews_corrcoef per pair per replicate on resampled rows.
    boot_calls = []
    for a, b in pair_calls[:boot_subset]:
        idx = rng.integers(0, n, n)
        boot_calls.append((a[idx], b[idx]))
    secs, _ = _timed(_baseline_phi, boot_calls)
    total = len(pair_calls) * n_boot
    parts["bootstrap"] = {
        "timed_calls": len(boot_calls),
        "total_calls": total,
        "seconds": secs * total / len(boot_calls),
    }
    return {"parts": parts, "phi_subset": phi_out}


def run(quick: bool = False) -> dict:
    """Run the benchmark; returns timings, the ratio, and whether the 1 s target holds."""
    n = 20_000 if quick else 100_000
    k = 10
    sources = make_sources(n, k)
    stats_path([s[:1000] for s in sources], n_boot=10)  # warm-up (first-call overheads, BLAS threads)
    repeats = 1 if quick else 3
    runs = [stats_path(sources) for _ in range(repeats)]
    results, parts = min(runs, key=lambda r: sum(r[1].values()))
    stats_seconds = sum(parts.values())
    base = baseline_path(sources, N_BOOT, subset=10 if quick else 30, boot_subset=5 if quick else 10)

    # Sanity: both paths compute the same numbers.
    pairs = list(itertools.combinations(range(k), 2))
    flat = [(s, i, j) for s in range(len(sources)) for i, j in pairs]
    max_dphi = max(
        abs(results["phi"][s].phi[i, j] - b) for (s, i, j), b in zip(flat, base["phi_subset"], strict=False)
    )
    h, g = sources[0][:, 0], sources[1][:, 0]
    ok = ~(np.isnan(h) | np.isnan(g))
    max_dkappa = abs(results["agreement"][0].kappa[0] - cohen_kappa_score(h[ok], g[ok]))
    assert max_dphi < 1e-9 and max_dkappa < 1e-9, (max_dphi, max_dkappa)

    baseline_seconds = sum(p["seconds"] for p in base["parts"].values())
    baseline_no_boot = baseline_seconds - base["parts"]["bootstrap"]["seconds"]
    return {
        "n_examples": n,
        "n_criteria": k,
        "n_sources": len(sources),
        "n_boot": N_BOOT,
        "quick": quick,
        "repeats": repeats,
        "stats_seconds": stats_seconds,
        "stats_parts": parts,
        "baseline_seconds": baseline_seconds,
        "baseline_parts": base["parts"],
        "ratio": baseline_seconds / stats_seconds,
        "ratio_without_bootstrap": baseline_no_boot / (stats_seconds - parts["intervals"] - parts["audit"]),
        "max_abs_diff_phi": max_dphi,
        "target_seconds": TARGET_SECONDS,
        "holds": stats_seconds <= TARGET_SECONDS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="20k examples, one repeat, smaller baseline subset"
    )
    args = parser.parse_args()
    r = run(quick=args.quick)
    print(
        f"workload: {r['n_examples']:,} examples x {r['n_criteria']} criteria x {r['n_sources']} sources, "
        f"~2% NaN, {r['n_boot']} posterior draws" + (" (quick)" if r["quick"] else "")
    )
    print(f"judgekit.stats (best of {r['repeats']}):")
    for name, secs in r["stats_parts"].items():
        print(f"  {name:<16} {secs:8.3f} s")
    print(f"  {'total':<16} {r['stats_seconds']:8.3f} s   (target <= {r['target_seconds']} s)")
    print("per-pair pandas.crosstab + scikit-learn (timed on a subset of calls, extrapolated linearly):")
    for name, p in r["baseline_parts"].items():
        print(
            f"  {name:<16} {p['seconds']:8.2f} s   ({p['timed_calls']} of {p['total_calls']:,} calls timed)"
        )
    print(f"  {'total':<16} {r['baseline_seconds']:8.2f} s")
    print(
        f"ratio baseline/stats: {r['ratio']:.0f}x"
        f"  (without intervals and audit vs without the bootstrap: {r['ratio_without_bootstrap']:.0f}x)"
    )
    print(f"check: max |phi(stats) - matthews_corrcoef| over timed pairs = {r['max_abs_diff_phi']:.1e}")
    print(
        f"RESULT stats_seconds={r['stats_seconds']:.4f} baseline_seconds={r['baseline_seconds']:.2f} "
        f"ratio={r['ratio']:.1f} target_seconds={r['target_seconds']} holds={str(r['holds']).lower()}"
    )


if __name__ == "__main__":
    main()
