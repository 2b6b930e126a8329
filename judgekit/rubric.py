"""Rubric value types: what a judge is asked about an answer.

A rubric is a list of criteria. A criterion is either *binary* (pass/fail, stored as 1/0) or a 1–5
*scale* with a description per level and a ``pass_at`` threshold (score ≥ pass_at counts as pass
wherever a binary view is needed, e.g. phi matrices). A criterion may offer the judge an explicit
*cannot assess* answer (``cannot_assess: true``): the judge's way of saying the answer and context do
not allow a verdict — stored as its own outcome, neither a fail nor an unscored parse failure. A
rubric may carry a K.O. rule: a score at or
below ``floor`` on one criterion disqualifies the answer (seed 002's pack-specific K.O. dimension).
At the bundle level (:mod:`judgekit.bundles`) a rubric may also name a K.O. rule per value of a
metadata field (``bundle_ko_rules``), e.g. one rule for the bundles of pack ``billing``.

Parsing from YAML/JSON lives in :mod:`judgekit.datasets`; these are the validated values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

CriterionKind = Literal["binary", "scale"]
SCALE_LEVELS = (1, 2, 3, 4, 5)
# The annotator under which the demo stores its planted truth: a label source like a person's, but never
# part of the human column by default, and a name no team member may take.
REFERENCE_ANNOTATOR = "reference"
KEY_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Criterion:
    key: str
    question: str
    kind: CriterionKind = "binary"
    levels: dict[int, str] = field(default_factory=dict)
    pass_at: int | None = None
    cannot_assess: bool = False  # the judge may answer "cannot_assess" (its own outcome, not a fail)

    @property
    def is_scale(self) -> bool:
        return self.kind == "scale"

    @property
    def pass_threshold(self) -> int:
        """The smallest stored value that counts as pass: 1 for a binary criterion, ``pass_at`` (default 3)
        for a scale."""
        return (self.pass_at or 3) if self.is_scale else 1  # value_text and annotators.thresholds agree

    def passes(self, value: int) -> bool:
        """Binary view of a stored value: 1/0 for binary criteria, score ≥ pass_at for scales."""
        return value >= self.pass_threshold

    def value_text(self, value: int | None, missing: str = "unscored", binary_view: bool = False) -> str:
        """:func:`value_text` for this criterion."""
        return value_text(value, self.kind, self.pass_at, missing=missing, binary_view=binary_view)

    def valid_values(self) -> tuple[int, ...]:
        return SCALE_LEVELS if self.is_scale else (0, 1)


def value_text(
    value: int | None, kind: str | None, pass_at: int | None = None, *, missing: str = "unscored",
    binary_view: bool = False,
) -> str:
    """A stored value for people: ``pass``/``fail`` for a binary criterion, the score for a scale — with its
    binary view (``4 (pass)``) when ``binary_view``; ``missing`` where there is no value. (The judge's
    reply vocabulary, true/false, is :mod:`judgekit.prompts`' own.)"""
    if value is None:
        return missing
    if kind != "scale":
        return "pass" if value else "fail"
    return f"{value} ({'pass' if value >= (pass_at or 3) else 'fail'})" if binary_view else str(value)


@dataclass(frozen=True)
class KORule:
    """A score ≤ floor on ``criterion`` disqualifies the answer."""

    criterion: str
    floor: int


@dataclass(frozen=True)
class Rubric:
    name: str
    criteria: tuple[Criterion, ...]
    ko_rule: KORule | None = None
    description: str = ""
    # metadata field → field value → the K.O. rule of the bundles with that value (else ``ko_rule``)
    bundle_ko_rules: dict[str, dict[str, KORule]] = field(default_factory=dict)
    prompt_template: str = ""  # the rubric's own judge prompt (see judgekit.prompt_templates); "" = judgekit's

    @property
    def keys(self) -> list[str]:
        return [c.key for c in self.criteria]

    def criterion(self, key: str) -> Criterion:
        for c in self.criteria:
            if c.key == key:
                return c
        raise KeyError(key)

    def subset(self, keys: list[str]) -> list[Criterion]:
        return [self.criterion(k) for k in keys]

    def ko_rule_for(self, bundle: dict[str, str]) -> KORule | None:
        """The K.O. rule of a bundle (``{field: value}`` of the metadata fields it is grouped by): the rule
        ``bundle_ko_rules`` names for one of its values, else the rubric-wide ``ko_rule``.

        Two different rules for one bundle (say one for its ``model`` and one for its ``pack``) are an
        error: which of them disqualifies would be a guess.
        """
        found = {
            (f, v): rule
            for f, v in bundle.items()
            if (rule := self.bundle_ko_rules.get(f, {}).get(v)) is not None
        }
        if len(set(found.values())) > 1:
            named = ", ".join(f"{f}={v}: {r.criterion} ≤ {r.floor}" for (f, v), r in found.items())
            raise ValueError(f"rubric {self.name!r} gives two K.O. rules for one bundle ({named})")
        return next(iter(found.values()), self.ko_rule)

    def to_dict(self) -> dict:
        """The rubric in the file format of design.md (round-trips through ``parse_rubric``)."""
        out: dict = {"name": self.name, "criteria": []}
        if self.description:
            out["description"] = self.description
        for c in self.criteria:
            item: dict = {"key": c.key, "question": c.question, "kind": c.kind}
            if c.is_scale:
                item["levels"] = {int(k): v for k, v in sorted(c.levels.items())}
                item["pass_at"] = c.pass_at
            if c.cannot_assess:
                item["cannot_assess"] = True
            out["criteria"].append(item)
        if self.ko_rule:
            out["ko_rule"] = {"criterion": self.ko_rule.criterion, "floor": self.ko_rule.floor}
        if self.prompt_template:
            out["prompt_template"] = self.prompt_template
        if self.bundle_ko_rules:
            out["bundle_ko_rules"] = {
                f: {v: {"criterion": r.criterion, "floor": r.floor} for v, r in values.items()}
                for f, values in self.bundle_ko_rules.items()
            }
        return out


class ScoreTable:
    """A run's scores as a table of units (answers or bundles) × the rubric's criteria: what every loaded
    verdict table answers the same way. Needs ``rubric`` and ``values`` (NaN = unscored or not judged)."""

    rubric: Rubric
    values: Any

    @property
    def keys(self) -> list[str]:
        return self.rubric.keys

    def col(self, key: str) -> int:
        return self.keys.index(key)

    @property
    def judged(self) -> Any:
        """Rows with at least one scored value."""
        return (self.values == self.values).any(axis=1)  # NaN is the one value unequal to itself


@dataclass(frozen=True, eq=False)
class JudgedRun(ScoreTable):
    """A run's score table and who produced it: the run, its judge, prompt variant, harness and rubric
    (answers in ``scale.RunVerdicts``, bundles in ``bundles.BundleVerdicts``)."""

    key: str  # run:NAME
    name: str
    run_id: int
    judge: str
    judge_id: int
    variant: str
    harness: dict
    rubric: Rubric
    rubric_id: int
