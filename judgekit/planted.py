"""Planted corpora for calibration: a known truth with chosen associations, graded by the simulated judge.

Where this sits: the demo (:mod:`judgekit.demo`) is one fixed corpus with texts; calibrating the
association audit needs *many* corpora whose truth is known exactly and whose structure varies (failure
rates, which pairs are associated and how strongly, in which direction). :func:`planted_truth` draws such
a truth; :func:`judge_truth` grades it with :class:`judgekit.simjudge.SimJudge` -- the same model and code
the ``judgekit sim-judge`` server runs, called in-process with prompts built by :mod:`judgekit.prompts`
for the harness's real call plan (:func:`judgekit.harness.plan_calls`), so no HTTP round trips.
``bench/audit_calibration.py`` and the audit's simulation tests are built on these two functions.

Conventions as in :mod:`judgekit.stats`: ``1.0`` = pass, ``0.0`` = fail; rows are answers, columns criteria.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from judgekit import prompts, simjudge
from judgekit.harness import Harness, plan_calls
from judgekit.rubric import Criterion, Rubric

__all__ = ["PlantedPair", "PlantedCorpus", "cell_probabilities", "demo_corpus", "judge_truth", "planted_truth"]


@dataclass(frozen=True)
class PlantedPair:
    """A planted association: criteria ``a`` and ``b`` (column indices) with population phi ``phi``."""

    a: int
    b: int
    phi: float


@dataclass(frozen=True)
class PlantedCorpus:
    """A drawn truth: ``truth`` is ``(n, k)`` 0/1 (1 = pass), ``fail_rates`` the population failure rate of
    each criterion, ``pairs`` the planted associations (every other pair is independent by construction)."""

    truth: NDArray[np.float64]
    keys: tuple[str, ...]
    fail_rates: tuple[float, ...]
    pairs: tuple[PlantedPair, ...]
    seed: int
    texts: tuple[tuple[str, str, str], ...] | None = None  # (question, context, answer) per row, if real

    def population_phi(self, a: int, b: int) -> float:
        """The planted (population) phi of criteria ``a`` and ``b``: 0 unless the pair was planted."""
        for p in self.pairs:
            if {p.a, p.b} == {a, b}:
                return p.phi
        return 0.0


def cell_probabilities(fail_a: float, fail_b: float, phi: float) -> NDArray[np.float64]:
    """Population cell shares ``[pass/pass, pass/fail, fail/pass, fail/fail]`` (a outcome / b outcome) of
    two criteria with failure rates ``fail_a``, ``fail_b`` and correlation ``phi``.

    P(both fail) = fa·fb + phi·sqrt(fa(1−fa)·fb(1−fb)); raises ValueError when no 2×2 table has these
    margins and this phi (a cell would be negative).
    """
    sd = np.sqrt(fail_a * (1 - fail_a) * fail_b * (1 - fail_b))
    ff = fail_a * fail_b + phi * sd
    cells = np.array([1 - fail_a - fail_b + ff, fail_b - ff, fail_a - ff, ff])
    if np.any(cells < -1e-12):
        raise ValueError(f"phi {phi} is impossible with failure rates {fail_a} and {fail_b}")
    return np.clip(cells, 0.0, 1.0)


def planted_truth(
    n: int,
    fail_rates: Sequence[float],
    pairs: Sequence[PlantedPair] = (),
    seed: int = 0,
    keys: Sequence[str] | None = None,
) -> PlantedCorpus:
    """Draw ``n`` answers' truth: criteria independent except the planted ``pairs`` (disjoint criteria).

    Each planted pair is drawn jointly from :func:`cell_probabilities`; every other criterion is an
    independent Bernoulli with its failure rate.
    """
    k = len(fail_rates)
    used = [c for p in pairs for c in (p.a, p.b)]
    if len(used) != len(set(used)):
        raise ValueError("planted pairs must not share a criterion")
    rng = np.random.default_rng(seed)
    truth = (rng.random((n, k)) >= np.asarray(fail_rates)).astype(np.float64)
    for p in pairs:
        cells = rng.choice(4, size=n, p=cell_probabilities(fail_rates[p.a], fail_rates[p.b], p.phi))
        truth[:, p.a] = (cells < 2).astype(np.float64)  # cells 0, 1: a passes
        truth[:, p.b] = (cells % 2 == 0).astype(np.float64)  # cells 0, 2: b passes
    names = tuple(keys) if keys is not None else tuple(f"c{i + 1}" for i in range(k))
    return PlantedCorpus(truth, names, tuple(float(f) for f in fail_rates), tuple(pairs), seed)


def judge_truth(
    corpus: PlantedCorpus, harness: Harness, params: simjudge.SimParams | None = None
) -> NDArray[np.float64]:
    """The simulated judge's ``(n, k)`` verdicts (1 = pass) on the corpus under ``harness``.

    Every call of the harness's plan is built with :func:`judgekit.prompts.build_messages` and decided by
    :meth:`judgekit.simjudge.SimJudge.decide`, whose truth index is the corpus (answer ``i``'s text
    names it, so the judge's hashed noise differs per answer and per ``params.seed``).
    """
    criteria = tuple(Criterion(key, f"Does the answer satisfy {key}?") for key in corpus.keys)
    rubric = Rubric(name="planted", criteria=criteria)
    texts = list(corpus.texts) if corpus.texts is not None else [
        (f"Question {i}?", "", f"Planted answer {i} of corpus {corpus.seed}.") for i in range(len(corpus.truth))
    ]
    truth = {
        (q, a): {key: int(v) for key, v in zip(corpus.keys, row, strict=True)}
        for (q, _, a), row in zip(texts, corpus.truth, strict=True)
    }
    judge = simjudge.SimJudge.from_truth(truth, params or simjudge.SimParams())
    col = {key: j for j, key in enumerate(corpus.keys)}
    out = np.full(corpus.truth.shape, np.nan)
    for call in plan_calls(harness, rubric, [(i, str(i)) for i in range(len(texts))]):
        question, context, answer = texts[call.example_id]
        example = prompts.ExampleText(question=question, context=context, answer=answer)
        messages = prompts.build_messages(example, [criteria[col[k]] for k in call.criteria], harness)
        for d in judge.decide(messages) or ():
            out[call.example_id, col[d.key]] = float(d.value)
    return out


def demo_corpus(n: int, seed: int = 0) -> PlantedCorpus:
    """The demo's support answers (:func:`judgekit.demo.build_demo`) with their planted truth for rubric
    ``demo``, as a corpus: a structure nobody tuned the audit on (real texts; associations as the demo
    plants them, e.g. grounded × no_fabrication ≈ 0.58, answers_question × cites_source ≈ 0.10)."""
    from judgekit import demo

    ws = demo.build_demo(n, seed=seed)
    keys = tuple(c.key for c in demo.demo_rubrics()[0].criteria)
    col = {k: j for j, k in enumerate(keys)}
    row = {ex["id"]: i for i, ex in enumerate(ws.examples)}
    truth = np.full((n, len(keys)), np.nan)
    for t in ws.truth:
        if t["criterion"] in col:
            truth[row[t["example_id"]], col[t["criterion"]]] = float(t["value"])
    texts = tuple((ex["question"], ex["context"], ex["answer"]) for ex in ws.examples)
    fail = tuple(float(x) for x in 1.0 - np.nanmean(truth, axis=0))
    return PlantedCorpus(truth, keys, fail, (), seed, texts)
