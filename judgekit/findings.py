"""The workspace's findings in sentences — what the dashboard's first screen leads with.

Where this sits in the flow: pure functions over report objects the dashboard has already computed (the
phi report with its association audit, each run's cost totals, each run's agreement with the human
column). Nothing here decides anything new: every number is read off those reports, and each finding
names the page that shows it, with the choices (query parameters) that open that page on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from judgekit import reports

__all__ = ["Finding", "RunFacts", "findings", "first_steps", "no_labels_step"]


@dataclass(frozen=True)
class Finding:
    """One sentence (plain text; the page escapes it) and the page that shows it, opened on ``params``."""

    sentence: str
    page: str
    link: str
    params: dict[str, str | list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class RunFacts:
    """What the findings need of one run: its page key and name, cost totals, and its mean κ with the
    human column over the criteria where κ is defined (NaN without labels)."""

    key: str
    name: str
    harness: str
    calls: int
    tokens: int
    usd: float | None
    mean_kappa: float = math.nan
    kappa_criteria: int = 0
    n_labelled: int = 0


def _ratio(a: float, b: float) -> str:
    return f"{a / b:,.1f}×"


def _induced(report: reports.PhiReport, runs: Sequence[RunFacts], source_of: dict[str, str]) -> Finding | None:
    """How many associations each run shows that the humans do not (audit verdict ``induced``)."""
    if report.human is None or not runs:
        return None
    counts = {r.key: 0 for r in runs}
    for row in report.audit:
        if row.verdict == "induced":
            for src in row.induced_by:
                key = source_of.get(src)
                if key in counts:
                    counts[key] += 1
    by = sorted(runs, key=lambda r: -counts[r.key])
    parts = [f"{r.name} ({r.harness}) {counts[r.key]}" for r in by]
    total_pairs = len(report.audit)
    lead = by[0]
    if counts[lead.key] == 0:
        sentence = (f"No harness shows an association the humans do not see, over {total_pairs} criterion pairs "
                    f"({'; '.join(parts)}).")
    else:
        sentence = (f"Associations a harness shows that the humans do not (induced by its call structure), of "
                    f"{total_pairs} criterion pairs: {'; '.join(parts)}.")
    return Finding(sentence, "pages/associations.py", "Associations",
                   {"sources": ["human", *(r.key for r in runs)]})


def _cost(runs: Sequence[RunFacts]) -> Finding | None:
    """The cost ratio between the most and the least expensive run (money when every run has a known,
    positive price; else tokens; else calls)."""
    priced = [r for r in runs if r.usd is not None and r.usd > 0]
    if len(runs) < 2:
        return None
    if len(priced) == len(runs):
        measure, unit = (lambda r: r.usd), "the money"
    elif all(r.tokens > 0 for r in runs):
        measure, unit = (lambda r: float(r.tokens)), "the tokens"
    elif all(r.calls > 0 for r in runs):
        measure, unit = (lambda r: float(r.calls)), "the calls"
    else:
        return None
    cheap, dear = min(runs, key=measure), max(runs, key=measure)
    if cheap.key == dear.key:
        return None
    calls = f"; {dear.calls:,} calls against {cheap.calls:,}" if unit != "the calls" else ""
    sentence = (f"{dear.name} ({dear.harness}) cost {_ratio(measure(dear), measure(cheap))} {unit} of "
                f"{cheap.name} ({cheap.harness}){calls}.")
    return Finding(sentence, "pages/compare.py", "Compare", {"a": cheap.key, "b": dear.key})


def _agreement(runs: Sequence[RunFacts]) -> Finding | None:
    scored = [r for r in runs if r.kappa_criteria]
    if not scored:
        return None
    best = max(scored, key=lambda r: r.mean_kappa)
    parts = "; ".join(f"{r.name} {r.mean_kappa:.2f}" for r in sorted(scored, key=lambda r: -r.mean_kappa))
    n = max(r.n_labelled for r in scored)
    sentence = (f"Agreement with the humans (mean Cohen's κ over the criteria, up to {n:,} labelled answers): "
                f"{parts}. Closest: {best.name}.")
    return Finding(sentence, "pages/agreement.py", "Agreement", {"run": best.key})


def _undecided(report: reports.PhiReport, runs: Sequence[RunFacts]) -> Finding | None:
    """Pairs the audit cannot decide yet, and how many more labels would decide the cheapest of them (the
    audit's ``label_more``; where it has none, its own note on the first pair)."""
    open_ = [row for row in report.audit if row.verdict == "undecided"]
    if report.human is None or not open_:
        return None
    sentence = (f"{len(open_)} of {len(report.audit)} criterion pairs are undecided: the human column cannot "
                f"tell yet whether the association is real.")
    planned = [row for row in open_ if row.label_more is not None]
    if planned:
        cheapest = min(planned, key=lambda row: row.label_more.k)
        more = cheapest.label_more
        sentence += (f" About {more.k:,} more labelled answers would decide {cheapest.a} × {cheapest.b}"
                     + ("" if more.feasible else " (more than are still unlabelled)")
                     + ": a label set with the strategy 'decide' picks them.")
    else:
        sentence += f" For example {open_[0].a} × {open_[0].b}: {open_[0].note}."
    return Finding(sentence, "pages/label.py", "Label")


def findings(report: reports.PhiReport | None, runs: Sequence[RunFacts], source_of: dict[str, str]) -> list[Finding]:
    """The findings of a workspace, most telling first: associations each harness invents, the cost ratio
    between harnesses, agreement with the humans, and what is undecided. ``source_of`` maps the phi
    report's source names to the page keys of ``runs``. Findings that do not apply are left out."""
    out = []
    if report is not None:
        out.append(_induced(report, runs, source_of))
    out += [_cost(runs), _agreement(runs)]
    if report is not None:
        out.append(_undecided(report, runs))
    return [f for f in out if f is not None]


def first_steps(has_data: bool, has_runs: bool) -> list[Finding]:
    """What to do on an empty workspace: get answers in, then run two harnesses over them."""
    steps = []
    if not has_data:
        steps.append(Finding("1. Load the demo workspace (600 support answers with planted properties and their "
                             "truth as labels), or upload your own answers and a rubric.",
                             "pages/data.py", "Data"))
    if not has_runs:
        steps.append(Finding(f"{2 if not has_data else 1}. Start a single + split pair of runs over the same "
                             "answers — the simulated judge needs no setup.", "pages/run.py", "Run"))
    return steps


def no_labels_step() -> Finding:
    """What to do when runs exist but nobody has labelled: the human column tells real from induced."""
    return Finding("No human labels yet: label a sample (about 60–150 answers) to get the human column — only "
                   "then can the audit tell which associations are real and which a harness invented.",
                   "pages/label.py", "Label")
