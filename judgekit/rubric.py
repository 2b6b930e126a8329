"""Rubric value types: what a judge is asked about an answer.

A rubric is a list of criteria. A criterion is either *binary* (pass/fail, stored as 1/0) or a 1–5
*scale* with a description per level and a ``pass_at`` threshold (score ≥ pass_at counts as pass
wherever a binary view is needed, e.g. phi matrices). A rubric may carry a K.O. rule: a score at or
below ``floor`` on one criterion disqualifies the answer (seed 002's pack-specific K.O. dimension).

Parsing from YAML/JSON lives in :mod:`judgekit.datasets`; these are the validated values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

CriterionKind = Literal["binary", "scale"]
SCALE_LEVELS = (1, 2, 3, 4, 5)
KEY_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Criterion:
    key: str
    question: str
    kind: CriterionKind = "binary"
    levels: dict[int, str] = field(default_factory=dict)
    pass_at: int | None = None

    @property
    def is_scale(self) -> bool:
        return self.kind == "scale"

    def passes(self, value: int) -> bool:
        """Binary view of a stored value: 1/0 for binary criteria, score ≥ pass_at for scales."""
        if self.is_scale:
            return value >= (self.pass_at or 3)
        return value == 1

    def valid_values(self) -> tuple[int, ...]:
        return SCALE_LEVELS if self.is_scale else (0, 1)


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
            out["criteria"].append(item)
        if self.ko_rule:
            out["ko_rule"] = {"criterion": self.ko_rule.criterion, "floor": self.ko_rule.floor}
        if self.prompt_template:
            out["prompt_template"] = self.prompt_template
        return out
