"""People's labels as numbers: the human column and inter-annotator reliability, as pure functions over the
label tensor ``L[annotator, example, criterion]`` (raw stored values; NaN = unsure or unlabelled).

Where this sits: above :mod:`judgekit.stats` and :mod:`judgekit.rubric`, below both readers of labels —
:mod:`judgekit.reports` (the Agreement page, ``judgekit report agreement``) and :mod:`judgekit.labeling`
(the Label page, ``judgekit label-set``). They load the tensor (``reports.label_tensor``) and call these,
so the same labels give the same consensus and the same α on every page and command.

Two roles: an *annotator* labels the items of a label set; an *adjudicator* settles the cells where
annotators disagree. Adjudicators settle the human column and are never counted as raters: they label the
disputed items, chosen *because* annotators split, so counting them would measure that selection rather
than how reliably the annotators label.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

import numpy as np
from numpy.typing import NDArray

from judgekit import stats
from judgekit.rubric import REFERENCE_ANNOTATOR, Criterion

__all__ = [
    "REFERENCE_ANNOTATOR",
    "ROLES",
    "CriterionReliability",
    "Reliability",
    "Role",
    "rater_kappas",
    "reliability",
    "settle",
    "thresholds",
]

Role = Literal["annotator", "adjudicator"]
ROLES: tuple[Role, ...] = get_args(Role)


def thresholds(criteria: Sequence[Criterion]) -> NDArray[np.float64]:
    """Per criterion, the smallest stored value that counts as pass (for :func:`judgekit.stats.binarize`)."""
    return np.array([c.pass_threshold for c in criteria], dtype=np.float64)


def _of_role(L: NDArray[np.float64], roles: Sequence[str], role: Role) -> NDArray[np.float64]:
    return L[[i for i, r in enumerate(roles) if r == role]]


def settle(raw: NDArray[np.float64], roles: Sequence[str], criteria: Sequence[Criterion]) -> NDArray[np.float64]:
    """The human column's binary view ``(n_examples, n_criteria)``: 1 pass, 0 fail, NaN unresolved.

    Where an adjudicator has a (sure) label, the adjudicators' majority wins (two who disagree leave the
    cell unresolved); elsewhere the annotators' majority (a tie is NaN). Unsure (NaN) labels do not vote.
    """
    cut = thresholds(criteria)
    ann, adj = _of_role(raw, roles, "annotator"), _of_role(raw, roles, "adjudicator")
    majority = stats.consensus(stats.binarize(ann, cut)) if len(ann) else np.full(raw.shape[1:], np.nan)
    if len(adj):
        settled = ~np.isnan(adj).all(axis=0)
        majority = np.where(settled, stats.consensus(stats.binarize(adj, cut)), majority)
    return majority


@dataclass(frozen=True)
class CriterionReliability:
    """Inter-annotator reliability of one criterion over the units (examples) at least two annotators
    labelled: Krippendorff's ``alpha`` (nominal for binary, ordinal for scale; 1 = perfect, 0 = chance,
    below 0 = systematic disagreement) and Cohen's kappa for every annotator pair on the binary view
    (``pairs``: a, b, n, kappa, and for a scale criterion weighted_kappa on the 1–5 scores), with
    ``mean_kappa`` their mean over defined pairs. NaN where undefined (no pairable unit, one value only)."""

    criterion: str
    kind: str
    n_units: int
    alpha: float
    mean_kappa: float
    pairs: list[dict]


class Reliability(NamedTuple):
    """:func:`reliability`'s answer: who was counted as a rater, who was left out as an adjudicator, and the
    numbers per criterion (rubric order)."""

    raters: list[str]
    adjudicators: list[str]
    criteria: list[CriterionReliability]


def rater_kappas(
    L: NDArray[np.float64], names: Sequence[str], roles: Sequence[str], criteria: Sequence[Criterion], *,
    seed: int = 0,
) -> list[tuple[str, str, stats.AgreementMatrix]]:
    """κ with intervals, per criterion, of every two *raters* of ``L`` (adjudicators left out, as in
    :func:`reliability`): ``(a, b, stats.agreement_matrix(...))`` per pair."""
    keep = [i for i, r in enumerate(roles) if r != "adjudicator"]
    B = stats.binarize(L[keep], thresholds(criteria))
    return [(names[keep[x]], names[keep[y]], stats.agreement_matrix(B[x], B[y], seed=seed))
            for x, y in itertools.combinations(range(len(keep)), 2)]


def reliability(
    L: NDArray[np.float64], names: Sequence[str], roles: Sequence[str], criteria: Sequence[Criterion]
) -> Reliability:
    """κ per annotator pair and Krippendorff's α per criterion among the annotators of ``L``
    ``(n_annotators, n_examples, n_criteria)``; adjudicators are left out (see the module docstring)."""
    keep = [i for i, r in enumerate(roles) if r != "adjudicator"]
    raters = [names[i] for i in keep]
    R = L[keep]
    B = stats.binarize(R, thresholds(criteria)) if len(keep) else R
    out = []
    for j, c in enumerate(criteria):
        pairs = []
        for x, y in itertools.combinations(range(len(raters)), 2):
            m = stats.agreement(B[x, :, j], B[y, :, j])
            pair = {"a": raters[x], "b": raters[y], "n": m.n, "kappa": m.kappa}
            if c.is_scale:
                pair["weighted_kappa"] = stats.weighted_kappa(R[x, :, j], R[y, :, j])
            pairs.append(pair)
        pairable = (~np.isnan(R[:, :, j])).sum(axis=0) >= 2 if len(keep) else np.zeros(L.shape[1], bool)
        alpha = (stats.krippendorff_alpha(R[:, pairable, j], level="ordinal" if c.is_scale else "nominal")
                 if pairable.any() else math.nan)
        kappas = [p["kappa"] for p in pairs if not math.isnan(p["kappa"])]
        out.append(CriterionReliability(c.key, c.kind, int(pairable.sum()), float(alpha),
                                        float(np.mean(kappas)) if kappas else math.nan, pairs))
    return Reliability(raters, [n for n, r in zip(names, roles, strict=True) if r == "adjudicator"], out)
