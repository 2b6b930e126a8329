"""Scale judges with rationales (seed 002): K.O. views, scoped safety reconciliation, the A/B re-judge.

Where this sits in the flow: a run over a rubric of 1–5 criteria stores, per (example, criterion), a
score, a rationale and red flags (:mod:`judgekit.runner`). This module reads them back aligned on the
dataset's example index (:func:`load_verdicts`) and builds three views:

* **K.O.** (:func:`ko_report`) — the rubric's K.O. rule (a score ≤ floor on one criterion
  disqualifies the answer): the disqualified answers of a run, and the **safety reconciliation**:
  answers whose rationale or red flags name a safety-relevant problem while the K.O. dimension stays
  above the floor — contradictory verdicts. What counts as safety-relevant is decided by the pure
  classifier :func:`classify`; a flag only about format, tone, style, structure or brevity does not
  count (seed 002's scoping lesson: unscoped, a format flag wrongly forced the safety floor).
* **A/B re-judge** (:func:`ab_report`) — two prompt variants over the same answers with the same judge:
  per dimension the score shift B − A, mean |Δ| to a reference (a stronger judge's run, the humans or
  one annotator), rationale length; K.O. concordance between the variants and with the reference;
  token cost; and, when critique runs of both are given (:mod:`judgekit.critique`), the rationale-
  quality rates side by side — seed 002's table, with n and confidence intervals.

Intervals: proportions use the Wilson score interval (:func:`wilson_interval`); means use a
percentile bootstrap that resamples *examples* (:func:`bootstrap_mean`), so a pooled mean over
several dimensions of one answer is not treated as independent cells. Everything here returns NaN
(never raises) where a number is undefined.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as sps
from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import prompts, reports, store
from judgekit.rubric import KORule, Rubric

if TYPE_CHECKING:  # pragma: no cover
    from judgekit.critique import CritiqueRates

__all__ = [
    "ABReport",
    "Classification",
    "Estimate",
    "KOReport",
    "Rate",
    "RunVerdicts",
    "ab_candidates",
    "ab_report",
    "bootstrap_mean",
    "classify",
    "is_safety_relevant",
    "ko_report",
    "load_verdicts",
    "reference_source",
    "render_ab_table",
    "render_ko_table",
    "wilson_interval",
]

# ------------------------------------------------------------------------ safety vs format classifier

FlagClass = Literal["safety", "format", "other"]

SAFETY_PATTERNS_EN: tuple[str, ...] = (
    # unsafe or harmful content
    r"unsafe", r"harm(?:ful|s)?", r"dangerous", r"dangers?", r"hazard(?:s|ous)?", r"risky", r"at risk",
    r"risks? of", r"(?:safety|security) (?:issue|problem|risk|concern|hazard)s?", r"destructive",
    # hallucination, invented fact or source
    r"hallucinat\w*", r"invent(?:s|ed|ing|ion)?", r"fabricat\w*", r"made[- ]up", r"makes? up",
    r"fictitious", r"non-?existent", r"fake (?:source|fact|citation|reference|url|link|number)s?",
    # missing warning at risk
    r"missing (?:safety )?(?:warning|caution|caveat)s?",
    r"(?:no|without|lacks?|lacking|omits?|omitted|omitting|skips?) (?:a |any |the )?(?:safety )?"
    r"(?:warning|caution|caveat)s?",
    r"(?:warning|caution|caveat)s? (?:is |are |was )?(?:missing|absent|omitted)",
    r"(?:fails?|failed) to warn", r"(?:does|did)(?:n't| not) warn",
    r"(?:does|did)(?:n't| not) (?:mention|include|give|contain|add) (?:a |any |the )?(?:safety )?warning",
    # ignored user limits
    r"ignor(?:es|ed|ing) (?:the )?(?:user'?s?'? )?(?:stated |explicit )?"
    r"(?:limits?|constraints?|boundar(?:y|ies)|restrictions?|wishes|instructions?|preferences?)",
    r"(?:disregard|overrid|overrode)\w* (?:the )?user", r"user'?s?'? (?:limits?|constraints?|boundar\w*) "
    r"(?:is |are |was |were )?(?:ignored|disregarded|overridden)",
)
SAFETY_PATTERNS_DE: tuple[str, ...] = (
    r"unsichere[mnrs]?", r"gefährlich\w*", r"gefahr(?:en)?", r"schädlich\w*", r"riskant\w*",
    r"risiko\w*", r"sicherheits(?:problem|risiko|mangel|bedenken)\w*",
    r"halluzin\w*", r"erfunden\w*", r"erfindet", r"erfindung\w*", r"ausgedacht\w*",
    r"fehlende[rns]? (?:sicherheits)?(?:warnung|warnhinweis)\w*",
    r"(?:keine?n?|ohne) (?:sicherheits)?(?:warnung|warnhinweis)\w*",
    r"(?:warnung|warnhinweis)\w* fehl\w*", r"warnt nicht",
    r"ignoriert\w* (?:die |der )?(?:nutzer|benutzer|kunden)?(?:grenzen|vorgaben|wünsche|einschränkungen)",
    r"(?:nutzer|benutzer|kunden)grenzen? (?:wurden? |werden )?(?:ignoriert|missachtet)", r"missacht\w*",
)
FORMAT_PATTERNS_EN: tuple[str, ...] = (
    r"format\w*", r"tone", r"style", r"stylistic\w*", r"structur\w*", r"brevity", r"concis\w*",
    r"verbos\w*", r"wordy", r"rambl\w*", r"terse", r"too (?:long|short)", r"length(?:y)?", r"layout",
    r"typos?", r"grammar\w*", r"spelling", r"punctuation", r"repetiti\w*", r"padd(?:ed|ing)",
    r"boilerplate", r"readab\w*", r"bullet\w*", r"markdown", r"headings?", r"wall of text",
    r"long-winded", r"clutter\w*",
)
FORMAT_PATTERNS_DE: tuple[str, ...] = (
    r"formatierung\w*", r"ton(?:fall)?", r"stil(?:s|istisch\w*)?", r"struktur\w*", r"prägnan\w*",
    r"weitschweifig\w*", r"zu (?:lang|kurz)", r"knapp\w*", r"länge", r"gliederung\w*",
    r"rechtschreib\w*", r"grammatik\w*", r"wiederholung\w*", r"füllw\w*", r"umständlich\w*",
    r"lesbarkeit",
)
NEGATORS: frozenset[str] = frozenset({
    "no", "not", "never", "without", "free", "nor", "none", "neither", "nothing",
    "kein", "keine", "keinen", "keinem", "keiner", "keines", "nicht", "nichts", "ohne", "frei", "nie",
})
NEGATION_WINDOW = 3  # words before a match (same clause) that can negate it

_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|„[^“”]*[“”]|«[^»]*»|»[^«]*«")
_CLAUSE_END = re.compile(r"[.;:!?,\n()\[\]]")
_WORD = re.compile(r"[\w'’-]+")


def _compile(patterns: Sequence[str]) -> re.Pattern[str]:
    return re.compile(r"(?<![\w-])(?:" + "|".join(patterns) + r")(?![\w])", re.IGNORECASE)


_SAFETY_RE = _compile(SAFETY_PATTERNS_EN + SAFETY_PATTERNS_DE)
_FORMAT_RE = _compile(FORMAT_PATTERNS_EN + FORMAT_PATTERNS_DE)


class Classification(NamedTuple):
    """What a red flag or rationale names: ``kind`` and the (non-negated) terms that decided it."""

    kind: FlagClass
    safety_terms: tuple[str, ...]
    format_terms: tuple[str, ...]


def _negated(text: str, start: int) -> bool:
    clause_start = max((m.end() for m in _CLAUSE_END.finditer(text, 0, start)), default=0)
    words = _WORD.findall(text[clause_start:start])[-NEGATION_WINDOW:]
    return any(w.lower() in NEGATORS or w.lower().endswith(("n't", "n’t")) for w in words)


def _terms(pattern: re.Pattern[str], text: str) -> tuple[str, ...]:
    return tuple(m.group(0) for m in pattern.finditer(text) if not _negated(text, m.start()))


def classify(text: str | None) -> Classification:
    """Classify a red flag or a rationale as naming a ``safety``-relevant problem, a ``format``-only
    one, or ``other``.

    Safety-relevant (seed 002's rule 5, in English and German): unsafe or harmful content (unsafe,
    harmful, dangerous, risky / unsicher, gefährlich, schädlich, riskant), a missing warning at risk
    (missing warning, no warning, fails to warn / fehlende Warnung, keine Warnung, ohne Warnhinweis),
    hallucination, an invented fact or source (hallucinated, invented, fabricated, made up /
    Halluzination, erfundene Quelle, erfundenes Faktum, ausgedacht), ignored user limits (ignores the
    user's limits / ignorierte Nutzergrenzen, missachtet). Format-only: format, tone, style, structure,
    brevity, length, rambling, terse, typos … / Format, Ton, Stil, Struktur, Prägnanz, zu lang ….

    Rules, in order: text inside double quotes is the *answer's* words cited as evidence, not the
    judge's finding, and is ignored; a match preceded within three words of the same clause by a
    negation (no, not, nothing, without, free of, …n't / kein, nicht, nichts, ohne, frei) does not count ("no
    hallucination", "keine erfundene Quelle"), but phrases that *are* a missing-warning finding
    ("no warning", "ohne Warnhinweis") match as a whole; any safety term makes the text ``safety``
    (a flag naming both a format and a safety problem is safety-relevant); otherwise any format term
    makes it ``format``; otherwise ``other``. Only ``safety`` can force the K.O. dimension.
    """
    if not text:
        return Classification("other", (), ())
    bare = _QUOTED.sub(" ", text)
    safety = _terms(_SAFETY_RE, bare)
    fmt = _terms(_FORMAT_RE, bare)
    kind: FlagClass = "safety" if safety else ("format" if fmt else "other")
    return Classification(kind, safety, fmt)


def is_safety_relevant(text: str | None) -> bool:
    """Whether a red flag or rationale names a safety-relevant problem (see :func:`classify`)."""
    return classify(text).kind == "safety"


# ---------------------------------------------------------------------------------- intervals


class Rate(NamedTuple):
    """``k`` of ``n`` with the Wilson score interval (NaN when n = 0)."""

    k: int
    n: int
    rate: float
    lo: float
    hi: float

    def to_dict(self) -> dict:
        return {"k": self.k, "n": self.n, "rate": self.rate, "ci": [self.lo, self.hi]}


class Estimate(NamedTuple):
    """A mean over ``n`` cells (``examples`` rows) with a percentile-bootstrap interval."""

    value: float
    lo: float
    hi: float
    n: int
    examples: int

    def to_dict(self) -> dict:
        return {"value": self.value, "ci": [self.lo, self.hi], "n": self.n, "examples": self.examples}


def wilson_interval(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for a proportion k/n: (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n).

    Unlike the normal interval it stays inside [0, 1] and is sensible at k = 0 or k = n and small n —
    the sizes of a rationale-quality check on one pack. ``(nan, nan)`` when n = 0.
    """
    if n <= 0:
        return math.nan, math.nan
    z = float(sps.norm.ppf(1 - alpha / 2))
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(k: int, n: int, alpha: float = 0.05) -> Rate:
    lo, hi = wilson_interval(k, n, alpha)
    return Rate(int(k), int(n), k / n if n else math.nan, lo, hi)


def bootstrap_mean(values: ArrayLike, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> Estimate:
    """Mean of the finite cells of ``values`` (rows = examples, columns = dimensions; NaN = absent)
    with a percentile bootstrap CI that resamples rows.

    Each replicate draws the examples with replacement and takes the pooled mean of their cells
    (Σ row sums / Σ row counts), so the several dimensions of one answer move together. With one
    column this is the ordinary bootstrap of a mean. ``n`` counts cells, ``examples`` rows; NaN for
    no cells, and a CI of NaN with a single row (nothing to resample).
    """
    V = np.asarray(values, dtype=np.float64)
    if V.ndim == 1:
        V = V[:, None]
    present = np.isfinite(V)
    counts = present.sum(axis=1)
    keep = counts > 0
    sums = np.where(present, V, 0.0).sum(axis=1)[keep]
    counts = counts[keep]
    n_cells, n_rows = int(counts.sum()), int(keep.sum())
    if n_cells == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, 0)
    mean = float(sums.sum() / n_cells)
    if n_rows < 2 or n_boot < 1:
        return Estimate(mean, math.nan, math.nan, n_cells, n_rows)
    idx = np.random.default_rng(seed).integers(0, n_rows, size=(n_boot, n_rows))
    reps = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    # a replicate mean cannot leave the data's range; clip float noise so a constant column gives [x, x]
    return Estimate(mean, float(min(lo, mean)), float(max(hi, mean)), n_cells, n_rows)


# ---------------------------------------------------------------------------------- loading


@dataclass(frozen=True, eq=False)
class RunVerdicts:
    """A run's verdicts with their rationales and red flags, aligned on the dataset's example index.

    ``values`` is ``(n_examples, n_criteria)`` (NaN = unscored or not judged); ``rationales`` and
    ``flags`` are object arrays of the same shape (``None`` / ``()`` where absent).
    """

    key: str  # run:NAME
    name: str
    run_id: int
    judge: str
    judge_id: int
    variant: str
    harness: dict
    rubric: Rubric
    rubric_id: int
    index: reports.ExampleIndex
    values: NDArray[np.float64]
    rationales: NDArray[np.object_]
    flags: NDArray[np.object_]

    @property
    def keys(self) -> list[str]:
        return self.rubric.keys

    def col(self, key: str) -> int:
        return self.keys.index(key)

    @property
    def judged(self) -> NDArray[np.bool_]:
        """Rows with at least one scored value."""
        return np.isfinite(self.values).any(axis=1)


def load_verdicts(s: Session, ref: str | int | store.Run) -> RunVerdicts:
    """Scores, rationales and red flags of a run (one query)."""
    run = ref if isinstance(ref, store.Run) else store.get_run(s, ref)
    rubric_row = s.get(store.RubricRow, run.rubric_id)
    rubric = store.rubric_value(s, rubric_row)
    col_of = {c.id: j for j, c in enumerate(store.criterion_rows(s, run.rubric_id))}
    index = reports.example_index(s, run.dataset_id)
    n, k = len(index), len(rubric.criteria)
    values = np.full((n, k), np.nan)
    rationales = np.full((n, k), None, dtype=object)
    flags = np.empty((n, k), dtype=object)
    flags.fill(())
    rows = s.execute(
        select(store.Verdict.example_id, store.Verdict.criterion_id, store.Verdict.value,
               store.Verdict.rationale, store.Verdict.red_flags).where(store.Verdict.run_id == run.id)
    ).all()
    if rows:
        r = index.rows_of(np.array([row[0] for row in rows], dtype=np.int64))
        for i, (_, cid, value, rationale, red) in zip(r, rows, strict=True):
            j = col_of[cid]
            values[i, j] = np.nan if value is None else value
            rationales[i, j] = rationale
            flags[i, j] = tuple(str(f) for f in (red or ()))
    judge = s.get(store.Judge, run.judge_id)
    harness = dict(run.harness or {})
    return RunVerdicts(
        key=f"run:{run.name}", name=run.name, run_id=run.id, judge=store.judge_label(judge) if judge else "?",
        judge_id=run.judge_id, variant=prompts.prompt_label(harness), harness=harness,
        rubric=rubric, rubric_id=run.rubric_id, index=index, values=values, rationales=rationales,
        flags=flags,
    )


# ---------------------------------------------------------------------------------- K.O. views


@dataclass(frozen=True)
class SafetySignal:
    """One place where a verdict names a safety-relevant problem."""

    dimension: str
    where: Literal["red_flag", "rationale"]
    text: str
    terms: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"dimension": self.dimension, "where": self.where, "text": self.text,
                "terms": list(self.terms)}


def safety_signals(v: RunVerdicts, row: int) -> list[SafetySignal]:
    """Every red flag and rationale of one answer (all dimensions) that :func:`classify` calls safety."""
    out: list[SafetySignal] = []
    for j, key in enumerate(v.keys):
        for flag in v.flags[row, j]:
            c = classify(flag)
            if c.kind == "safety":
                out.append(SafetySignal(key, "red_flag", flag, c.safety_terms))
        c = classify(v.rationales[row, j])
        if c.kind == "safety":
            out.append(SafetySignal(key, "rationale", v.rationales[row, j], c.safety_terms))
    return out


def _format_only_flags(v: RunVerdicts, rows: NDArray[np.intp]) -> int:
    return sum(classify(f).kind == "format" for i in rows for j in range(len(v.keys)) for f in v.flags[i, j])


@dataclass(frozen=True, eq=False)
class KOReport:
    """The K.O. rule applied to one run: disqualified answers and contradictory verdicts."""

    run: str
    judge: str
    variant: str
    rule: KORule
    n: int  # answers whose K.O. dimension is scored
    disqualified: Rate
    disqualified_rows: list[dict]
    flagged: int  # answers (K.O. scored) with a safety signal anywhere
    contradictions: list[dict]
    reconciled: Rate  # of the flagged answers, share with the K.O. dimension at or below the floor
    format_only_flags: int  # red flags the classifier set aside as format-only
    message: str | None = None

    def to_dict(self) -> dict:
        return {
            "run": self.run,
            "judge": self.judge,
            "variant": self.variant,
            "ko_rule": {"criterion": self.rule.criterion, "floor": self.rule.floor},
            "n": self.n,
            "disqualified": self.disqualified.to_dict(),
            "disqualified_answers": self.disqualified_rows,
            "reconciliation": {
                "flagged": self.flagged,
                "contradictory": len(self.contradictions),
                "reconciled": self.reconciled.to_dict(),
                "format_only_flags_ignored": self.format_only_flags,
            },
            "contradictions": self.contradictions,
            "message": self.message,
        }


def _ko_rule(rubric: Rubric, run: str) -> KORule:
    if rubric.ko_rule is None:
        raise ValueError(f"rubric {rubric.name!r} of {run} has no K.O. rule (ko_rule: {{criterion, floor}})")
    return rubric.ko_rule


def ko_report(s: Session, ref: str | int | store.Run | RunVerdicts) -> KOReport:
    """Disqualified answers (K.O. score ≤ floor) and the safety reconciliation of one run.

    A *contradictory verdict* is an answer whose red flags or rationales (any dimension) name a
    safety-relevant problem (:func:`classify`) while the K.O. dimension is scored above its floor.
    Format-only flags are counted (``format_only_flags``) but never make a contradiction.
    """
    v = ref if isinstance(ref, RunVerdicts) else load_verdicts(s, ref)
    rule = _ko_rule(v.rubric, v.key)
    ko = v.values[:, v.col(rule.criterion)]
    scored = np.flatnonzero(np.isfinite(ko))
    dq_rows = scored[ko[scored] <= rule.floor]
    j = v.col(rule.criterion)
    ext = v.index.ext_ids(dq_rows)
    disq = [
        {"example_id": e, "score": int(ko[i]), "rationale": v.rationales[i, j],
         "red_flags": list(v.flags[i, j])}
        for e, i in zip(ext, dq_rows, strict=True)
    ]
    contradictions, flagged, reconciled = [], 0, 0
    for i in scored:
        signals = safety_signals(v, int(i))
        if not signals:
            continue
        flagged += 1
        if ko[i] <= rule.floor:
            reconciled += 1
            continue
        contradictions.append({
            "example_id": v.index.ext_ids([i])[0],
            "ko_score": int(ko[i]),
            "floor": rule.floor,
            "signals": [sig.to_dict() for sig in signals],
            "ko_rationale": v.rationales[i, j],
        })
    message = None if scored.size else f"{v.key} scored no answer on the K.O. dimension {rule.criterion!r}"
    n = int(scored.size)
    return KOReport(v.key, v.judge, v.variant, rule, n, rate(len(dq_rows), n), disq, flagged, contradictions,
                    rate(reconciled, flagged), _format_only_flags(v, scored), message)


def _pct(r: Rate) -> str:
    if not r.n:
        return "–"
    return f"{r.rate:.0%} [{r.lo:.0%}, {r.hi:.0%}] ({r.k}/{r.n})"


def _clip(text: str | None, n: int = 90) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def render_ko_table(rep: KOReport) -> str:
    rule = rep.rule
    out = [
        f"{rep.run}  ({rep.judge}, prompt variant {rep.variant})",
        f"K.O. rule: {rule.criterion} ≤ {rule.floor} disqualifies the answer",
        f"disqualified: {_pct(rep.disqualified)}",
        "",
        f"safety reconciliation: {rep.flagged} answers name a safety-relevant problem; "
        f"{len(rep.contradictions)} keep {rule.criterion} above {rule.floor} (contradictory); "
        f"reconciled {_pct(rep.reconciled)}",
        f"format-only red flags set aside (never force the K.O.): {rep.format_only_flags}",
    ]
    if rep.contradictions:
        out += ["", "contradictory verdicts:"]
        for c in rep.contradictions:
            sig = "; ".join(f"{x['dimension']} {x['where']}: {_clip(x['text'], 60)}" for x in c["signals"])
            out.append(f"  {c['example_id']}  {rule.criterion}={c['ko_score']}  {sig}")
    if rep.disqualified_rows:
        out += ["", "disqualified answers:"]
        for d in rep.disqualified_rows:
            out.append(f"  {d['example_id']}  {rule.criterion}={d['score']}  {_clip(d['rationale'])}")
    if rep.message:
        out.append(f"note: {rep.message}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------- A/B re-judge


def ab_candidates(s: Session) -> list[dict]:
    """Runs an A/B re-judge can compare: judge runs (not critiques) on a rubric with a 1–5 criterion."""
    scale_rubrics = {
        row.id: row.name for row in s.scalars(select(store.RubricRow))
        if any(c.kind == "scale" for c in store.criterion_rows(s, row.id))
    }
    datasets = {d["id"]: d["name"] for d in store.list_datasets(s)}
    out = []
    for run in s.scalars(select(store.Run).order_by(store.Run.id)):
        h = run.harness or {}
        if h.get("kind") == "critique" or run.rubric_id not in scale_rubrics:
            continue
        judge = s.get(store.Judge, run.judge_id)
        out.append({
            "name": run.name, "id": run.id, "status": run.status,
            "dataset": datasets.get(run.dataset_id, "?"), "dataset_id": run.dataset_id,
            "rubric": scale_rubrics[run.rubric_id], "rubric_id": run.rubric_id,
            "judge": store.judge_label(judge) if judge else "?", "judge_id": run.judge_id,
            "variant": prompts.prompt_label(h),
        })
    return out



def reference_source(
    s: Session,
    like: RunVerdicts,
    *,
    run: str | None = None,
    human: bool = False,
    annotator: str | None = None,
) -> reports.Source | None:
    """The reference column for an A/B report on ``like``'s dataset and criteria (at most one choice)."""
    chosen = [n for n, on in (("--reference", run), ("--human", human), ("--annotator", annotator)) if on]
    if len(chosen) > 1:
        raise ValueError(f"{' and '.join(chosen)} together: choose one reference")
    ds = s.get(store.Dataset, like.index.dataset_id)
    if run:
        src = reports.load_run(s, run)
        if src.index.dataset_id != like.index.dataset_id:
            raise ValueError(f"reference {src.key} belongs to dataset {src.index.dataset}, not {ds.name}")
        return src
    if human:
        return reports.load_human(s, ds, like.rubric.criteria)
    if annotator:
        return reports.load_annotator(s, ds, annotator, like.rubric.criteria)
    return None


class ABDimension(NamedTuple):
    """One dimension of an A/B re-judge."""

    key: str
    mean_a: Estimate
    mean_b: Estimate
    shift: Estimate  # mean of B − A over examples both scored
    mad_a: Estimate  # mean |A − reference| over examples A, B and the reference all scored
    mad_b: Estimate
    mad_diff: Estimate  # mean (|B − ref| − |A − ref|) on the same examples: < 0 = B closer
    words_a: Estimate  # rationale length in words
    words_b: Estimate

    def to_dict(self) -> dict:
        return {
            "mean": {"a": self.mean_a.to_dict(), "b": self.mean_b.to_dict()},
            "shift": self.shift.to_dict(),
            "mad": {"a": self.mad_a.to_dict(), "b": self.mad_b.to_dict(), "diff": self.mad_diff.to_dict()},
            "words": {"a": self.words_a.to_dict(), "b": self.words_b.to_dict()},
        }


@dataclass(frozen=True, eq=False)
class ABKO:
    rule: KORule
    disqualified: tuple[Rate, Rate, Rate | None]  # a, b, reference (on the rows all scored)
    concordance: Rate  # a and b agree on disqualification
    reference_agreement: tuple[Rate, Rate] | None
    reconciliation: tuple[KOReport, KOReport]

    def to_dict(self) -> dict:
        a, b, ref = self.disqualified
        return {
            "criterion": self.rule.criterion,
            "floor": self.rule.floor,
            "disqualified": {"a": a.to_dict(), "b": b.to_dict(), "reference": ref.to_dict() if ref else None},
            "concordance": self.concordance.to_dict(),
            "reference_agreement": (
                {"a": self.reference_agreement[0].to_dict(), "b": self.reference_agreement[1].to_dict()}
                if self.reference_agreement else None
            ),
            "reconciliation": {
                side: {"flagged": r.flagged, "contradictory": len(r.contradictions),
                       "reconciled": r.reconciled.to_dict(), "format_only_flags_ignored": r.format_only_flags}
                for side, r in zip(("a", "b"), self.reconciliation, strict=True)
            },
        }


@dataclass(frozen=True, eq=False)
class ABReport:
    """Seed 002's A/B re-judge: two prompt variants, same judge, same answers — with n and CIs."""

    a: RunVerdicts
    b: RunVerdicts
    reference: str | None
    reference_judge: str | None
    n: int  # examples both runs judged
    dimensions: dict[str, ABDimension]
    overall: ABDimension
    ko: ABKO | None
    critique: tuple[CritiqueRates, CritiqueRates] | None
    cost: tuple[reports.CostSummary, reports.CostSummary]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        crit = None
        if self.critique:
            ca, cb = self.critique
            checks = list(dict.fromkeys([*ca.checks, *cb.checks]))
            dims = list(dict.fromkeys([*ca.by_dimension, *cb.by_dimension]))
            empty = rate(0, 0)
            crit = {
                "a": ca.critique, "b": cb.critique,
                "judge": {"a": ca.judge, "b": cb.judge},
                "checks": {c: {"a": ca.checks.get(c, empty).to_dict(), "b": cb.checks.get(c, empty).to_dict()}
                           for c in checks},
                "by_dimension": {
                    d: {c: {"a": ca.by_dimension.get(d, {}).get(c, empty).to_dict(),
                            "b": cb.by_dimension.get(d, {}).get(c, empty).to_dict()} for c in checks}
                    for d in dims
                },
            }
        return {
            "a": self.a.key,
            "b": self.b.key,
            "judge": {"a": self.a.judge, "b": self.b.judge},
            "variant": {"a": self.a.variant, "b": self.b.variant},
            "reference": self.reference,
            "reference_judge": self.reference_judge,
            "n": self.n,
            "dimensions": {k: d.to_dict() for k, d in self.dimensions.items()},
            "overall": self.overall.to_dict(),
            "ko": self.ko.to_dict() if self.ko else None,
            "critique": crit,
            "cost": {"a": self.cost[0].to_dict(), "b": self.cost[1].to_dict()},
            "warnings": self.warnings,
        }


def _words(rationales: NDArray[np.object_], values: NDArray[np.float64]) -> NDArray[np.float64]:
    out = np.full(values.shape, np.nan)
    for idx in zip(*np.nonzero(np.isfinite(values)), strict=True):
        text = rationales[idx]
        if text:
            out[idx] = len(str(text).split())
    return out


def _dimension(key: str, A: NDArray, B: NDArray, R: NDArray | None, WA: NDArray, WB: NDArray,
               n_boot: int, seed: int) -> ABDimension:
    """Every estimate of one dimension (or of all, pooled, when the arrays have several columns)."""
    both = np.isfinite(A) & np.isfinite(B)
    nan = np.full(A.shape, np.nan)

    def boot(x: NDArray) -> Estimate:
        return bootstrap_mean(x, n_boot, seed)

    if R is None:
        mad = (nan, nan, nan)
    else:
        common = both & np.isfinite(R)
        da = np.where(common, np.abs(A - R), np.nan)
        db = np.where(common, np.abs(B - R), np.nan)
        mad = (da, db, db - da)
    return ABDimension(
        key,
        boot(np.where(both, A, np.nan)), boot(np.where(both, B, np.nan)), boot(np.where(both, B - A, np.nan)),
        boot(mad[0]), boot(mad[1]), boot(mad[2]), boot(WA), boot(WB),
    )


def ab_report(
    s: Session,
    run_a: str | int | RunVerdicts,
    run_b: str | int | RunVerdicts,
    reference: reports.Source | None = None,
    critiques: tuple[CritiqueRates, CritiqueRates] | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    prices: dict[str, reports.Price] | None = None,
) -> ABReport:
    """Compare two runs of the same rubric on the same dataset — normally one judge, two prompt variants.

    Per scale dimension (and pooled over all of them, ``overall``): the mean score of each variant and
    the shift B − A on the examples both scored; with a reference, mean |Δ| of each variant to it and
    the paired difference, on the examples A, B and the reference all scored; rationale length in
    words. The K.O. section compares disqualification (score ≤ floor): concordance of A and B, and of
    each with the reference; plus each run's safety reconciliation (:func:`ko_report`). ``critiques``
    (one critique run of A, one of B) adds the rationale-quality rates per check. Different
    datasets or rubrics are an error; a different judge or the same prompt variant is a warning.
    """
    A = run_a if isinstance(run_a, RunVerdicts) else load_verdicts(s, run_a)
    B = run_b if isinstance(run_b, RunVerdicts) else load_verdicts(s, run_b)
    if A.run_id == B.run_id:
        raise ValueError(f"an A/B re-judge needs two different runs, got {A.key} twice")
    if A.index.dataset_id != B.index.dataset_id:
        raise ValueError(
            f"{A.key} and {B.key} belong to different datasets ({A.index.dataset}, {B.index.dataset})")
    if A.rubric_id != B.rubric_id:
        raise ValueError(f"{A.key} and {B.key} use different rubrics ({A.rubric.name}, {B.rubric.name}); "
                         "an A/B re-judge varies only the prompt")
    for v in (A, B):
        if v.harness.get("kind") == "critique":
            raise ValueError(f"{v.key} is a critique run; pass it with --critique")
    dims = [c.key for c in A.rubric.criteria if c.is_scale]
    if not dims:
        raise ValueError(
            f"rubric {A.rubric.name!r} has no 1–5 criterion: an A/B re-judge compares scale scores")
    warnings = []
    if A.judge_id != B.judge_id:
        warnings.append(f"different judges ({A.judge} vs {B.judge}): differences are not the prompt's alone")
    if A.variant == B.variant:
        warnings.append(f"both runs use prompt variant {A.variant!r}")
    if reference is not None and reference.index.dataset_id != A.index.dataset_id:
        raise ValueError(f"reference {reference.key} belongs to dataset {reference.index.dataset}, "
                         f"not {A.index.dataset}")
    if critiques is not None:
        for side, v, c in (("first", A, critiques[0]), ("second", B, critiques[1])):
            if c.target_id != v.run_id:
                raise ValueError(f"the {side} --critique ({c.critique}) critiques {c.target}, not {v.key}")
    cols = [A.col(k) for k in dims]
    VA, VB = A.values[:, cols], B.values[:, cols]
    R = None
    if reference is not None:
        ref = reference.select(dims)
        R = ref.raw
        missing = [k for k in dims if not np.isfinite(R[:, dims.index(k)]).any()]
        if len(missing) == len(dims):
            warnings.append(
                f"reference {reference.key} has no score on {', '.join(dims)}: mean |Δ| undefined")
    WA, WB = _words(A.rationales[:, cols], VA), _words(B.rationales[:, cols], VB)
    per = {
        k: _dimension(k, VA[:, [j]], VB[:, [j]], None if R is None else R[:, [j]], WA[:, [j]], WB[:, [j]],
                      n_boot, seed)
        for j, k in enumerate(dims)
    }
    overall = _dimension("all", VA, VB, R, WA, WB, n_boot, seed)
    n = int((A.judged & B.judged).sum())
    ko = None
    if A.rubric.ko_rule is not None and A.rubric.ko_rule.criterion in A.keys:
        ko = _ab_ko(s, A, B, reference)
    runs = [s.get(store.Run, v.run_id) for v in (A, B)]
    prices = reports.load_prices() if prices is None else prices
    cost = (reports.run_cost(s, runs[0], prices), reports.run_cost(s, runs[1], prices))
    ref_key, ref_judge = (reference.key, reference.judge) if reference else (None, None)
    return ABReport(A, B, ref_key, ref_judge, n, per, overall, ko, critiques, cost, warnings)


def _ab_ko(s: Session, A: RunVerdicts, B: RunVerdicts, reference: reports.Source | None) -> ABKO:
    rule = A.rubric.ko_rule
    assert rule is not None
    ka, kb = A.values[:, A.col(rule.criterion)], B.values[:, B.col(rule.criterion)]
    both = np.isfinite(ka) & np.isfinite(kb)
    da, db = ka <= rule.floor, kb <= rule.floor
    concord = rate(int((da == db)[both].sum()), int(both.sum()))
    dq = [rate(int(da[both].sum()), int(both.sum())), rate(int(db[both].sum()), int(both.sum())), None]
    agree = None
    if reference is not None:
        kr = reference.select([rule.criterion]).raw[:, 0]
        dr = kr <= rule.floor
        common = both & np.isfinite(kr)
        dq = [rate(int(x[common].sum()), int(common.sum())) for x in (da, db, dr)]
        agree = (rate(int((da == dr)[common].sum()), int(common.sum())),
                 rate(int((db == dr)[common].sum()), int(common.sum())))
    return ABKO(rule, tuple(dq), concord, agree, (ko_report(s, A), ko_report(s, B)))  # type: ignore[arg-type]


def _est(e: Estimate, fmt: str = ".2f", signed: bool = False) -> str:
    if not math.isfinite(e.value):
        return "–"
    sign = "+" if signed else ""
    ci = f" [{e.lo:{sign}{fmt}}, {e.hi:{sign}{fmt}}]" if math.isfinite(e.lo) else ""
    return f"{e.value:{sign}{fmt}}{ci}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    line = lambda cells: "  ".join(f"{str(c):<{w}}" for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return [line(header), *(line(r) for r in rows)]


def render_ab_table(rep: ABReport) -> str:
    A, B = rep.a, rep.b
    out = [
        f"a = {A.key}  (prompt variant {A.variant}; {A.judge})",
        f"b = {B.key}  (prompt variant {B.variant}; {B.judge})",
        f"reference = {rep.reference or '(none)'}"
        + (f"  ({rep.reference_judge})" if rep.reference_judge else ""),
        f"n = {rep.n} answers judged by both; 95 % intervals (Wilson for rates, bootstrap over answers)",
    ]
    if rep.critique:
        ca, cb = rep.critique
        out += ["", f"rationale quality (critique a = {ca.critique}, b = {cb.critique}; one check per call)"]
        checks = list(dict.fromkeys([*ca.checks, *cb.checks]))
        empty = rate(0, 0)
        out += _table(["check", "a", "b", "Δ (b − a)"], [
            [c, _pct(ca.checks.get(c, empty)), _pct(cb.checks.get(c, empty)),
             _delta(ca.checks.get(c, empty), cb.checks.get(c, empty))]
            for c in checks
        ])
    out += ["", "scores (mean |Δ| to the reference on answers a, b and the reference all scored)"]
    rows = []
    for d in [*rep.dimensions.values(), rep.overall]:
        ko = " (K.O.)" if rep.ko and d.key == rep.ko.rule.criterion else ""
        rows.append([d.key + ko, d.shift.examples, _est(d.shift, signed=True), _est(d.mad_a), _est(d.mad_b),
                     _est(d.mad_diff, signed=True), d.mad_a.n, _est(d.words_a, ".1f"),
                     _est(d.words_b, ".1f")])
    out += _table(["dimension", "n", "shift b − a", "mean|Δ| a", "mean|Δ| b", "Δ mean|Δ|", "n ref", "words a",
                   "words b"], rows)
    if rep.ko:
        k = rep.ko
        a, b, ref = k.disqualified
        out += ["", f"K.O. {k.rule.criterion} ≤ {k.rule.floor}",
                f"  disqualified      a {_pct(a)}   b {_pct(b)}"
                + (f"   reference {_pct(ref)}" if ref else ""),
                f"  concordance a↔b   {_pct(k.concordance)}"]
        if k.reference_agreement:
            ra, rb = k.reference_agreement
            out.append(f"  agree with ref    a {_pct(ra)}   b {_pct(rb)}")
        for side, r in zip(("a", "b"), k.reconciliation, strict=True):
            out.append(f"  reconciliation {side}  {len(r.contradictions)} contradictory of {r.flagged} "
                       f"safety-flagged; reconciled {_pct(r.reconciled)}; format-only flags set aside "
                       f"{r.format_only_flags}")
    ca, cb = rep.cost
    out += ["", f"{'cost':<18} {'a':<14} b"]
    for fld in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens", "usd"):
        va, vb = getattr(ca, fld), getattr(cb, fld)
        fmt = (lambda x: "–" if x is None else f"{x:.4f}") if fld == "usd" else (lambda x: f"{x}")
        out.append(f"{fld:<18} {fmt(va):<14} {fmt(vb)}")
    for w in rep.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)


def _delta(a: Rate, b: Rate) -> str:
    if not (a.n and b.n):
        return "–"
    return f"{(b.rate - a.rate) * 100:+.0f} pp"

