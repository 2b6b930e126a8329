"""Reports: statistics from the store, assembled into report objects and rendered.

Where this sits in the flow: :mod:`judgekit.store` holds verdicts and labels; :mod:`judgekit.sources`
(the layer below) loads each *source* (a run, one annotator, or the human consensus) into an
``(n_examples, n_criteria)`` float matrix aligned on the dataset's example index; this module takes
sources, calls the pure functions of :mod:`judgekit.stats`, and returns frozen dataclasses. The loaders
stay importable from here (``reports.load_run``, ``reports.load_human``, …). Each report renders as a
JSON-able dict (``to_dict``; the shapes of design.md's "Contracts other tools rely on") and as a
plain-text table (``render_*_table``); the whole workbench view (:func:`build_report`) as the tables of
:func:`report_tables`, written out as Markdown here (:func:`render_markdown`) and as a self-contained
HTML page with figures by :func:`judgekit.figures.render_html`. This module draws nothing: frames and
figures (the pages, the notebook API's ``to_frame()`` / ``figure()``) live in the layer above,
:mod:`judgekit.figures`. The CLI (``cli_report.py``) and the dashboard pages are thin layers over these
functions.

Conventions: 1.0 = pass, 0.0 = fail, NaN = unscored / unlabelled / unresolved. Scale criteria enter
binary views through ``pass_at``. Statistics over two columns use the rows where both are present and
report that n. ``to_dict`` output may hold NaN; :func:`jsonable` turns it into ``None`` (JSON ``null``).
"""

from __future__ import annotations

import html
import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import audit, noise, stats, store
from judgekit.annotators import REFERENCE_ANNOTATOR, reliability
from judgekit.numtext import fmt, interval_text  # noqa: F401 - interval_text: public here too
from judgekit.pricing import (  # noqa: F401 - public here too (reports.price_calls, …)
    DEFAULT_PRICES,
    FREE_JUDGE_KINDS,
    PRICES_FILE,
    Price,
    imported_cost,
    load_prices,
    price_calls,
    totals_cost,
)
from judgekit.rawtext import excerpt
from judgekit.sources import (  # the loaders, public here too (reports.load_run, …)
    ExampleIndex,
    Source,
    SourceKind,
    criteria_per_call,
    example_index,
    human_annotators,
    label_tensor,
    load_annotator,
    load_human,
    load_run,
    load_sources,
    resolve_dataset,
    run_sample,
    union_keys,
    warm_cache,
)

__all__ = [
    "AgreementReport",
    "AnnotatorAgreement",
    "AuditRow",
    "CompareReport",
    "CostSummary",
    "CrosstabReport",
    "ExampleIndex",
    "PhiColumn",
    "PhiReport",
    "Price",
    "Report",
    "Source",
    "agreement_for",
    "agreement_report",
    "annotator_agreement",
    "association_audit",
    "build_report",
    "compare_runs",
    "compare_sources",
    "criteria_per_call",
    "crosstab_report",
    "example_index",
    "imported_cost",
    "jsonable",
    "label_tensor",
    "load_annotator",
    "human_annotators",
    "load_human",
    "load_prices",
    "load_run",
    "load_sources",
    "phi_report",
    "price_calls",
    "render_agreement_table",
    "render_compare_table",
    "render_crosstab_table",
    "render_markdown",
    "render_phi_table",
    "report_tables",
    "render_runs_table",
    "resolve_dataset",
    "run_cost",
    "run_sample",
    "runs_report",
    "judge_vs_judge",
    "warm_cache",
]

Outcome = Literal["pass", "fail"]
OUTCOMES: tuple[Outcome, Outcome] = ("pass", "fail")


# --------------------------------------------------------------------------------------------- JSON


def jsonable(x: Any) -> Any:
    """``x`` with numpy scalars/arrays turned into Python values and every NaN/inf into ``None``."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, bool | np.bool_):
        return bool(x)
    if isinstance(x, int | np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        f = float(x)
        return f if math.isfinite(f) else None
    if hasattr(x, "isoformat"):
        return x.isoformat()
    return x


def _round(x: float, digits: int) -> float:
    x = float(x)
    return round(x, digits) if math.isfinite(x) else math.nan


# --------------------------------------------------------------------------------------------- crosstab


@dataclass(frozen=True, eq=False)
class CrosstabReport:
    """Seed 003's table for one criterion pair under one source, with example ids per cell."""

    row: str
    col: str
    source: str
    judge: str
    table: stats.Crosstab
    cells: dict[str, dict[str, list[str]]]
    message: str | None = None

    def to_dict(self) -> dict:
        t = self.table
        return {
            "row": self.row,
            "col": self.col,
            "n": t.n,
            "counts": {
                r: {c: int(t.counts[i, j]) for j, c in enumerate(OUTCOMES)} for i, r in enumerate(OUTCOMES)
            },
            "row_totals": {r: int(t.row_totals[i]) for i, r in enumerate(OUTCOMES)},
            "col_fail_rate": {r: _round(t.col_fail_rate[i], 4) for i, r in enumerate(OUTCOMES)},
            "ratio": _round(t.ratio, 2),
            "phi": _round(t.phi, 3),
            "source": self.source,
            "judge": self.judge,
            "cells": self.cells,
            "message": self.message,
        }


def crosstab_report(source: Source, row: str, col: str) -> CrosstabReport:
    """Cross-tabulate criteria ``row`` × ``col`` under ``source`` (binary view, rows where both scored)."""
    if row == col:
        raise ValueError(f"--row and --col name the same criterion {row!r}")
    i, j = source.col(row), source.col(col)
    t = stats.crosstab(source.binary[:, i], source.binary[:, j])
    cells = {r: {c: source.index.ext_ids(t.cell(r, c)) for c in OUTCOMES} for r in OUTCOMES}
    message = None
    if t.n == 0:
        message = f"no example has both {row} and {col} scored under {source.key}: nothing to cross-tabulate"
    elif math.isnan(t.phi):
        constant = [k for k, tot in ((row, t.row_totals), (col, t.col_totals)) if (tot == 0).any()]
        message = f"{' and '.join(constant)} constant under {source.key}: phi and the ratio undefined"
    elif math.isnan(t.ratio):  # phi defined, but no failure of col among the answers passing row
        message = (f"ratio undefined: {col} never fails where {row} passes (0 of {int(t.row_totals[0])}), "
                   "so there is no rate to compare with")
    return CrosstabReport(row, col, source.key, source.judge, t, cells, message)


def render_crosstab_table(report: CrosstabReport) -> str:
    """The seed's layout: counts, row totals in parentheses, column failure rate within each row."""
    d = report.to_dict()
    t = report.table
    width = max(len(report.row), 6)
    lines = [
        f"{report.source}  ({report.judge})",
        f"{'':{width + 7}}{report.col}",
        f"{'':{width + 7}}{'pass':>8} {'fail':>8}",
    ]
    for i, r in enumerate(OUTCOMES):
        label = f"{report.row if i == 0 else '':<{width}}  {r:<4}"
        rate = t.col_fail_rate[i]
        rate_s = "—" if math.isnan(rate) else f"{rate:.1%}"
        lines.append(
            f"{label} {t.counts[i, 0]:>8} {t.counts[i, 1]:>8}   ({t.row_totals[i]})   "
            f"{report.col} fails: {rate_s}"
        )
    ratio = "—" if d["ratio"] is None or math.isnan(d["ratio"]) else f"{d['ratio']:.2f}"
    ph = "—" if math.isnan(t.phi) else f"{t.phi:.3f}"
    lines.append(f"n {t.n}   ratio {ratio}   phi {ph}")
    if report.message:
        lines.append(f"note: {report.message}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- phi


@dataclass(frozen=True, eq=False)
class PhiColumn:
    """One source's phi matrix with 95 % posterior intervals and the reasons behind every undefined entry."""

    source: str
    judge: str
    kind: SourceKind
    n: int
    phi: NDArray[np.float64]
    n_matrix: NDArray[np.int64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    notes: list[str]
    criterion_notes: dict[str, str]

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "judge": self.judge,
            "n": self.n,
            "matrix": self.phi,
            "n_matrix": self.n_matrix,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "notes": self.notes,
            "criterion_notes": self.criterion_notes,
        }


class AuditRow(NamedTuple):
    """The association audit of one criterion pair (:func:`judgekit.audit.association_verdict`).

    ``values``: per source (each run, and the human column) ``(phi, lo, hi)`` -- a run's phi over the
    answers it judged, the humans' phi post-stratified on the reference run's cells; ``reasons`` says why
    an entry is undefined. ``evidence`` holds the paired comparisons the verdict rests on; ``label_more``
    what would decide an undecided pair.
    """

    a: str
    b: str
    values: dict[str, tuple[float, float, float]]
    verdict: str
    induced_by: list[str]
    note: str
    distorted_by: list[str] = []
    reasons: dict[str, str] = {}
    evidence: audit.PairEvidence | None = None
    label_more: audit.LabelMore | None = None
    noise_floor: float = math.nan  # the pair's noise floor the verdict read shifts against (nan: unknown)

    def to_dict(self) -> dict:
        values = {}
        for k, v in self.values.items():
            values[k] = {"phi": v[0], "lo": v[1], "hi": v[2]}
            if k in self.reasons:
                values[k]["reason"] = self.reasons[k]
        e = self.evidence
        return {
            "a": self.a,
            "b": self.b,
            "values": values,
            "verdict": self.verdict,
            "induced_by": self.induced_by,
            "note": self.note,
            "distorted_by": self.distorted_by,
            "reference": e.reference if e else None,
            "evidence": None if e is None else {
                "human": e.human.to_dict() if e.human is not None else None,
                "shift": {k: x.to_dict() for k, x in e.shift.items()},
                "vs_human": {k: x.to_dict() for k, x in e.vs_human.items()},
            },
            "label_more": self.label_more.to_dict() if self.label_more else None,
            "noise_floor": self.noise_floor if math.isfinite(self.noise_floor) else None,
        }


@dataclass(frozen=True, eq=False)
class PhiReport:
    criteria: list[str]
    columns: list[PhiColumn]
    audit: list[AuditRow]
    human: str | None
    n_boot: int
    reference: str | None = None
    noise_floor: str | None = None  # where the audit's noise floor comes from (None: unknown, counted as 0)

    def to_dict(self) -> dict:
        return {
            "criteria": self.criteria,
            "columns": [c.to_dict() for c in self.columns],
            "audit": [a.to_dict() for a in self.audit],
            "human": self.human,
            "n_boot": self.n_boot,
            "reference": self.reference,
            "noise_floor": self.noise_floor,
            "interval": INTERVAL_NOTE,
            "fdr": FDR_NOTE,
        }

    def column(self, source: str) -> PhiColumn:
        for c in self.columns:
            if c.source == source:
                return c
        raise KeyError(source)


VERDICT_LEGEND = (
    "real: the humans see it; distorted by H: real, but H changes its size or sign; induced by H: H shows more "
    "than the reference harness on the same answers and the humans do not back it; none: the humans' interval "
    "lies within ±0.2; undecided: label about k more answers from the named cells to decide."
)
INTERVAL_NOTE = (
    "95% equal-tailed posterior intervals: Dirichlet posterior of the 2×2 cells with the Jeffreys prior; "
    "paired differences from one joint posterior over the answers"
)
FDR_NOTE = (
    f"false discovery rate {audit.FDR_Q:.0%} (Benjamini–Hochberg) within each kind of evidence — humans' phi ≠ 0, "
    "harness − reference, harness − humans — across all pairs and harnesses"
)


def undefined_phi_notes(src: Source, name: str | None = None) -> dict[str, str]:
    """Why a criterion's phi is undefined under a source, one sentence per criterion key — what the CLI,
    the HTML report and the dashboard show where the number would be ("every verdict of cites_source
    under run X is pass (120 of 120): phi is undefined"). ``name`` names the source (default its key)."""
    name = name or src.key
    notes = {}
    B = src.binary[src.covered]
    for j, key in enumerate(src.keys):
        col = B[:, j]
        scored = col[~np.isnan(col)]
        if key in src.missing:
            notes[key] = f"{key} is not a criterion of {name}: phi is undefined"
        elif scored.size == 0:
            notes[key] = f"{key} has no scored {src.noun} under {name}: phi is undefined"
        elif np.all(scored == scored[0]):
            outcome = "pass" if scored[0] == 1.0 else "fail"
            notes[key] = (f"every {src.noun} of {key} under {name} is {outcome} ({scored.size} of {scored.size}): "
                          "phi is undefined")
    return notes


def phi_column(src: Source, n_boot: int = 1000, seed: int = 0, name: str | None = None) -> PhiColumn:
    """Phi matrix and 95 % posterior intervals (:func:`stats.phi_ci`, ``n_boot`` draws) over the examples
    the source covers; undefined entries are ``nan`` with the reason in ``notes`` (naming the source by
    ``name``, default its key)."""
    V = src.binary[src.covered]
    pm = stats.phi_matrix(V)
    ci = stats.phi_ci(V, n_draws=n_boot, seed=seed)
    crit_notes = undefined_phi_notes(src, name)
    notes = list(crit_notes.values())
    if src.n == 0:
        notes.insert(0, f"{src.key} has no scored {src.noun}s: every phi is undefined")
    return PhiColumn(src.key, src.judge, src.kind, src.n, pm.phi, pm.n, ci.lo, ci.hi, notes, crit_notes)


def _human_column(columns: Sequence[PhiColumn]) -> PhiColumn | None:
    return next((c for c in columns if c.kind == "human"), None) or next(
        (c for c in columns if c.kind == "annotator"), None
    )


def reference_run(sources: Sequence[Source], prefer: str | None = None) -> Source | None:
    """The least-conditioned run, the audit's reference: ``prefer`` (a run name or source key) if given;
    else the fewest criteria per call (split before grouped before single), a run whose harness is
    unknown (imported) only after those that say; ties go to the run whose associations are weakest
    overall (mean |phi| over its defined pairs) -- conditioning only ever adds association -- then to
    the first. None without runs."""
    runs = [src for src in sources if src.kind == "run"]
    if not runs:
        return None
    if prefer:
        for r in runs:
            if prefer in (r.key, r.key.removeprefix("run:")):
                return r
        raise ValueError(f"--reference {prefer}: not one of the runs ({', '.join(r.key for r in runs)})")

    def mean_abs_phi(r: Source) -> float:
        P = stats.phi_matrix(r.binary[r.covered]).phi
        off = P[~np.eye(len(P), dtype=bool)]
        off = np.abs(off[np.isfinite(off)])
        return float(off.mean()) if off.size else math.inf

    rank = {id(r): (r.per_call is None, r.per_call or 0) for r in runs}
    best = [r for r in runs if rank[id(r)] == min(rank.values())]
    return best[0] if len(best) == 1 else min(best, key=lambda r: (mean_abs_phi(r), runs.index(r)))


def association_audit(
    sources: Sequence[Source],
    columns: Sequence[PhiColumn],
    criteria: Sequence[str],
    n_draws: int = 1000,
    seed: int = 0,
    reference: str | None = None,
    noise_floor: noise.NoiseFloor | None = None,
    run_ci: dict[str, stats.PhiCI] | None = None,
) -> list[AuditRow]:
    """For every criterion pair: each run's phi, the humans' phi, the paired comparisons between them
    (:func:`judgekit.audit.audit_evidence`) and the verdict (:func:`judgekit.audit.association_verdict`):
    real, induced by a harness, distorted by a harness, none, or undecided with how many more labels
    would decide it.

    ``sources`` and ``columns`` are parallel. The human column is the ``human`` source if present, else the
    first annotator; other annotator columns are not harnesses and stay out of the verdict. Without a
    human column the verdict is ``"no human column"`` (the harness shifts are still measured).
    ``noise_floor`` (from repeat runs, :func:`judgekit.noise.find_floor`): no harness is blamed for a shift
    within its pair's floor. ``run_ci``: each run's phi intervals over every answer it judged, by source key,
    where ``columns`` count fewer answers (default: the columns' own).
    """
    human_col = _human_column(columns)
    runs = [(src, col) for src, col in zip(sources, columns, strict=True) if src.kind == "run"]
    ref = reference_run([src for src, _ in runs], reference)
    human_src = next((src for src, col in zip(sources, columns, strict=True) if col is human_col), None)
    if not runs and human_src is None:
        return []
    ev = audit.audit_evidence(
        [src.binary for src, _ in runs],
        [src.key for src, _ in runs],
        criteria,
        reference=next((i for i, (src, _) in enumerate(runs) if src is ref), None),
        human=human_src.binary if human_src is not None else None,
        human_key=human_src.key if human_src is not None else "human",
        harness_ci=[run_ci[src.key] if run_ci else stats.PhiCI(col.ci_low, col.ci_high) for src, col in runs],
        n_draws=n_draws,
        seed=seed,
    )
    out = []
    for e in ev.pairs:
        floor = noise_floor.pair_floor(e.a, e.b) if noise_floor is not None else math.nan
        v = audit.association_verdict(e, floor)
        values = {k: (x.value, x.lo, x.hi) for k, x in e.harness.items()}
        reasons = {k: x.reason for k, x in e.harness.items() if x.reason}
        if e.human is not None:
            values[e.human_key] = (e.human.value, e.human.lo, e.human.hi)
            if e.human.reason:
                reasons[e.human_key] = e.human.reason
        out.append(AuditRow(e.a, e.b, values, v.verdict, list(v.induced_by), v.note, list(v.distorted_by),
                            reasons, e, v.label_more, floor))
    return out


def phi_report(
    sources: Sequence[Source], n_boot: int = 1000, seed: int = 0, reference: str | None = None,
    matrices_over: NDArray[np.bool_] | None = None, names: Sequence[str] | None = None,
    noise_floor: noise.NoiseFloor | None = None,
) -> PhiReport:
    """Phi matrices (with intervals) of every source on one criteria list, plus the association audit;
    ``reference`` names the run to compare the others with (default: :func:`reference_run`).
    ``matrices_over``: the answers (rows of the sources' index, e.g. the ones the humans labelled) the
    matrices count; the audit still counts every answer. ``names``: how the undefined-phi notes name each
    source (default: its key). ``noise_floor``: the judge's noise floor from repeat runs
    (:func:`judgekit.noise.find_floor`), read by the audit."""
    stats.check_draws(n_boot)
    keys = union_keys(sources)
    sources = [src.select(keys) for src in sources]
    # one restricted copy at a time: at 100k answers each is ~10 MB, and the audit's draws are the peak
    columns = [phi_column(src if matrices_over is None else src.only(matrices_over), n_boot=n_boot, seed=seed,
                          name=name)
               for src, name in zip(sources, names or [None] * len(sources), strict=True)]
    human = _human_column(columns)
    ref = reference_run(sources, reference)
    # the audit counts every answer each run judged, whatever the matrices count: its runs' own intervals are
    # those the unrestricted columns print (the same draws), so the toggle never changes a verdict
    run_ci = None if matrices_over is None else {
        src.key: stats.phi_ci(src.binary[src.covered], n_draws=n_boot, seed=seed) for src in sources
        if src.kind == "run"}
    rows = association_audit(sources, columns, keys, n_draws=n_boot, seed=seed, reference=ref.key if ref else None,
                             noise_floor=noise_floor, run_ci=run_ci)
    floor = (f"repeat runs {' and '.join(noise_floor.runs[:2])} ({noise_floor.harness}, n = {noise_floor.n})"
             if noise_floor is not None else None)
    return PhiReport(keys, columns, rows, human.source if human else None, n_boot, ref.key if ref else None, floor)


def _f(x: float, spec: str = ".2f") -> str:
    return fmt(x, spec, missing="—")


def render_phi_table(report: PhiReport) -> str:
    keys = report.criteria
    w = max([len(k) for k in keys] + [8])
    out = []
    for c in report.columns:
        out.append(f"{c.source}  ({c.judge})  n={c.n}")
        out.append(f"{'':{w}} " + " ".join(f"{k[:8]:>8}" for k in keys))
        for i, k in enumerate(keys):
            out.append(f"{k:<{w}} " + " ".join(f"{_f(c.phi[i, j]):>8}" for j in range(len(keys))))
        out += [f"  note: {n}" for n in c.notes]
        out.append("")
    if report.audit:
        out.append("association audit" + ("" if report.human else " (no human column)")
                   + (f"; reference harness {report.reference}" if report.reference else "")
                   + f"; noise floor: {report.noise_floor or 'unknown (no repeat runs), counted as 0'}")
        out.append(f"  {INTERVAL_NOTE}; {FDR_NOTE}")
        for a in report.audit:
            out.append(f"  {a.a} × {a.b}: {audit_verdict_text(a)}")
            out.append("      " + "   ".join(f"{k} {phi_with_interval(v)}" for k, v in a.values.items()))
            out.append(f"      {a.note}")
    return "\n".join(out).rstrip()


def phi_with_interval(v: tuple[float, float, float]) -> str:
    """``+0.42 [+0.33, +0.50]``, or ``undefined`` -- never a number where the quantity has none."""
    if not math.isfinite(v[0]):
        return "undefined"
    return f"{v[0]:+.2f} [{v[1]:+.2f}, {v[2]:+.2f}]"


def audit_verdict_text(a: AuditRow) -> str:
    """The verdict with whom it blames: ``induced by run:single``, ``distorted by run:single``."""
    if a.induced_by:
        return f"{a.verdict} by {', '.join(a.induced_by)}"
    if a.distorted_by:
        return f"{a.verdict} by {', '.join(a.distorted_by)}"
    return a.verdict


# ------------------------------------------------------------------------------------------- prices and cost


@dataclass(frozen=True)
class CostSummary:
    """What a run cost: calls and tokens (from ``calls`` rows, summed in SQL), latency, wall time, money."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    latency_p50: float | None
    latency_p95: float | None
    wall_s: float
    retries: int
    failed_calls: int
    usd: float | None
    model: str | None = None
    note: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run_cost(s: Session, run: store.Run, prices: dict[str, Price] | None = None) -> CostSummary:
    """A run's calls, tokens and latency (:func:`judgekit.store.run_totals`, the count behind ``run.totals``)
    and what they cost at ``prices``."""
    t = store.run_totals(s, run.id)
    calls, prompt, completion, cached = t["calls"], t["prompt_tokens"], t["completion_tokens"], t["cached_tokens"]
    retries, failed, p50, p95 = t["retries"], t["failed_calls"], t["latency_p50"], t["latency_p95"]
    judge = s.get(store.Judge, run.judge_id)
    usd, note = totals_cost(t | {"usd": (run.totals or {}).get("usd")}, judge.kind if judge else None,
                            judge.model if judge else None, prices)
    return CostSummary(
        int(calls),
        int(prompt),
        int(completion),
        int(cached),
        p50,
        p95,
        float(run.wall_s or 0.0),
        int(retries),
        int(failed),
        usd,
        judge.model if judge else None,
        note,
    )


# --------------------------------------------------------------------------------------------- compare


@dataclass(frozen=True, eq=False)
class CompareReport:
    """Two runs on the examples both judged: flips per criterion, attribution, all-pass rate, cost."""

    a: str
    b: str
    judge_a: str
    judge_b: str
    n: int
    flips: dict[str, stats.CriterionFlip]
    flip_ids: dict[str, tuple[list[str], list[str]]]
    all_pass_rate: tuple[float, float]
    attribution: tuple[dict[str, int], dict[str, int]]
    cost: tuple[CostSummary, CostSummary]
    message: str | None = None

    def to_dict(self) -> dict:
        crits = {}
        for k, f in self.flips.items():
            f2p, p2f = self.flip_ids[k]
            crits[k] = {
                "n": f.n,
                "a_fail": f.a_fail,
                "b_fail": f.b_fail,
                "fail_to_pass": f.fail_to_pass,
                "pass_to_fail": f.pass_to_fail,
                "mcnemar_p": f.mcnemar_p if f.n else math.nan,
                "fail_to_pass_ids": f2p,
                "pass_to_fail_ids": p2f,
            }
        return {
            "a": self.a,
            "b": self.b,
            "judge": {"a": self.judge_a, "b": self.judge_b},
            "n": self.n,
            "criteria": crits,
            "all_pass_rate": {"a": self.all_pass_rate[0], "b": self.all_pass_rate[1]},
            "attribution": {"a": self.attribution[0], "b": self.attribution[1]},
            "cost": {"a": self.cost[0].to_dict(), "b": self.cost[1].to_dict()},
            "message": self.message,
        }


def compare_runs(
    s: Session, run_a: str | int, run_b: str | int, prices: dict[str, Price] | None = None
) -> CompareReport:
    """Compare two runs of one dataset on the examples both scored (criteria both rubrics share)."""
    return compare_sources(s, load_run(s, run_a), load_run(s, run_b), prices)


def compare_sources(
    s: Session, A: Source, B: Source, prices: dict[str, Price] | None = None
) -> CompareReport:
    """:func:`compare_runs` on already loaded run sources."""
    if A.index.dataset_id != B.index.dataset_id:
        raise ValueError(
            f"{A.key} and {B.key} belong to different datasets ({A.index.dataset}, {B.index.dataset})"
        )
    if A.key == B.key:
        raise ValueError(f"compare needs two different runs, got {A.key} twice")
    keys = [k for k in A.keys if k in A.judged and k in B.judged]
    A, B = A.select(keys), B.select(keys)
    both = A.covered & B.covered
    rows = np.flatnonzero(both)
    VA, VB = A.binary[rows], B.binary[rows]
    flips = {k: f for k, f in zip(keys, stats.compare(VA, VB), strict=True)}
    ext = A.index.ext[rows]
    flip_ids = {
        k: ([str(e) for e in ext[f.fail_to_pass_rows]], [str(e) for e in ext[f.pass_to_fail_rows]])
        for k, f in flips.items()
    }
    attribution = tuple(
        {k: int(v) for k, v in zip(keys, stats.failure_attribution(V), strict=True)} for V in (VA, VB)
    )
    prices = load_prices() if prices is None else prices
    runs = [s.get(store.Run, src.run_id) for src in (A, B)]
    message = None
    if not keys:
        message = f"{A.key} and {B.key} share no judged criterion: nothing to compare"
    elif rows.size == 0:
        message = f"{A.key} and {B.key} have no scored example in common: nothing to compare"
    return CompareReport(
        A.key,
        B.key,
        A.judge,
        B.judge,
        int(rows.size),
        flips,
        flip_ids,
        (stats.all_pass_rate(VA), stats.all_pass_rate(VB)),
        attribution,  # type: ignore[arg-type]
        (run_cost(s, runs[0], prices), run_cost(s, runs[1], prices)),
        message,
    )


def render_compare_table(report: CompareReport) -> str:
    out = [
        f"a = {report.a}  ({report.judge_a})",
        f"b = {report.b}  ({report.judge_b})",
        f"n = {report.n} examples both judged",
        "",
    ]
    w = max([len(k) for k in report.flips] + [9])
    out.append(
        f"{'criterion':<{w}} {'a_fail':>7} {'b_fail':>7} {'fail→pass':>10} {'pass→fail':>10} "
        f"{'McNemar p':>10}"
    )
    for k, f in report.flips.items():
        p = _f(f.mcnemar_p if f.n else math.nan, ".3g")
        out.append(f"{k:<{w}} {f.a_fail:>7} {f.b_fail:>7} {f.fail_to_pass:>10} {f.pass_to_fail:>10} {p:>10}")
    ra, rb = report.all_pass_rate
    out += ["", f"all-pass rate   a {_f(ra, '.1%')}   b {_f(rb, '.1%')}"]
    out += [f"  {side}: undefined — no answer has every criterion scored under {name}"
            for side, name, rate in (("a", report.a, ra), ("b", report.b, rb)) if math.isnan(rate)]
    undefined_p = [k for k, f in report.flips.items() if not f.n]
    if undefined_p:
        out.append(f"McNemar p undefined (—) for {', '.join(undefined_p)}: no answer scored by both runs")
    out += [
        "",
        f"{'cost':<18} {'a':>14} {'b':>14}",
    ]
    ca, cb = report.cost
    for fld, spec in (
        ("calls", "d"),
        ("prompt_tokens", "d"),
        ("completion_tokens", "d"),
        ("cached_tokens", "d"),
        ("retries", "d"),
        ("failed_calls", "d"),
        ("latency_p50", ".2f"),
        ("latency_p95", ".2f"),
        ("wall_s", ".1f"),
        ("usd", ".4f"),
    ):
        va, vb = getattr(ca, fld), getattr(cb, fld)
        out.append(f"{fld:<18} {_num(va, spec):>14} {_num(vb, spec):>14}")
    for side, c in (("a", ca), ("b", cb)):
        if c.note:
            out.append(f"note ({side}): {c.note}")
    if report.message:
        out.append(f"note: {report.message}")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- agreement


@dataclass(frozen=True, eq=False)
class AgreementReport:
    """Agreement of a judge (or another run) with a reference column, per criterion, and pooled over
    criteria (``pooled``: macro κ, micro κ and accuracy with 95 % intervals; see
    :class:`judgekit.stats.PooledAgreement`)."""

    source: str
    judge: str
    human: str
    human_judge: str
    criteria: dict[str, dict[str, Any]]
    message: str | None = None
    annotators: AnnotatorAgreement | None = None
    pooled: dict[str, Any] | None = None

    def to_dict(self) -> dict:
        out = {
            "source": self.source,
            "judge": self.judge,
            "human": self.human,
            "human_judge": self.human_judge,
            "criteria": self.criteria,
            "pooled": self.pooled,
            "message": self.message,
        }
        if self.annotators is not None:
            out["annotators"] = self.annotators.to_dict()
        return out


def _kappa_reason(counts: NDArray[np.int64], key: str, judge: Source, human: Source) -> str | None:
    """Why κ of one criterion is undefined, in words (None where it is defined)."""
    n = int(counts.sum())
    if n == 0:
        return f"no example has {key} scored by both {judge.key} and {human.key}: κ undefined"
    for who, src, passes in ((judge.key, judge, counts[:, 0].sum()), (human.key, human, counts[0].sum())):
        if passes in (0, n):
            outcome = "pass" if passes == n else "fail"
            return (f"every {src.noun} of {key} under {who} is {outcome} ({n} of {n}): κ undefined "
                    "(a constant column agrees only by chance)")
    return None


def pooled_dict(p: stats.PooledAgreement) -> dict[str, Any]:
    """JSON shape of the pooled summaries: value and 95 % interval of each, the examples and criteria used."""

    def one(v: stats.PooledValue) -> dict[str, float]:
        return {"value": v.value, "lo": v.lo, "hi": v.hi}

    return {
        "macro_kappa": one(p.macro_kappa),
        "micro_kappa": one(p.micro_kappa),
        "accuracy": one(p.accuracy),
        "n": p.n,
        "criteria": p.criteria,
    }


def agreement_report(judge: Source, human: Source, seed: int = 0) -> AgreementReport:
    """Per criterion: n, accuracy with its Jeffreys interval, Cohen's κ with its posterior interval (undefined,
    with the reason, when either side is constant), TPR/TNR (fail = positive), prevalence, AUC of P(pass)
    where the judge recorded it; for scale criteria also mean |Δ|, quadratic weighted κ and Spearman on
    the raw 1–5 scores. Rows where either side is missing are left out, per criterion. Pooled over the
    binary views of all criteria: macro κ, micro κ and accuracy with intervals."""
    keys = judge.keys
    J, H = judge.select(keys), human.select(keys)
    m = stats.agreement_matrix(J.binary, H.binary, J.p_pass, seed=seed)
    crits: dict[str, dict[str, Any]] = {}
    for j, c in enumerate(J.criteria):
        entry: dict[str, Any] = {
            "kind": c.kind,
            "n": int(m.n[j]),
            "accuracy": float(m.accuracy[j]),
            "accuracy_ci": [float(m.accuracy_lo[j]), float(m.accuracy_hi[j])],
            "kappa": float(m.kappa[j]),
            "kappa_ci": [float(m.kappa_lo[j]), float(m.kappa_hi[j])],
            "kappa_reason": _kappa_reason(m.counts[j], c.key, J, H),
            "tpr": float(m.tpr[j]),
            "tnr": float(m.tnr[j]),
            "prevalence": float(m.prevalence[j]),
            "auc": float(m.auc[j]),
            "n_auc": int(m.n_auc[j]),
            "counts": {
                "human_pass": {"judge_pass": int(m.counts[j, 0, 0]), "judge_fail": int(m.counts[j, 0, 1])},
                "human_fail": {"judge_pass": int(m.counts[j, 1, 0]), "judge_fail": int(m.counts[j, 1, 1])},
            },
        }
        if c.is_scale:
            a, b = J.raw[:, j], H.raw[:, j]
            entry |= {
                "mean_abs_delta": stats.mean_abs_delta(a, b),
                "weighted_kappa": stats.weighted_kappa(a, b),
                "spearman": stats.spearman(a, b),
            }
        crits[c.key] = entry
    message = None
    if all(e["n"] == 0 for e in crits.values()):
        message = f"no example is scored under both {judge.key} and {human.key}: agreement undefined"
    pooled = pooled_dict(stats.pooled_agreement(J.binary, H.binary, seed=seed))
    return AgreementReport(judge.key, judge.judge, human.key, human.judge, crits, message, pooled=pooled)


def agreement_for(
    s: Session, run: str | int, *, annotator: str | None = None, vs_run: str | int | None = None
) -> AgreementReport:
    """A run's agreement with one annotator, another run (``vs_run``, which plays the reference), or by
    default the human consensus — then with the annotators' own agreement attached when there are two
    or more. What ``judgekit report agreement``, ``judgekit check`` and ``Workspace.agreement`` show."""
    if annotator and vs_run:
        raise ValueError("--annotator and --vs-run together: choose one reference column")
    if vs_run:
        return judge_vs_judge(s, vs_run, run)
    judge = load_run(s, run)
    ds = s.get(store.Dataset, judge.index.dataset_id)
    if annotator:
        return agreement_report(judge, load_annotator(s, ds, annotator, judge.criteria))
    rep = agreement_report(judge, load_human(s, ds, judge.criteria))
    ann = annotator_agreement(s, ds)
    return rep if ann is None else replace(rep, annotators=ann)


def judge_vs_judge(s: Session, run_a: str | int, run_b: str | int) -> AgreementReport:
    """κ and friends between two runs; ``run_a`` plays the reference (TPR/TNR are relative to it)."""
    A, B = load_run(s, run_a), load_run(s, run_b)
    if A.index.dataset_id != B.index.dataset_id:
        raise ValueError(f"{A.key} and {B.key} belong to different datasets")
    keys = [k for k in B.keys if k in set(A.keys)]
    return agreement_report(B.select(keys), A.select(keys))


@dataclass(frozen=True, eq=False)
class AnnotatorAgreement:
    """Inter-annotator reliability (:func:`judgekit.annotators.reliability`): pairwise Cohen's κ and
    Krippendorff's α per criterion among ``annotators``; ``adjudicators`` settle and are not counted."""

    dataset: str
    annotators: list[str]
    criteria: dict[str, dict[str, Any]]
    adjudicators: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"dataset": self.dataset, "annotators": self.annotators, "adjudicators": self.adjudicators,
                "criteria": self.criteria}


def annotator_agreement(
    s: Session, dataset: str | store.Dataset, *, include_reference: bool = False
) -> AnnotatorAgreement | None:
    """κ for every annotator pair and Krippendorff's α (nominal for binary, ordinal for scale criteria)
    per criterion over the examples two or more annotators labelled — the numbers of the Label page's
    agreement view (:func:`judgekit.labeling.inter_annotator`), from the same function. ``None`` with fewer
    than two annotators. ``reference`` is left out by default; adjudicators always are."""
    ds = dataset if isinstance(dataset, store.Dataset) else store.get_dataset(s, dataset)
    names = [
        a for a in store.annotators_for_dataset(s, ds.id) if include_reference or a != REFERENCE_ANNOTATOR
    ]
    if len(names) < 2:
        return None
    names, crits, L, _ = label_tensor(s, example_index(s, ds.id), None, names)
    rel = reliability(L, names, store.annotator_roles(s, names), crits)
    if len(rel.raters) < 2:
        return None
    out = {r.criterion: {"kind": r.kind, "alpha": r.alpha, "n_units": r.n_units, "pairs": r.pairs}
           for r in rel.criteria}
    return AnnotatorAgreement(ds.name, rel.raters, out, rel.adjudicators)


def pooled_sentence(pooled: dict[str, Any] | None) -> str:
    """One line: macro κ, micro κ and accuracy with their intervals, over how many criteria and examples."""
    if not pooled:
        return "pooled: undefined (no example scored by both)"
    return (
        f"pooled over {pooled['criteria']} criteria with a defined κ and {pooled['n']} examples: "
        f"macro κ {interval_text(**pooled['macro_kappa'])}, micro κ {interval_text(**pooled['micro_kappa'])}, "
        f"accuracy {interval_text(**pooled['accuracy'])} (95% intervals, examples resampled jointly)"
    )


def render_agreement_table(report: AgreementReport) -> str:
    out = [f"judge  {report.source}  ({report.judge})", f"human  {report.human}  ({report.human_judge})", ""]
    w = max([len(k) for k in report.criteria] + [9])
    out.append(
        f"{'criterion':<{w}} {'n':>5} {'acc':>6} {'kappa':>6} {'95% CI':>15} {'TPR':>6} {'TNR':>6} "
        f"{'prev':>6} {'AUC':>6} {'|Δ|':>6} {'wκ':>6} {'ρ':>6}"
    )
    notes = []
    for k, e in report.criteria.items():
        ci = f"[{_f(e['kappa_ci'][0])}, {_f(e['kappa_ci'][1])}]" if math.isfinite(e["kappa"]) else "undefined"
        kappa = _f(e["kappa"]) if math.isfinite(e["kappa"]) else "undef"
        out.append(
            f"{k:<{w}} {e['n']:>5} {_f(e['accuracy']):>6} {kappa:>6} {ci:>15} {_f(e['tpr']):>6} "
            f"{_f(e['tnr']):>6} {_f(e['prevalence']):>6} {_f(e['auc']):>6} "
            f"{_f(e.get('mean_abs_delta', math.nan)):>6} {_f(e.get('weighted_kappa', math.nan)):>6} "
            f"{_f(e.get('spearman', math.nan)):>6}"
        )
        if e.get("kappa_reason"):
            notes.append(f"note: {e['kappa_reason']}")
    out += ["", pooled_sentence(report.pooled)] + notes
    if report.annotators is not None:
        left_out = report.annotators.adjudicators
        out += ["", f"annotators: {', '.join(report.annotators.annotators)}"
                + (f" (adjudicators, not counted: {', '.join(left_out)})" if left_out else "")]
        for k, e in report.annotators.criteria.items():
            kappas = ", ".join(f"{p['a']}/{p['b']} κ {_f(p['kappa'])} (n {p['n']})" for p in e["pairs"])
            out.append(f"  {k}: α {_f(e['alpha'])} over {e['n_units']} examples; {kappas}")
    if report.message:
        out.append(f"note: {report.message}")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- runs


def runs_report(s: Session, dataset: str | None = None) -> list[dict]:
    rows = store.list_runs(s)
    return [r for r in rows if dataset is None or r["dataset"] == dataset]


def render_runs_table(rows: Sequence[dict]) -> str:
    if not rows:
        return "no runs (see `judgekit run` or `judgekit import-run`)"
    out = [f"{'id':>4}  {'name':<24} {'dataset':<14} {'status':<9} {'harness':<28} {'scored':>13}  judge"]
    for r in rows:
        out.append(
            f"{r['id']:>4}  {r['name']:<24} {r['dataset']:<14} {r['status']:<9} {r['harness']:<28} "
            f"{str(r['scored']) + '/' + str(r['verdicts']):>13}  {r['judge']}"
        )
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- full report


@dataclass(frozen=True, eq=False)
class Report:
    """Everything the exported report shows; render with :func:`judgekit.figures.render_html` or
    :func:`render_markdown`."""

    dataset: str
    sources: list[dict[str, Any]]
    phi: PhiReport
    crosstabs: list[CrosstabReport]
    compares: list[CompareReport]
    agreements: list[AgreementReport]
    examples: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    extra: list[tuple[str, list[str], list[list[Any]], str | None]] = field(default_factory=list)  # more tables

    def to_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "sources": self.sources,
            "phi": self.phi.to_dict(),
            "crosstabs": [c.to_dict() for c in self.crosstabs],
            "compare": [c.to_dict() for c in self.compares],
            "agreement": [a.to_dict() for a in self.agreements],
            "notes": self.notes,
        }


def _default_dataset(s: Session) -> store.Dataset:
    """The dataset with the most runs (ties: the oldest)."""
    row = s.execute(
        select(store.Run.dataset_id, func.count().label("n"))
        .group_by(store.Run.dataset_id)
        .order_by(func.count().desc(), store.Run.dataset_id)
        .limit(1)
    ).first()
    if row is None:
        return resolve_dataset(s, None)
    return s.get(store.Dataset, row[0])


def _shifted_pairs(phi: PhiReport, top: int) -> list[tuple[int, int]]:
    """Criterion pairs whose phi moves most between runs (max |phi_a − phi_b|); one run: largest |phi|."""
    runs = [c for c in phi.columns if c.kind == "run"]
    k = len(phi.criteria)
    pairs = list(itertools.combinations(range(k), 2))
    if not runs or not pairs:
        return []
    P = np.stack([[c.phi[i, j] for i, j in pairs] for c in runs])  # (runs, pairs)
    with np.errstate(invalid="ignore"):
        if len(runs) > 1:
            score = np.nanmax(P, axis=0) - np.nanmin(P, axis=0) if np.isfinite(P).any() else P[0]
        else:
            score = np.abs(P[0])
    score = np.where(np.isfinite(score), score, -1.0)
    order = np.argsort(-score, kind="stable")
    return [pairs[o] for o in order[:top] if score[o] >= 0]


def build_report(
    s: Session,
    runs: Sequence[str] | None = None,
    *,
    human: bool = True,
    dataset: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    top_pairs: int = 3,
    examples_per_cell: int = 3,
    sections: Callable[[Session, list[str]], list[tuple[str, list[str], list[list[Any]], str | None]]] | None = None,
) -> Report:
    """Assemble the exported report.

    Default sources: every run of ``dataset`` (else of the dataset with the most runs) plus the human
    column when the dataset has labels. Shows crosstabs of the ``top_pairs`` most-shifted criterion pairs
    under every source, the phi matrices and audit, each run compared with the first, and each run's
    agreement with the human column; a few examples of the off-diagonal crosstab cells and of flips are
    included with their text (escaped by the renderers). ``sections(s, run names)`` adds tables computed
    elsewhere (the exports pass :func:`judgekit.health.export_sections`).
    """
    stats.check_draws(n_boot)
    notes: list[str] = []
    if runs:
        run_names = list(runs)
    else:
        ds = store.get_dataset(s, dataset) if dataset else _default_dataset(s)
        dataset = ds.name
        run_names = [
            r.name
            for r in s.scalars(select(store.Run).where(store.Run.dataset_id == ds.id).order_by(store.Run.id))
            if store.run_level(r) == "answer"  # bundle-level runs have no per-answer verdicts
        ]
        if not run_names:
            notes.append(f"dataset {ds.name!r} has no runs")
    base = load_sources(s, run_names, dataset=dataset) if run_names else []
    ds_name = base[0].index.dataset if base else resolve_dataset(s, dataset).name
    ds_row = store.get_dataset(s, ds_name)
    sources = list(base)
    if human:
        if store.annotators_for_dataset(s, ds_row.id):
            crits = None
            if base:
                by_key = {c.key: c for src in base for c in src.criteria}
                crits = tuple(by_key[k] for k in union_keys(base))
            sources.append(load_human(s, ds_row, crits))
        else:
            notes.append(f"dataset {ds_name!r} has no human labels: no human column")
    if not sources:
        raise ValueError(f"nothing to report for dataset {ds_name!r}: no runs and no labels")
    keys = union_keys(sources)
    sources = [src.select(keys) for src in sources]
    phi = phi_report(sources, n_boot=n_boot, seed=seed, noise_floor=noise.find_floor(s, sources))
    crosstabs = [
        crosstab_report(src, keys[i], keys[j]) for i, j in _shifted_pairs(phi, top_pairs) for src in sources
    ]
    runs_ = [src for src in sources if src.kind == "run"]
    prices = load_prices()
    compares = [compare_sources(s, runs_[0], other, prices) for other in runs_[1:]]
    hum = next((src for src in sources if src.is_human), None)
    agreements = [agreement_report(r, hum) for r in runs_] if hum is not None else []
    wanted: list[str] = []
    for ct in crosstabs:
        for r, c in (("pass", "fail"), ("fail", "pass")):
            wanted += ct.cells[r][c][:examples_per_cell]
    for cmp in compares:
        if cmp.flips:
            top = max(cmp.flips, key=lambda k: cmp.flips[k].fail_to_pass + cmp.flips[k].pass_to_fail)
            wanted += cmp.flip_ids[top][0][:examples_per_cell] + cmp.flip_ids[top][1][:examples_per_cell]
    examples = _example_texts(s, ds_row.id, list(dict.fromkeys(wanted)))
    source_rows = [{"source": src.key, "judge": src.judge, "n": src.n} for src in sources]
    extra = sections(s, [src.key.removeprefix("run:") for src in runs_]) if sections and runs_ else []
    return Report(ds_name, source_rows, phi, crosstabs, compares, agreements, examples, notes, extra)


def _example_texts(s: Session, dataset_id: int, ext_ids: list[str]) -> dict[str, dict[str, str]]:
    if not ext_ids:
        return {}
    rows = s.execute(
        select(store.Example.ext_id, store.Example.question, store.Example.answer).where(
            store.Example.dataset_id == dataset_id, store.Example.ext_id.in_(ext_ids)
        )
    ).all()
    return {e: {"question": q or "", "answer": a or ""} for e, q, a in rows}


# --------------------------------------------------------------------------------------------- rendering


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)




def _num(x: Any, fmt: str = ".2f") -> str:
    """A count as an integer, anything else through ``fmt``; ``—`` for missing values."""
    if x is None:
        return "—"
    if isinstance(x, int | np.integer) and not isinstance(x, bool):
        return str(int(x))
    return _f(x, ".2f" if fmt == "d" else fmt)


def report_tables(report: Report) -> list[tuple[str, list[str], list[list[Any]], str | None]]:
    """The report's tables as (title, header, rows, caption): shared by the HTML and Markdown renderers."""
    out = []
    out.append(
        (
            "Sources",
            ["source", "judge", "n"],
            [[r["source"], r["judge"], r["n"]] for r in report.sources],
            None,
        )
    )
    keys = report.phi.criteria
    for c in report.phi.columns:
        rows = [[k] + [_f(c.phi[i, j]) for j in range(len(keys))] for i, k in enumerate(keys)]
        out.append(
            (
                f"Phi — {c.source}",
                ["criterion"] + keys,
                rows,
                f"judge: {c.judge}; n = {c.n}" + ("; " + "; ".join(c.notes) if c.notes else ""),
            )
        )
    if report.phi.audit:
        srcs = list(report.phi.audit[0].values)
        rows = [
            [a.a, a.b] + [phi_with_interval(a.values[k]) for k in srcs] + [audit_verdict_text(a), a.note]
            for a in report.phi.audit
        ]
        out.append(
            (
                "Association audit",
                ["a", "b"] + srcs + ["verdict", "evidence"],
                rows,
                f"human column: {report.phi.human or 'none'}; reference harness: {report.phi.reference or 'none'}; "
                f"{INTERVAL_NOTE} ({report.phi.n_boot} draws); {FDR_NOTE}. {VERDICT_LEGEND}",
            )
        )
    for ct in report.crosstabs:
        t = ct.table
        rows = [
            [
                f"{ct.row} {r}",
                int(t.counts[i, 0]),
                int(t.counts[i, 1]),
                int(t.row_totals[i]),
                _f(t.col_fail_rate[i], ".1%"),
            ]
            for i, r in enumerate(OUTCOMES)
        ]
        out.append(
            (
                f"Crosstab {ct.row} × {ct.col} — {ct.source}",
                ["", f"{ct.col} pass", f"{ct.col} fail", "row total", f"{ct.col} fail rate"],
                rows,
                f"judge: {ct.judge}; n = {t.n}; ratio {_f(t.ratio)}; phi {_f(t.phi, '.3f')}"
                + (f"; {ct.message}" if ct.message else ""),
            )
        )
    for cmp in report.compares:
        rows = [
            [k, f.n, f.a_fail, f.b_fail, f.fail_to_pass, f.pass_to_fail, _f(f.mcnemar_p, ".3g")]
            for k, f in cmp.flips.items()
        ]
        ca, cb = cmp.cost
        cap = (
            f"a = {cmp.a} ({cmp.judge_a}), b = {cmp.b} ({cmp.judge_b}); n = {cmp.n}; all-pass rate "
            f"{_f(cmp.all_pass_rate[0], '.1%')} → {_f(cmp.all_pass_rate[1], '.1%')}"
        )
        out.append(
            (
                f"Compare {cmp.a} → {cmp.b}",
                ["criterion", "n", "a fail", "b fail", "fail→pass", "pass→fail", "McNemar p"],
                rows,
                cap + (f"; {cmp.message}" if cmp.message else ""),
            )
        )
        cost_rows = [
            [fld, _num(getattr(ca, fld)), _num(getattr(cb, fld))]
            for fld in (
                "calls",
                "prompt_tokens",
                "completion_tokens",
                "cached_tokens",
                "retries",
                "failed_calls",
                "latency_p50",
                "latency_p95",
                "wall_s",
                "usd",
            )
        ]
        notes = "; ".join(n for n in (ca.note, cb.note) if n)
        out.append((f"Cost {cmp.a} vs {cmp.b}", ["", cmp.a, cmp.b], cost_rows, notes or None))
    for ag in report.agreements:
        rows = [
            [
                k,
                e["n"],
                interval_text(e["accuracy"], *e["accuracy_ci"]),
                interval_text(e["kappa"], *e["kappa_ci"], e.get("kappa_reason")),
                _f(e["tpr"]),
                _f(e["tnr"]),
                _f(e["prevalence"]),
                _f(e["auc"]),
                _f(e.get("weighted_kappa", math.nan)),
            ]
            for k, e in ag.criteria.items()
        ]
        out.append(
            (
                f"Agreement {ag.source} vs {ag.human}",
                [
                    "criterion",
                    "n",
                    "accuracy [95% CI]",
                    "κ [95% CI]",
                    "TPR",
                    "TNR",
                    "prevalence",
                    "AUC",
                    "weighted κ",
                ],
                rows,
                f"judge: {ag.judge}; human: {ag.human_judge}; fail = positive class; {pooled_sentence(ag.pooled)}"
                + (f"; {ag.message}" if ag.message else ""),
            )
        )
    out += report.extra
    if report.examples:
        rows = [[eid, excerpt(t["question"], 160), excerpt(t["answer"], 400)] for eid, t in report.examples.items()]
        out.append(
            ("Examples from the off-diagonal cells and flips", ["id", "question", "answer"], rows, None)
        )
    return out


_MD_SPECIAL = re.compile(r"([\\`*_\[\]()!<>~|])")
# no \b: after "_" (a word character) GFM still links "_https://…"; escaping a colon or dot that needed none
# is harmless
_MD_AUTOLINK = re.compile(r"(?i)(https?|ftp|javascript|data|vbscript|file|mailto|xmpp)(:)")
_MD_WWW = re.compile(r"(?i)(www)(\.)")


def _md_cell(x: Any) -> str:
    """Untrusted text made inert in Markdown: HTML-escaped, then every character of emphasis, code, link and
    image syntax backslash-escaped (no ``[…](javascript:…)`` link, no ``![](https://…)`` remote image), and
    the scheme colon and ``www.`` escaped and ``@`` followed by a zero-width space, so no viewer (GitHub's
    autolinks included) turns a bare address or e-mail address into a link."""
    text = _MD_SPECIAL.sub(r"\\\1", _esc(excerpt(x, 2000)))
    text = _MD_AUTOLINK.sub(r"\1\\:", text)
    # GitHub links bare e-mail addresses whatever is escaped around them; a zero-width space after "@" is
    # the only thing that keeps one inert without changing the visible text
    return _MD_WWW.sub(r"\1\\.", text).replace("@", "@&#8203;")


def render_markdown(report: Report) -> str:
    """The same tables as Markdown (cells HTML-escaped, Markdown link/image/emphasis syntax escaped; no
    figures)."""
    out = [f"# judgekit report — dataset {_md_cell(report.dataset)}", ""]
    out += [f"> {_md_cell(n)}" for n in report.notes]
    for title, header, rows, caption in report_tables(report):
        out += [
            f"## {_md_cell(title)}",
            "",
            "| " + " | ".join(_md_cell(h) for h in header) + " |",
            "|" + "---|" * len(header),
        ]
        out += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in rows]
        if caption:
            out += ["", f"_{_md_cell(caption)}_"]
        out.append("")
    return "\n".join(out)
