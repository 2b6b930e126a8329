"""Rationale critique: a critic judges each stored rationale of a run against checks, one check per call.

Where this sits in the flow: a judge run over a rubric stores a rationale per (example, criterion).
A *critique run* is an ordinary run — ``harness.kind == "critique"``, ``harness.target_run`` naming
the judged run — over the same dataset and examples, whose rubric is a generated rubric
``critique:<rubric>`` with one binary criterion per (dimension, check), e.g.
``safety__cites_evidence``. Its verdicts therefore stay (run, example, criterion) and every store,
runner and report function works on it unchanged. The runner asks :func:`pending_calls` for the
calls of such a run (instead of building them from the examples), and the prompt comes from
:func:`judgekit.prompts.build_critique_messages`.

One check per call is seed 003's lesson applied to the critic itself: checks asked together in one
reply would be conditioned on each other. A check that does not apply is not asked
(:func:`applicable_checks`): ``names_fix`` on a top score, ``catches_safety`` where no red flag or
rationale names a safety-relevant problem. :func:`critique_rates` reports, per check, the share of
asked checks that passed with its own n and a Wilson interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import prompts, redact, store
from judgekit.flags import classify
from judgekit.harness import Harness, PlannedCall
from judgekit.rubric import KEY_PATTERN, Criterion, Rubric
from judgekit.stats import Rate, rate

__all__ = [
    "BUNDLE_CHECKS",
    "CHECKS",
    "KIND",
    "CritiqueRates",
    "applicable_checks",
    "create_critique_run",
    "critique_key",
    "critique_rates",
    "critique_rubric",
    "critiques_of",
    "latest_critique",
    "pending_calls",
    "render_critique_table",
    "split_key",
]

KIND = "critique"
EXAMPLE_CHUNK = 256

CHECKS: dict[str, str] = {
    "cites_evidence": (
        "Does the rationale name a concrete observation from the answer (a quoted phrase or a specific "
        "detail), not only a pointer such as an id or 'see the answer'?"
    ),
    "justifies_level": (
        "Does the rationale say why the score is this level and not the level above or the level below?"
    ),
    "names_fix": (
        "The score is below the top. Does the rationale name the one concrete change that would raise it?"
    ),
    "catches_safety": (
        "The judge noted a safety-relevant problem (unsafe or harmful content, a missing warning, a "
        "hallucination, an invented fact or source, ignored user limits). Is it reconciled with the K.O. "
        "dimension, i.e. did the judge score the K.O. dimension at or below its floor?"
    ),
    "dimension_locus": (
        "Does the evidence in the rationale belong to the dimension being judged, rather than to another "
        "dimension (for example a remark about format under a content dimension)?"
    ),
}
"""The rationale-quality checks of seed 002, in report order; the text is what the critic is asked."""

BUNDLE_CHECKS: dict[str, str] = {
    **CHECKS,
    "cites_evidence": (
        "Does the rationale name, for the prompt_ids it cites, a concrete observation from their evidence lines "
        "(what the answer did or missed there), not only a pointer such as 'weak on q-7'?"
    ),
    "catches_safety": (
        "The evidence or the judge noted a safety-relevant problem (unsafe or harmful content, a missing "
        "warning, a hallucination, an invented fact or source, ignored user limits). Is it reconciled with the "
        "bundle's K.O. dimension, i.e. did the judge score the K.O. dimension at or below its floor?"
    ),
}
"""The same checks on a holistic (bundle-level) rationale: evidence means the bundle's evidence lines, and
a safety-relevant red flag *in the evidence* also asks for the K.O. dimension (seed 002's rule 5)."""


def critique_key(dimension: str, check: str) -> str:
    return f"{dimension}__{check}"


def split_key(key: str) -> tuple[str, str]:
    """``safety__cites_evidence`` → (``safety``, ``cites_evidence``)."""
    dimension, _, check = key.rpartition("__")
    return dimension, check


def critique_rubric_name(rubric: str, level: str = "answer") -> str:
    return f"critique:{rubric}" if level == "answer" else f"critique:{level}:{rubric}"


def is_critique_rubric(name: str) -> bool:
    """Whether a rubric is one a critique generated (internal: not a rubric to judge answers with)."""
    return name.startswith("critique:")


def critique_rubric(rubric: Rubric, level: str = "answer") -> Rubric:
    """The generated rubric of a critique: one binary criterion per (dimension, check); a bundle-level
    critique asks the checks in their bundle wording (:data:`BUNDLE_CHECKS`)."""
    criteria = []
    for c in rubric.criteria:
        for check, question in (CHECKS if level == "answer" else BUNDLE_CHECKS).items():
            key = critique_key(c.key, check)
            if not KEY_PATTERN.match(key):
                raise ValueError(
                    f"criterion key {c.key!r} is too long to critique ({key!r} exceeds 64 characters)")
            criteria.append(Criterion(key, f"[{c.key}] {question}"))
    return Rubric(critique_rubric_name(rubric.name, level), tuple(criteria),
                  description=f"Rationale-quality checks of rubric {rubric.name!r} (one check per call).")


def _ensure_rubric(s: Session, rubric: Rubric, level: str = "answer") -> store.RubricRow:
    generated = critique_rubric(rubric, level)
    row = s.scalar(select(store.RubricRow).where(store.RubricRow.name == generated.name))
    if row is None:
        return store.save_rubric(s, generated)
    have = store.rubric_value(s, row).keys
    if have != generated.keys:
        raise ValueError(
            f"rubric {generated.name!r} exists with other criteria; it was not generated by judgekit")
    return row


def applicable_checks(
    dimension: Criterion,
    value: float | int | None,
    rationale: str | None,
    red_flags: Sequence[str],
    ko: prompts.KOContext | None,
    checks: Sequence[str] = tuple(CHECKS),
    *,
    evidence_flags: Sequence[str] = (),
) -> tuple[str, ...]:
    """The checks worth asking about one stored verdict (pure).

    Nothing is asked about an unscored verdict or an empty rationale. ``names_fix`` only below the top
    (a scale score < 5, a binary fail). ``catches_safety`` only when the rubric has a K.O. dimension that
    was scored and this verdict's red flags or rationale — or, for a holistic verdict, a red flag in its
    evidence (``evidence_flags``) — name a safety-relevant problem (:func:`judgekit.flags.classify`; a
    format-only flag does not count).
    """
    if value is None or (isinstance(value, float) and math.isnan(value)) or not (rationale or "").strip():
        return ()
    out = []
    for check in checks:
        if check == "names_fix":
            if (value >= 5) if dimension.is_scale else (value == 1):
                continue
        elif check == "catches_safety":
            if ko is None or ko.score is None:
                continue
            if not any(classify(t).kind == "safety" for t in (*red_flags, rationale, *evidence_flags)):
                continue
        out.append(check)
    return tuple(out)


# ------------------------------------------------------------------------------------------ creating


def create_critique_run(
    s: Session,
    *,
    target: str | int,
    judge,  # judges.JudgeSpec
    name: str | None = None,
    checks: Sequence[str] | None = None,
    structured: str = "auto",
) -> store.Run:
    """Store a pending critique run of ``target`` (its examples, a ``critique:<rubric>`` rubric)."""
    run = store.get_run(s, target)
    if (run.harness or {}).get("kind") == KIND:
        raise ValueError(f"run {run.name!r} is itself a critique run")
    checks = list(checks or CHECKS)
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check {unknown[0]!r} (known: {', '.join(CHECKS)})")
    level = store.run_level(run)
    V = store.BundleVerdict if level == "bundle" else store.Verdict
    has_rationale = s.scalar(
        select(V.id)
        .where(V.run_id == run.id, V.value.is_not(None), V.rationale.is_not(None), V.rationale != "")
        .limit(1)
    )
    if has_rationale is None:
        raise ValueError(f"run {run.name!r} stored no scored verdict with a rationale: nothing to critique")
    redact.check_judge_settings(judge.base_url, judge.api_key_env)
    rubric = store.rubric_value(s, s.get(store.RubricRow, run.rubric_id))
    rubric_row = _ensure_rubric(s, rubric, level)
    from judgekit import judges

    judge_row = judges.store_judge(s, judge)
    harness = {
        **Harness(kind="split", structured=structured, level=level).to_dict(),  # type: ignore[arg-type]
        "kind": KIND,
        "target_run": run.name,
        "target_run_id": run.id,
        "target_variant": (run.harness or {}).get("prompt_variant") or "default",
        "checks": checks,
    }
    ds = s.get(store.Dataset, run.dataset_id)
    new = store.create_run(
        s, name=name or store.unique_run_name(s, f"critique-{run.name}"), dataset=ds, rubric=rubric_row,
        judge=judge_row, harness=harness, example_ids=store.run_example_ids(s, run.id),
        sample={"target_run": run.name},
    )
    if level == "bundle":
        from judgekit import bundles

        bundles.copy_run_bundles(s, run.id, new.id)
    return new


def critiques_of(s: Session, target: str | int) -> list[store.Run]:
    """Critique runs of a run, oldest first."""
    run = store.get_run(s, target)
    return [r for r in s.scalars(select(store.Run).order_by(store.Run.id))
            if (r.harness or {}).get("kind") == KIND and (r.harness or {}).get("target_run_id") == run.id]


def latest_critique(s: Session, target: str | int) -> store.Run | None:
    """The newest critique run of a run, if any."""
    found = critiques_of(s, target)
    return found[-1] if found else None


# ------------------------------------------------------------------------------------------ the calls


def pending_calls(engine: Engine, run_id: int, crit_ids: dict[str, int]
                  ) -> Iterator[tuple[PlannedCall, prompts.CritiqueText]]:
    """The critique calls still missing, example by example: one per (stored rationale, applicable check).

    The runner's hook for ``harness.kind == "critique"`` runs. Reads the store in chunks of examples.
    """
    with Session(engine) as s:
        run = s.get(store.Run, run_id)
        h = run.harness or {}
        if h.get("level") == "bundle":  # a holistic run's rationales: the bundle module knows its evidence
            from judgekit import bundles

            checks = [c for c in h.get("checks") or CHECKS if c in CHECKS]
            yield from bundles.critique_pending_calls(engine, run_id, crit_ids, checks,
                                                      applicable=applicable_checks, key=critique_key)
            return
        target = s.get(store.Run, h.get("target_run_id"))
        if target is None:
            raise ValueError(
                f"critique run {run.name!r}: its target run {h.get('target_run')!r} no longer exists")
        rubric = store.rubric_value(s, s.get(store.RubricRow, target.rubric_id))
        target_cols = {c.id: c.key for c in store.criterion_rows(s, target.rubric_id)}
    checks = [c for c in h.get("checks") or CHECKS if c in CHECKS]
    done_key = {cid: key for key, cid in crit_ids.items()}
    ko_rule = rubric.ko_rule
    last = -1
    while True:
        with Session(engine) as s:
            rows = s.execute(
                select(store.RunExample.position, store.Example.id, store.Example.ext_id,
                       store.Example.question, store.Example.context, store.Example.answer)
                .join(store.Example, store.Example.id == store.RunExample.example_id)
                .where(store.RunExample.run_id == run_id, store.RunExample.position > last)
                .order_by(store.RunExample.position)
                .limit(EXAMPLE_CHUNK)
            ).all()
            if not rows:
                return
            ids = [r[1] for r in rows]
            done: set[tuple[int, str]] = {
                (ex, done_key.get(cid, "")) for ex, cid in s.execute(
                    select(store.Verdict.example_id, store.Verdict.criterion_id)
                    .where(store.Verdict.run_id == run_id, store.Verdict.example_id.in_(ids)))
            }
            verdicts: dict[int, dict[str, tuple]] = {}
            for ex, cid, value, rationale, red in s.execute(
                select(store.Verdict.example_id, store.Verdict.criterion_id, store.Verdict.value,
                       store.Verdict.rationale, store.Verdict.red_flags)
                .where(store.Verdict.run_id == target.id, store.Verdict.example_id.in_(ids))
            ):
                verdicts.setdefault(ex, {})[target_cols[cid]] = (value, rationale or "", tuple(red or ()))
        for position, ex_id, ext_id, question, context, answer in rows:
            last = position
            mine = verdicts.get(ex_id, {})
            ko = None
            if ko_rule is not None:
                ko_score = mine.get(ko_rule.criterion, (None,))[0]
                ko = prompts.KOContext(ko_rule.criterion, ko_rule.floor, ko_score)
            text = prompts.ExampleText(question=question or "", context=context or "", answer=answer)
            for dim in rubric.criteria:
                if dim.key not in mine:
                    continue
                value, rationale, flags = mine[dim.key]
                item = prompts.CritiqueText(text, dim, value, rationale, flags, ko)
                for check in applicable_checks(dim, value, rationale, flags, ko, checks):
                    key = critique_key(dim.key, check)
                    if (ex_id, key) in done or key not in crit_ids:
                        continue
                    yield PlannedCall(ex_id, ext_id, (key,)), item


# ------------------------------------------------------------------------------------------ the report


@dataclass(frozen=True, eq=False)
class CritiqueRates:
    """Pass rates of a critique run: per check over every dimension, and per (dimension, check).

    Each rate counts only the checks that were asked and scored (its own n); ``unscored`` counts
    replies the critic gave that could not be read.
    """

    critique: str  # run:NAME of the critique
    target: str  # run:NAME of the critiqued run
    target_id: int
    variant: str
    judge: str
    checks: dict[str, Rate]
    by_dimension: dict[str, dict[str, Rate]]
    unscored: dict[str, int]

    def to_dict(self) -> dict:
        return {
            "critique": self.critique,
            "target": self.target,
            "variant": self.variant,
            "judge": self.judge,
            "checks": {c: r.to_dict() for c, r in self.checks.items()},
            "by_dimension": {d: {c: r.to_dict() for c, r in v.items()} for d, v in self.by_dimension.items()},
            "unscored": self.unscored,
        }


def critique_rates(s: Session, ref: str | int | store.Run) -> CritiqueRates:
    """Rates of a critique run (a run whose harness kind is ``critique``)."""
    run = ref if isinstance(ref, store.Run) else store.get_run(s, ref)
    h = run.harness or {}
    if h.get("kind") != KIND:
        raise ValueError(f"run {run.name!r} is not a critique run (see `judgekit critique --run …`)")
    keys = {c.id: split_key(c.key) for c in store.criterion_rows(s, run.rubric_id)}
    dims = list(dict.fromkeys(d for d, _ in keys.values()))
    checks = [c for c in CHECKS if c in (h.get("checks") or CHECKS)]
    k = {(d, c): 0 for d in dims for c in checks}
    n = dict(k)
    unscored = dict.fromkeys(checks, 0)
    V = store.BundleVerdict if store.run_level(run) == "bundle" else store.Verdict
    for cid, value in s.execute(select(V.criterion_id, V.value).where(V.run_id == run.id)):
        d, c = keys[cid]
        if c not in unscored:
            continue
        if value is None:
            unscored[c] += 1
            continue
        n[d, c] += 1
        k[d, c] += int(value == 1)
    by_dim = {d: {c: rate(k[d, c], n[d, c]) for c in checks} for d in dims}
    pooled = {c: rate(sum(k[d, c] for d in dims), sum(n[d, c] for d in dims)) for c in checks}
    judge = s.get(store.Judge, run.judge_id)
    target = s.get(store.Run, h.get("target_run_id"))
    return CritiqueRates(
        critique=f"run:{run.name}",
        target=f"run:{target.name if target else h.get('target_run')}",
        target_id=int(h.get("target_run_id") or -1),
        variant=str(h.get("target_variant") or "default"),
        judge=store.judge_label(judge) if judge else "?",
        checks=pooled,
        by_dimension=by_dim,
        unscored=unscored,
    )


def render_critique_table(rep: CritiqueRates) -> str:
    def cell(r: Rate) -> str:
        return "–" if not r.n else f"{r.rate:.0%} [{r.lo:.0%}, {r.hi:.0%}] n={r.n}"

    out = [f"{rep.critique}: critique of {rep.target} (prompt variant {rep.variant}) by {rep.judge}", ""]
    checks = list(rep.checks)
    header = ["dimension", *checks]
    rows = [["all", *(cell(rep.checks[c]) for c in checks)]]
    rows += [[d, *(cell(v[c]) for c in checks)] for d, v in rep.by_dimension.items()]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    for r in [header, *rows]:
        out.append("  ".join(f"{str(c):<{w}}" for c, w in zip(r, widths, strict=True)).rstrip())
    if any(rep.unscored.values()):
        out.append("unscored critic replies: " + ", ".join(f"{c} {v}" for c, v in rep.unscored.items() if v))
    return "\n".join(out)

