"""Harness specs → the calls a run needs. Pure.

A *harness* is the experimental variable of seed 003: how the criteria of a rubric are put to the
judge. ``single`` asks every criterion in one call (one JSON field each, emitted in order — later
fields are conditioned on earlier ones); ``split`` asks one criterion per call; ``grouped`` asks
chosen groups (``grouped:a+b|c+d``), trading a known amount of contamination for a known amount
of money. Options change what each call looks like (field order, shuffling, the placebo
independence sentence, the structured-output mode, log-probabilities, the prompt template).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass, field
from typing import Literal

from judgekit.rubric import Rubric

HarnessKind = Literal["single", "split", "grouped"]
Level = Literal["answer", "bundle"]  # what one verdict is about: an answer, or a bundle of answers
Order = Literal["verdict_first", "reasoning_first", "verdict_only"]
Structured = Literal["auto", "json_schema", "json_object", "prompt"]
Layout = Literal["shared_prefix", "criterion_first"]
ORDERS: tuple[str, ...] = ("verdict_first", "reasoning_first", "verdict_only")
STRUCTURED_MODES: tuple[str, ...] = ("auto", "json_schema", "json_object", "prompt")
LAYOUTS: tuple[str, ...] = ("shared_prefix", "criterion_first")
MAX_FEW_SHOT = 20


class HarnessError(ValueError):
    """A harness spec that cannot be used with the chosen rubric."""


@dataclass(frozen=True)
class Harness:
    kind: HarnessKind = "single"
    groups: tuple[tuple[str, ...], ...] = ()
    order: Order = "verdict_first"
    shuffle: bool = False
    independence_note: bool = False
    structured: Structured = "auto"
    logprobs: bool = False
    prompt_variant: str = "default"
    layout: Layout = "shared_prefix"
    seed: int = 0  # seeds the per-example shuffle
    # The user's prompt template (its source, stored on the run so the run is reproducible) and its name.
    prompt_template: str = ""
    prompt_template_name: str = ""
    # Few-shot from a human column: K labelled examples per criterion, drawn with few_shot_seed from
    # few_shot_from ("human" = the consensus, or "annotator:NAME"); the pool is fixed when the run is
    # created — per criterion K + 1 (example id, value) pairs, so the judged example can always be left out.
    few_shot: int = 0
    few_shot_from: str = ""
    few_shot_seed: int = 0
    few_shot_pool: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    level: Level = "answer"  # "bundle": seed 002's holistic call over bundles (judgekit.bundles)
    extra: dict = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["groups"] = [list(g) for g in self.groups]
        out["few_shot_pool"] = [[k, [list(e) for e in pool]] for k, pool in self.few_shot_pool]
        out.pop("extra")
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Harness:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "extra"}
        known["groups"] = tuple(tuple(g) for g in known.get("groups", ()))
        known["few_shot_pool"] = tuple(
            (str(k), tuple((str(e), int(v)) for e, v in pool)) for k, pool in known.get("few_shot_pool") or ()
        )
        return cls(**known)

    @property
    def label(self) -> str:
        if self.kind == "grouped":
            return "grouped:" + "|".join("+".join(g) for g in self.groups)
        return self.kind


def parse_harness(
    spec: str,
    *,
    order: str = "verdict_first",
    shuffle: bool = False,
    independence_note: bool = False,
    structured: str = "auto",
    logprobs: bool = False,
    prompt_variant: str = "default",
    layout: str = "shared_prefix",
    seed: int = 0,
    prompt_template: str = "",
    prompt_template_name: str = "",
    few_shot: int = 0,
    few_shot_from: str = "human",
    few_shot_seed: int | None = None,
    level: str = "answer",
) -> Harness:
    """``single`` | ``split`` | ``grouped:a+b|c+d`` plus options → a :class:`Harness`.

    A ``prompt_template`` is validated here, before any call (an :class:`~judgekit.datasets.InputError`
    names the problem), as a template of the call ``level`` (``answer``, or ``bundle``: the holistic call).
    ``few_shot`` > 0 asks for K labelled examples per criterion; the pool itself is drawn when the run is
    created (:func:`judgekit.fewshot.choose_pool`), ``few_shot_seed`` defaulting to ``seed``.
    """
    spec = spec.strip()
    if order not in ORDERS:
        raise HarnessError(f"--order must be one of {', '.join(ORDERS)}, not {order!r}")
    if structured not in STRUCTURED_MODES:
        raise HarnessError(f"--structured must be one of {', '.join(STRUCTURED_MODES)}, not {structured!r}")
    if layout not in LAYOUTS:
        raise HarnessError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    if prompt_template:
        from judgekit.prompt_templates import ANSWER, BUNDLE, compile_template

        if layout != "shared_prefix":
            raise HarnessError("a prompt template keeps the shared-prefix layout: drop --layout criterion_first")
        compile_template(prompt_template, prompt_template_name or "template", BUNDLE if level == "bundle" else ANSWER)
    if not 0 <= few_shot <= MAX_FEW_SHOT:
        raise HarnessError(f"--few-shot must be within 0..{MAX_FEW_SHOT}, not {few_shot}")
    groups: tuple[tuple[str, ...], ...] = ()
    if spec in ("single", "split"):
        kind = spec
    elif spec.startswith("grouped:"):
        kind = "grouped"
        body = spec.removeprefix("grouped:")
        groups = tuple(tuple(k.strip() for k in g.split("+") if k.strip()) for g in body.split("|"))
        if not body or any(not g for g in groups):
            raise HarnessError(f"--harness {spec!r}: write groups as grouped:a+b|c+d")
    else:
        raise HarnessError(f"--harness must be single, split or grouped:a+b|c+d, not {spec!r}")
    return Harness(
        kind=kind,
        groups=groups,
        order=order,
        shuffle=shuffle,
        independence_note=independence_note,  # type: ignore[arg-type]
        structured=structured,
        logprobs=logprobs,
        prompt_variant=prompt_variant,
        layout=layout,
        seed=seed,  # type: ignore[arg-type]
        prompt_template=prompt_template,
        prompt_template_name=prompt_template_name,
        few_shot=few_shot,
        few_shot_from=(few_shot_from or "human") if few_shot else "",
        few_shot_seed=(seed if few_shot_seed is None else few_shot_seed) if few_shot else 0,
    )


def criterion_groups(harness: Harness, rubric: Rubric) -> list[tuple[str, ...]]:
    """The criterion keys of each call per example, before any per-example shuffle.

    For ``grouped``, criteria that no group names get a call each; a key named twice or not in the
    rubric is an error.
    """
    keys = rubric.keys
    if harness.kind == "single":
        return [tuple(keys)]
    if harness.kind == "split":
        return [(k,) for k in keys]
    seen: set[str] = set()
    for group in harness.groups:
        for k in group:
            if k not in keys:
                raise HarnessError(
                    f"grouped harness names {k!r}, which is not a criterion of rubric {rubric.name!r} "
                    f"({', '.join(keys)})"
                )
            if k in seen:
                raise HarnessError(f"grouped harness names {k!r} twice")
            seen.add(k)
    return [tuple(g) for g in harness.groups] + [(k,) for k in keys if k not in seen]


def shuffled(keys: tuple[str, ...], harness: Harness, example_key: str) -> tuple[str, ...]:
    """Per-example seeded criterion order (stable across processes: no use of ``hash()``)."""
    if not harness.shuffle or len(keys) < 2:
        return keys
    digest = hashlib.sha256(f"{harness.seed}:{example_key}:{'|'.join(keys)}".encode()).digest()
    order = list(keys)
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return tuple(order)


@dataclass(frozen=True)
class PlannedCall:
    example_id: int | None  # internal id (None for a call about a bundle)
    example_key: str  # the user's id (seeds the shuffle); a bundle's label
    criteria: tuple[str, ...]  # in the order the judge is asked
    bundle_id: int | None = None  # set for a bundle-level call (judgekit.bundles)


def plan_calls(harness: Harness, rubric: Rubric, examples: list[tuple[int, str]]) -> list[PlannedCall]:
    """Every call of a run, example by example (calls of one example stay adjacent for prefix caches)."""
    groups = criterion_groups(harness, rubric)
    return [
        PlannedCall(ex_id, ex_key, shuffled(group, harness, ex_key))
        for ex_id, ex_key in examples
        for group in groups
    ]


def sample_examples(
    ext_ids: list[str], *, limit: int | None = None, sample: int | None = None, seed: int = 0
) -> list[str]:
    """The examples a run covers: all, the first ``limit``, or a seeded random ``sample``.

    The same (sample, seed) picks the same examples for every harness of a comparison, whatever
    order the dataset was imported in; the result keeps dataset order.
    """
    if limit is not None and sample is not None:
        raise HarnessError("use --limit or --sample, not both")
    if limit is not None:
        return ext_ids[: max(0, limit)]
    if sample is None or sample >= len(ext_ids):
        return list(ext_ids)
    chosen = set(random.Random(seed).sample(sorted(ext_ids), max(0, sample)))
    return [e for e in ext_ids if e in chosen]


PRESETS: dict[str, dict] = {
    "single": {"spec": "single"},
    "split": {"spec": "split"},
    "single + independence note": {"spec": "single", "independence_note": True},
    "single, shuffled order": {"spec": "single", "shuffle": True},
    "single, reasoning first": {"spec": "single", "order": "reasoning_first"},
}


def preset(name: str, **options) -> Harness:
    """A named harness variant (the Run page's choices); ``options`` apply to every variant."""
    chosen = dict(PRESETS[name])
    spec = chosen.pop("spec")
    return parse_harness(spec, **{**options, **chosen})
