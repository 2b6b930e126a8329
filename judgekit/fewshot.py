"""Few-shot from the human column: K labelled examples per criterion shown to the judge.

Where this sits: ``judgekit run … --few-shot K`` (and the Run page) ask for K examples per criterion.
When the run is created, :func:`choose_pool` draws them from a human column — the consensus
(``human``, :func:`judgekit.sources.load_human`) or one annotator (``annotator:NAME``) — and the pool is
stored on the run's harness, so the run is reproducible and resumes with the same prompts whatever is
labelled later. At call time :class:`ShotPicker` gives each call, per criterion it asks, the first K
pool entries that are *not the example being judged* (the pool holds K + 1 for that reason), and
:func:`judgekit.prompts.few_shot_block` writes them into the criterion-specific tail of the prompt.

The draw (seeded, stable across processes): per criterion, the examples with a clean label (binary
pass/fail; a whole 1–5 score — a consensus median between two scores is left out), grouped by value,
each group shuffled with ``Random(f"{seed}:{criterion}")`` over sorted example ids, then taken round-robin
over the values in ascending order — so K = 4 on a binary criterion shows two fails and two passes
when both exist, rather than whatever the prevalence happens to give. A criterion with fewer than
K + 1 labelled examples is refused with a message naming it.

The agreement gain is measured like any other harness variable: run the same harness with and without
``--few-shot`` over the same sample and compare both with the human column (``report agreement``). The
shown examples are themselves judged in the run, each without itself among its shots.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import store
from judgekit.harness import Harness
from judgekit.prompts import ExampleText, Shot
from judgekit.rubric import Rubric

Pool = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]


def parse_source(source: str) -> tuple[str, str | None]:
    """``human`` → ("human", None); ``annotator:NAME`` or a bare NAME → ("annotator", NAME)."""
    source = (source or "human").strip()
    if source == "human":
        return "human", None
    name = source.removeprefix("annotator:").strip()
    if not name:
        raise ValueError("--few-shot-from must be human or annotator:NAME")
    return "annotator", name


def choose_pool(s: Session, dataset: store.Dataset, rubric: Rubric, k: int, seed: int, source: str) -> Pool:
    """Per criterion of ``rubric``, K + 1 labelled (example id, value) pairs from ``source`` (see module)."""
    from judgekit import sources  # numpy and scipy load here, when a pool is drawn: not at a run's start-up

    kind, name = parse_source(source)
    src = (sources.load_human(s, dataset, rubric.criteria) if kind == "human"
           else sources.load_annotator(s, dataset, name or "", rubric.criteria))
    ext = src.index.ext
    out = []
    for j, c in enumerate(src.criteria):
        values = src.raw[:, j]
        by_value: dict[int, list[str]] = {}
        for row in range(len(values)):
            v = values[row]
            if math.isfinite(v) and float(v).is_integer():
                by_value.setdefault(int(v), []).append(str(ext[row]))
        rng = random.Random(f"{seed}:{c.key}")
        groups = []
        for value in sorted(by_value):
            ids = sorted(by_value[value])
            rng.shuffle(ids)
            groups.append([(e, value) for e in ids])
        picked: list[tuple[str, int]] = []
        while len(picked) < k + 1 and any(groups):
            for g in groups:
                if g and len(picked) < k + 1:
                    picked.append(g.pop(0))
        if len(picked) < k + 1:
            raise ValueError(
                f"--few-shot {k}: criterion {c.key!r} has {len(picked)} labelled examples in {src.key} "
                f"of dataset {dataset.name!r}; K + 1 = {k + 1} are needed (one may be the example judged)"
            )
        out.append((c.key, tuple(picked)))
    return tuple(out)


@dataclass(frozen=True)
class ShotPicker:
    """The shots of each call of a few-shot run (texts loaded once per run)."""

    k: int
    pool: dict[str, tuple[tuple[str, int], ...]]
    texts: dict[str, ExampleText]

    def for_call(self, example_key: str, criteria: Sequence[str]) -> list[Shot]:
        """Per asked criterion, the first K pool entries other than ``example_key``; an example picked
        for several criteria is shown once with all its values, in order of first appearance."""
        chosen: dict[str, list[tuple[str, int]]] = {}
        for key in criteria:
            entries = [e for e in self.pool.get(key, ()) if e[0] != example_key][: self.k]
            for ext_id, value in entries:
                chosen.setdefault(ext_id, []).append((key, value))
        return [Shot(self.texts[e], tuple(v)) for e, v in chosen.items()]


def shot_picker(s: Session, dataset_id: int, harness: Harness) -> ShotPicker | None:
    """The picker of a run's harness (None without few-shot): the pool's texts in one query."""
    if not harness.few_shot or not harness.few_shot_pool:
        return None
    ids = sorted({e for _, pool in harness.few_shot_pool for e, _ in pool})
    rows = s.execute(
        select(store.Example.ext_id, store.Example.question, store.Example.context, store.Example.answer)
        .where(store.Example.dataset_id == dataset_id, store.Example.ext_id.in_(ids))
    ).all()
    texts = {ext: ExampleText(q or "", c or "", a) for ext, q, c, a in rows}
    missing = [e for e in ids if e not in texts]
    if missing:
        raise ValueError(f"few-shot example {missing[0]!r} is no longer in the dataset")
    return ShotPicker(harness.few_shot, dict(harness.few_shot_pool), texts)
