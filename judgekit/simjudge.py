"""The simulated judge: an OpenAI-compatible server whose verdicts follow a stated statistical model.

**This is a simulation, not a language model.** It exists so the pipeline can be checked against a
*known, injected* effect (seed 003: one multi-criterion call makes correlated verdicts) and for
deterministic tests. Every view names it as simulated: its ``/v1/models`` entry is the model
``judgekit-sim`` owned by ``judgekit-simulated`` (:data:`SIM_MODEL`, :data:`SIM_OWNER`).

Where it sits: a runner (or a test) sends prompts built by :mod:`judgekit.prompts` to it; it reads
each request back with :func:`judgekit.prompts.parse_judge_request`, decides every asked field with
the model below, writes the reply with :func:`judgekit.prompts.render_reply`, and serves it through
:mod:`judgekit.openai_server` (``judgekit sim-judge`` → :func:`serve_forever`; tests, the Run page
and ``make demo`` → :func:`start_in_thread`).

The model (every number is a :class:`SimParams` field or a constant at the top of this module)
------------------------------------------------------------------------------------------------

*Truth.* The request's (question, answer), whitespace-stripped, is looked up in an index of every
example in the database (keyed by a sha256 of the two texts) that has labels from the annotator
``reference`` — the demo's planted truth, keyed by criterion *key*. The index is loaded at start and
reloaded on a miss at most every ``reload_interval_s`` seconds, so examples imported later are found.
A criterion with no reference label gets a **pseudo-truth** from ``sha256(seed, answer, criterion)``:
binary pass with probability ``pseudo_pass`` (0.7); scale 1–5 drawn from :data:`PSEUDO_SCALE`
(skewed high).

*Shared impression.* ``z ~ N(0, 1)`` from ``sha256(seed, answer)``: one value per answer, shared by
every call on that answer whatever the harness (so it correlates verdicts under split calls too).

*Per-field noise.* ``u ~ U(0, 1)`` from ``sha256(seed, answer, criterion)`` — *not* from the call's
composition, so a single call and the split calls of one answer differ only through conditioning
(at temperature > 0 see *Temperature* below).

*Accuracy* ``a`` is per criterion: ``criterion_accuracy`` (key → a) overrides the default ``accuracy``
for the criteria it names — a badly written criterion is one the judge reads poorly under any harness.

*Conditioning.* Fields are decided in emission order (the order the request lists them). Each
already-emitted field ``j`` has a lean ``ℓ_j``: ``2·v_j − 1`` for a binary verdict, ``(s_j − 3)/2``
for a 1–5 score (0 for "cannot assess"). Each criterion pair has a conditioning multiplier ``m_jk``
(symmetric; ``matrix``, default :data:`judgekit.demo.DEMO_CONDITIONING`; 1 for pairs it does not list).
Field ``k`` is pushed by ``push_k = w·z + G'·Σ_{j<k} m_jk·ℓ_j / #{j<k: m_jk > 0}`` — the weighted mean
lean of the already-emitted fields that pull on it (no lean term for the first field of a call, hence
none in a split call, and none from fields with ``m = 0``) — where ``G' = G`` or ``G·note_factor``
(0.92) when the request carries the independence sentence — seed 003's placebo, which moved phi only
0.62 → 0.57. With every ``m = 1`` this is ``G'·mean_{j<k} ℓ_j``.

*Temperature* (the request's ``temperature``, T). At T = 0 the per-field draw ``u`` below is fixed per
(answer, criterion): the same question always gets the same verdict, as a deterministic judge gives.
At T > 0 each ask draws ``u`` afresh with probability ``r = min(1, T)`` (the n-th ask of an
(answer, criterion) uses its own hash, so runs are reproducible) and keeps the fixed one otherwise.
``u`` is uniform either way, so the per-criterion accuracy is the stated one at every temperature,
and two asks of a field disagree with probability ``(1 − (1−r)²)·E[2p(1−p)]`` where ``p`` is the
model's P(pass) for that field — the test–retest noise :meth:`SimParams.expected_retest` states.

*Cannot assess.* A criterion whose request line offers "cannot_assess" (the rubric's
``cannot_assess: true``) gets that answer with probability ``cannot_assess_rate``, fixed per
(answer, criterion).

* Binary: ``logit_k = ±logit(a) + push_k`` (``+`` when the truth passes), ``P(true) = sigmoid(logit_k)``,
  ``v_k = 1`` iff ``u_k < P(true)``. ``a`` is the accuracy at an average impression (``z = 0``); over
  ``z`` the marginal accuracy is a little lower (≈ 0.89 for a = 0.9, w = 0.5).
* Scale: the score is a discretised normal, ``N(t + scale_push·push_k, σ²)`` rounded and clamped to
  1–5, drawn by inverting its CDF at ``u_k``; ``σ = 0.5 / Φ⁻¹((1 + a)/2)`` so that with no push the
  exact truth comes back with probability ``a``.

With ``G = 0`` a single call and the split calls of an answer produce identical verdicts.

*Log-probabilities.* When a request asks for ``logprobs``, each verdict token carries its
alternatives: ``true``/``false`` with ``log P(true)``/``log P(false)``, or the five digits with the
score distribution — so :func:`judgekit.parse.p_pass_from_logprobs` recovers ``sigmoid(logit_k)``.

*Rationales* (unless the order is ``verdict_only``) depend on the prompt variant
(``default``/``hardened``, seed 002) with the rates of :data:`RATIONALE_RATES`. Each property is
drawn from its own hash of (seed, answer, criterion, property), compared with the variant's rate, so
a property the default prompt shows is also shown by the hardened one.

* default: one short sentence, often only a pointer ("see the answer");
* hardened: three or four sentences.
* ``cites_evidence``: quotes a verbatim phrase of the answer in double quotes;
* ``justifies_level``: contrasts the level with its neighbours (marker: "rather than");
* ``names_fix``: for a score < 5 (binary: a fail) names a concrete change (marker: "Fix:").
* ``dimension_locus``: when *not* shown, the evidence clause carries a remark that belongs to another
  dimension (:data:`OFF_LOCUS_REMARKS`: a format remark under a content dimension, a content remark
  under a clarity-type one).

*Critique calls* (:func:`judgekit.prompts.build_critique_messages`: one check on one stored
rationale, read back with :func:`judgekit.prompts.parse_critique_request`) are answered by
:func:`critique_verdict` from the markers above — exactly, without noise — so a critique of a
simulated run recovers the planted rates of :data:`RATIONALE_RATES` and :data:`RECONCILE_MISS`.

*Red flags* (scale criteria only — only their entries have ``red_flags``):

* Safety. The answer has a safety-relevant problem when the truth of the K.O. dimension (the
  criterion marked "⛔ K.O. dimension · floor F" in the request) is ≤ F, or a reference label of a
  fabrication-type binary criterion (key matching :data:`FABRICATION_KEY`) fails. Then, if the K.O.
  dimension is asked, its entry carries a flag such as ``invented fact: "…"`` with probability
  :data:`SAFETY_FLAG_RATE`. *Safety reconciliation*: with probability :data:`RECONCILE_MISS`
  (default 0.5, hardened 0.1) the flag is raised but the K.O. score stays above the floor — the
  contradictory verdict of seed 002 — otherwise the score is at or below the floor. Either way the
  score is drawn from the model's score distribution restricted to the allowed range (same ``u``).
* Format. A clarity-type dimension (key or question matching :data:`CLARITY_TYPE`), never the K.O.
  dimension, whose score is ≤ 3 carries "rambling structure" or "too terse" with probability
  :data:`FORMAT_FLAG_RATE`. Format flags are decided after the score and never change any score.

*Holistic calls* (seed 002's bundle level: :func:`judgekit.holistic.build_messages`, read back with
:func:`judgekit.holistic.parse_bundle_request`) follow the same model with the bundle in place of the
answer:

* Truth per bundle and dimension (:func:`bundle_truth`): the members' ``reference`` labels (found by
  dataset and prompt_id) rounded to their mean; on the bundle's K.O. dimension, a bundle with members
  at or below the floor is at the floor (fewer than :data:`BUNDLE_KO_SHARE` of them) or one below it.
  A dimension no member has a label for gets a pseudo-truth as above.
* Impression, per-field noise and conditioning as above, keyed by the bundle (dataset + label), so
  ``single`` and ``split`` holistic calls differ only through conditioning.
* Safety reconciliation: when the evidence holds a safety red flag (a RED FLAG line whose flags start
  with one of :data:`SAFETY_FLAG_KINDS`), the K.O. dimension is reconciled — scored at or below its
  floor — with probability ``1 − RECONCILE_MISS[variant]`` and kept above it otherwise; with
  probability :data:`SAFETY_FLAG_RATE` its entry also names the problem ("safety problem in the
  evidence (q-…)"). Format flags in the evidence never move the K.O. dimension.
* Rationales carry the properties of :data:`RATIONALE_RATES` by variant; ``cites_evidence`` quotes a
  phrase of a cited prompt_id's evidence line (the critic checks it is verbatim in the evidence).

*Usage.* ``prompt_tokens`` = characters of the messages / 4; ``completion_tokens`` = characters of the
reply / 4; ``cached_tokens`` = the prefix shared with the previous request served (globally), in
tokens, rounded down to blocks of ``cache_block`` (16) — so the ``shared_prefix`` layout visibly
caches between the split calls of one example. The system prompt is part of that prefix in every
layout, so ``criterion_first`` still caches the system text (and nothing after it). Optional latency:
``latency_ms + ms_per_uncached_token · (prompt_tokens − cached_tokens)``.

*Labelled examples (few-shot).* For each asked criterion ``c``, every labelled example of ``c`` in the
request (judgekit's block, :func:`judgekit.prompts.few_shot_block`) is checked against *its* truth: a
label that equals it counts +1, one that contradicts it −1 (a scale label two or more levels away; one
level away counts 0). ``few_shot_gain`` (0.15) × the net, capped at ``few_shot_cap`` (8) examples, is added
to ``logit(a)`` for ``c`` — binary and scale alike (the scale's σ follows the raised accuracy). So K
correct examples per criterion raise a = 0.9 to ≈ 0.94 at K = 4; wrong labels lower it. Nothing else
(the impression, conditioning) changes.

*Prompt templates.* The wording of a user's template does not enter the model: a templated request is
read through judgekit's criteria block (keys, kinds, K.O. marker) and labelled-examples block, and the
judged answer is found by its text among the examples with ``reference`` labels (:class:`_Locator`: the
longest known answer in the message whose question also appears). It is then judged exactly like the
same answer in judgekit's own layout — so an A/B of two templates on the simulated judge measures zero
prompt effect by construction, and any difference shown comes from the pipeline. The independence
sentence counts wherever it appears. A templated request whose answer is not found gets ``{}``.

*Requests that are not judgekit's layout* (``parse_judge_request`` → ``None``) get a 200 with ``{}``:
a client then records every criterion as unscored ("missing from reply"). A 400 would look like a
``response_format`` rejection to the client's ``auto`` ladder and downgrade the endpoint's mode.
``stream=true`` gets a 400 (not supported).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os.path import commonprefix
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import holistic, store
from judgekit.demo import DEMO_CONDITIONING
from judgekit.openai_server import Reply, ServerThread, Usage, make_logprobs, serve_until_interrupted
from judgekit.prompts import (
    CANNOT_ASSESS,
    INDEPENDENCE_NOTE,
    CritiqueRequest,
    JudgeRequest,
    criteria_keys,
    parse_critique_request,
    parse_judge_request,
    read_criterion_lines,
    render_reply,
    split_few_shot,
    system_features,
)
from judgekit.rubric import REFERENCE_ANNOTATOR

__all__ = [
    "BUNDLE_KO_SHARE",
    "FORMAT_FLAGS",
    "OFF_LOCUS_REMARKS",
    "RATIONALE_RATES",
    "RECONCILE_MISS",
    "SAFETY_FLAG_KINDS",
    "SIM_MODEL",
    "SIM_OWNER",
    "FieldDecision",
    "RetestExpectation",
    "SimJudge",
    "SimParams",
    "bundle_truth",
    "critique_verdict",
    "is_safety_flag",
    "load_matrix",
    "parse_accuracies",
    "serve_forever",
    "start_in_thread",
]

SIM_MODEL = "judgekit-sim"
SIM_OWNER = "judgekit-simulated"

# Rationale properties by prompt variant: P(property shown) per rationale (seed 002's A/B re-judge).
RATIONALE_RATES: dict[str, dict[str, float]] = {
    "default": {"cites_evidence": 0.30, "justifies_level": 0.60, "names_fix": 0.40, "dimension_locus": 0.75},
    "hardened": {"cites_evidence": 0.85, "justifies_level": 0.95, "names_fix": 0.90, "dimension_locus": 0.95},
}
# P(a safety flag is raised but the K.O. score stays above its floor) — the contradiction.
RECONCILE_MISS: dict[str, float] = {"default": 0.5, "hardened": 0.1}
SAFETY_FLAG_RATE = 0.9  # P(flag | safety-relevant problem), both variants
FORMAT_FLAG_RATE = 0.5  # P(format flag | clarity-type dimension scored ≤ 3)
HARDENED_LOCUS_RATE = 0.5  # P(a fourth, locus sentence) in hardened rationales
PSEUDO_SCALE = (0.05, 0.10, 0.20, 0.35, 0.30)  # pseudo-truth distribution of scores 1..5
BUNDLE_KO_SHARE = 0.3  # share of members at/below the K.O. floor from which a bundle is one below the floor

SAFETY_FLAG_KINDS = ("invented fact", "unsafe advice", "missing warning")
FORMAT_FLAGS = ("rambling structure", "too terse")
FABRICATION_KEY = re.compile(r"fabricat|invent|hallucin|made_up", re.IGNORECASE)
CLARITY_TYPE = re.compile(r"clar|format|struct|concis|style|tone|readab|brev|terse", re.IGNORECASE)
# Off-locus remarks: evidence that belongs to another dimension (format under content and vice versa).
OFF_LOCUS_REMARKS = {
    "content": ("and it runs on too long", "and the layout is cluttered"),
    "format": ("and one claim is not in the context", "and it skips part of the question"),
}
FIXES = (
    "quote the passage the answer relies on",
    "answer the question in the first sentence",
    "remove the claim the context does not support",
    "add the warning the situation calls for",
    "state the missing step explicitly",
    "cut the repetition and keep one clear paragraph",
)

_STD = NormalDist()


class RetestExpectation(NamedTuple):
    """The test–retest agreement the stated model implies for one criterion asked twice in split calls.

    ``flip_rate``: expected share of examples whose pass/fail differs between two runs; ``kappa``: the
    expected Cohen's κ between them (``nan`` when the pass rate is 0 or 1); ``pass_rate``: the expected
    share of passes under either run."""

    flip_rate: float
    kappa: float
    pass_rate: float


@dataclass(frozen=True)
class SimParams:
    """The simulated judge's parameters (see the module docstring for what each one does)."""

    accuracy: float = 0.9  # a, for criteria criterion_accuracy does not name
    impression: float = 0.5  # w
    conditioning: float = 1.5  # G
    matrix: tuple[tuple[str, str, float], ...] = DEMO_CONDITIONING  # m per pair; unlisted pairs 1
    criterion_accuracy: tuple[tuple[str, float], ...] = ()  # a per criterion key
    cannot_assess_rate: float = 0.1  # P("cannot assess") where a criterion offers it
    seed: int = 0
    latency_ms: float = 0.0
    ms_per_uncached_token: float = 0.0
    note_factor: float = 0.92  # G multiplier when the request carries the independence sentence
    pseudo_pass: float = 0.7
    scale_push: float = 0.5  # score points per logit unit of push
    cache_block: int = 16
    reload_interval_s: float = 2.0
    few_shot_gain: float = 0.15  # logit accuracy per net agreeing labelled example of the criterion
    few_shot_cap: int = 8  # |net| counted at most this many examples

    def __post_init__(self) -> None:
        for key, a in (("", self.accuracy), *self.criterion_accuracy):
            if not 0.0 <= a <= 1.0:
                raise ValueError(f"accuracy{' of ' + key if key else ''} must be within 0..1, not {a}")
        if any(m < 0 for _, _, m in self.matrix):
            raise ValueError("conditioning multipliers must not be negative")
        if not 0.0 <= self.cannot_assess_rate <= 1.0:
            raise ValueError(f"cannot_assess_rate must be within 0..1, not {self.cannot_assess_rate}")
        if not 0.0 <= self.pseudo_pass <= 1.0:
            raise ValueError(f"pseudo_pass must be within 0..1, not {self.pseudo_pass}")
        if self.latency_ms < 0 or self.ms_per_uncached_token < 0:
            raise ValueError("latency must not be negative")
        if self.cache_block < 1:
            raise ValueError("cache_block must be at least 1")

    @property
    def logit_accuracy(self) -> float:
        return self.logit_accuracy_of(None)

    @property
    def scale_sigma(self) -> float:
        return self.scale_sigma_of(None)

    def accuracy_of(self, key: str | None) -> float:
        """The stated accuracy ``a`` of one criterion (the default for criteria not named)."""
        return dict(self.criterion_accuracy).get(key, self.accuracy) if key is not None else self.accuracy

    def logit_accuracy_of(self, key: str | None) -> float:
        a = min(max(self.accuracy_of(key), 1e-6), 1 - 1e-6)
        return math.log(a / (1 - a))

    def scale_sigma_of(self, key: str | None) -> float:
        return _sigma(self.accuracy_of(key))

    def multiplier(self, a: str, b: str) -> float:
        """The conditioning multiplier ``m`` of a criterion pair (1 where the matrix does not list it)."""
        for x, y, m in self.matrix:
            if {x, y} == {a, b}:
                return m
        return 1.0

    def expected_retest(
        self, key: str, truths: Sequence[int], temperature: float, *, scale: bool = False, pass_at: int = 3
    ) -> RetestExpectation:
        """The noise floor the stated model implies: pass/fail agreement of two split-call runs of
        criterion ``key`` at ``temperature`` over answers with the planted ``truths`` (1/0, or 1–5 for a
        scale criterion binarised at ``pass_at``; no K.O. rule, no "cannot assess").

        Per answer the model passes with ``p = sigmoid(±logit(a) + w·z)`` (scale: ``P(N(t + c·w·z, σ²)``
        rounds to ≥ ``pass_at``)``), z ~ N(0, 1) the answer's impression; two asks disagree with
        probability ``q·2p(1−p)``, ``q = 1 − (1 − min(1, T))²`` (at least one fresh draw). Averaged over
        z (Gauss–Hermite, 80 nodes) and the truths: the flip rate, the pass rate π, and
        κ = 1 − flip / (2π(1−π)).
        """
        r = min(1.0, max(0.0, float(temperature)))
        q = 1.0 - (1.0 - r) ** 2
        z, weight = np.polynomial.hermite_e.hermegauss(80)
        weight = weight / weight.sum()
        t = np.asarray(truths, dtype=float)[:, None]
        if scale:
            sigma = self.scale_sigma_of(key)
            p = np.array([[_STD.cdf((ti + self.scale_push * self.impression * zi - (pass_at - 0.5)) / sigma)
                           for zi in z] for ti in t[:, 0]])
        else:
            a = self.accuracy_of(key)
            with np.errstate(divide="ignore", over="ignore"):  # a = 0 or 1: logit ±inf, p exactly 0 or 1
                logit = np.where(t > 0, 1.0, -1.0) * (np.log(a) - np.log1p(-a)) + self.impression * z[None, :]
                p = 1.0 / (1.0 + np.exp(-logit))
        flip = float(q * (2 * p * (1 - p) @ weight).mean())
        pi = float((p @ weight).mean())
        spread = 2 * pi * (1 - pi)
        return RetestExpectation(flip, 1.0 - flip / spread if spread > 0 else math.nan, pi)


def _sigma(accuracy: float) -> float:
    """σ of the discretised normal that returns the exact score with probability ``accuracy``."""
    a = min(max(accuracy, 1e-6), 1 - 1e-6)
    return 0.5 / _STD.inv_cdf((1 + a) / 2)


@dataclass(frozen=True)
class FieldDecision:
    """How one field of one reply was decided (for inspection and tests)."""

    key: str
    kind: str  # "binary" | "scale"
    truth: int
    truth_known: bool  # from a `reference` label (else pseudo-truth)
    lean_before: float  # conditioning-weighted mean lean of the fields emitted before (0 for the first)
    value: int | None  # None: the judge said "cannot assess"
    p_true: float  # binary: P(true); scale: P(score ≥ 3) of the distribution the score came from
    dist: tuple[float, ...]  # scale: P(1..5); binary: (P(false), P(true))
    rationale: str
    red_flags: tuple[str, ...] | None  # None for binary criteria (no red_flags field)
    reconciled: bool | None = None  # K.O. with a safety flag: whether the score went ≤ floor


@dataclass(frozen=True)
class _Wording:
    """How a simulated rationale names its evidence: an answer's own words, or a bundle's evidence line."""

    pointer: str  # the bare pointer ("see the answer")
    quote: str  # a one-sentence quote, {} = the phrase
    evidence: str  # the hardened evidence sentence, {} = the phrase
    relevant: str  # the hardened sentence without a phrase, {} = the criterion
    makes: str  # the level sentence's opening


_ANSWER_WORDING = _Wording("see the answer", 'the answer says "{}"', 'The answer says "{}"',
                           "The answer is relevant to {}", "That makes it")


@dataclass(frozen=True)
class _Crit:
    key: str
    scale: bool
    question: str
    ko_floor: int | None
    cannot: bool = False  # the request offers "cannot_assess" for it


def is_safety_flag(flag: str) -> bool:
    """Whether a red flag names a safety-relevant problem (as opposed to a format-only one)."""
    return flag.split(":", 1)[0].strip().lower() in SAFETY_FLAG_KINDS


# ------------------------------------------------------------------------------------ hashing


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()


def _uniform(*parts: object) -> float:
    """A deterministic U(0, 1) (open interval) from the parts."""
    return (int.from_bytes(_digest(*parts)[:8], "big") + 0.5) / 2.0**64


def _pick(options: Sequence[str], *parts: object) -> str:
    return options[int(_uniform(*parts) * len(options))]


def _text_key(question: str, answer: str) -> str:
    return hashlib.sha256(f"{question.strip()}\x00{answer.strip()}".encode()).hexdigest()


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


# -------------------------------------------------------------------------- reading the request


def _criteria_details(messages: Sequence[dict]) -> dict[str, _Crit]:
    """Kind, question and K.O. floor of each criterion, read from the request's criteria block.

    ``parse_judge_request`` returns only the keys; the kind and the K.O. marker are in the same block
    (see :func:`judgekit.prompts.criterion_line`).
    """
    user = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
    if not isinstance(user, str):
        return {}
    if user.startswith("## Criteria\n"):
        block = user
    else:
        at = user.rfind("\n## Criteria\n")
        block = user[at + 1:] if at >= 0 else ""
    block = block.split("\n\n## Reply format", 1)[0]
    return {c.key: _Crit(c.key, c.scale, c.question, c.ko_floor, c.cannot) for c in read_criterion_lines(block)}


def _prompt_text(messages: Sequence[dict]) -> str:
    return "\n".join(m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
                     for m in messages if isinstance(m, dict))


# -------------------------------------------------------------------------------- text pieces


_CLAUSE = re.compile(r"[^.!?\"\n;:{}\[\]]+")
_WORDS = re.compile(r"\S+(?:[ \t]+\S+){0,7}")


def _phrase(answer: str, *salt: object) -> str | None:
    """A verbatim phrase of the answer (≤ 8 words, no sentence punctuation or quotes), or None."""
    clauses = [c.strip(" \t,") for c in _CLAUSE.findall(answer)]
    clauses = [c for c in clauses if len(c.split()) >= 3] or [c for c in clauses if c]
    if not clauses:
        return None
    clause = clauses[int(_uniform(*salt, "clause") * len(clauses))]
    m = _WORDS.match(clause)
    phrase = (m.group(0) if m else clause).strip(" \t,")
    return phrase if phrase and phrase in answer else None


def _score_dist(mu: float, sigma: float) -> list[float]:
    """P(score = 1..5) of N(mu, sigma²) rounded and clamped to 1–5."""
    if sigma <= 0:
        k = min(5, max(1, math.floor(mu + 0.5)))
        return [1.0 if s == k else 0.0 for s in range(1, 6)]
    cdf = [_STD.cdf((s + 0.5 - mu) / sigma) for s in range(1, 5)]
    edges = [0.0, *cdf, 1.0]
    return [max(0.0, edges[i + 1] - edges[i]) for i in range(5)]


def _draw(dist: Sequence[float], u: float, allowed: Sequence[int]) -> tuple[int, list[float]]:
    """Invert the CDF of ``dist`` restricted to ``allowed`` at ``u``; returns (score, restricted dist)."""
    restricted = [p if s in allowed else 0.0 for s, p in zip(range(1, 6), dist, strict=True)]
    total = sum(restricted)
    if total <= 1e-15:  # no mass where the rule sends the score: the allowed value nearest the mode
        mode = max(range(1, 6), key=lambda s: dist[s - 1])
        nearest = min(allowed, key=lambda s: abs(s - mode))
        return nearest, [1.0 if s == nearest else 0.0 for s in range(1, 6)]
    restricted = [p / total for p in restricted]
    acc = 0.0
    for s, p in zip(range(1, 6), restricted, strict=True):
        acc += p
        if u < acc and p > 0:
            return s, restricted
    last = max(s for s, p in zip(range(1, 6), restricted, strict=True) if p > 0)
    return last, restricted


def _level_text(value: int, scale: bool) -> str:
    """The level contrasted with its neighbours (the ``justifies_level`` property)."""
    if not scale:
        return ("a pass rather than a fail, because the requirement is met" if value
                else "a fail rather than a pass, because the requirement is not met")
    if value == 5:
        return "a 5 rather than a 4, because nothing is missing"
    if value == 1:
        return "a 1 rather than a 2, because the core is wrong"
    return (f"a {value} rather than a {value + 1}, because a clear gap remains, "
            f"and rather than a {value - 1}, because the core is right")


def _off_locus_remarks(key: str, question: str) -> tuple[str, ...]:
    """Remarks that do not belong to the dimension: format under a content dimension, and vice versa."""
    return OFF_LOCUS_REMARKS["format" if CLARITY_TYPE.search(f"{key} {question}") else "content"]


def bundle_truth(members: Sequence[int], scale: bool = True, ko_floor: int | None = None) -> int:
    """A bundle's truth on one dimension from its members' truths (see the module doc).

    Scale: the mean rounded half up; on the K.O. dimension a bundle with any member at or below the
    floor is at the floor, or one below it (not below 1) when at least :data:`BUNDLE_KO_SHARE` of the
    members are. Binary: the majority (ties pass); on a binary K.O. dimension any failing member fails it.
    """
    if not members:
        raise ValueError("a bundle truth needs at least one member")
    low = sum(1 for v in members if ko_floor is not None and v <= ko_floor) / len(members)
    if not scale:
        return 0 if (ko_floor is not None and low > 0) else int(sum(members) * 2 >= len(members))
    if ko_floor is not None and low > 0:
        return max(1, ko_floor - 1) if low >= BUNDLE_KO_SHARE else ko_floor
    return min(5, max(1, math.floor(sum(members) / len(members) + 0.5)))


def _evidence_safety(line: holistic.EvidenceLine) -> bool:
    """A RED FLAG line whose flags (first in its note, ``; ``-joined) include a safety kind."""
    if not line.red_flag:
        return False
    flags = line.note.split(" — ", 1)[0].split("; ")
    return any(f.startswith(SAFETY_FLAG_KINDS) for f in flags)


_QUOTED_SPAN = re.compile(r'"([^"]*)"')


def critique_verdict(req: CritiqueRequest) -> tuple[bool, str]:
    """The simulated critic: the verdict on one check, read from the markers the simulated judge planted.

    Exact (no noise) on the simulated judge's rationales: ``cites_evidence`` — a double-quoted span of
    two or more words that is verbatim in the answer; ``justifies_level`` — "rather than" outside
    quotes; ``names_fix`` — "fix:" outside quotes; ``dimension_locus`` — no off-locus remark for the
    dimension (:data:`OFF_LOCUS_REMARKS`); ``catches_safety`` — the K.O. dimension scored at or below
    its floor. An unknown check fails.
    """
    check = req.check_key.rpartition("__")[2]
    bare = _QUOTED_SPAN.sub('""', req.rationale)
    if check == "cites_evidence":
        quotes = [q for q in _QUOTED_SPAN.findall(req.rationale) if len(q.split()) >= 2 and q in req.answer]
        return (True, f'The rationale quotes "{quotes[0]}" from the answer.') if quotes else (
            False, "The rationale points at the answer without naming a concrete observation.")
    if check == "justifies_level":
        ok = "rather than" in bare
        return ok, ("The rationale contrasts the score with its neighbouring levels." if ok
                    else "The rationale gives no reason for this level rather than the one above or below.")
    if check == "names_fix":
        ok = "fix:" in bare.lower()
        return ok, "The rationale names a concrete fix." if ok else "The rationale names no concrete change."
    if check == "dimension_locus":
        off = [r for r in _off_locus_remarks(req.dimension, req.dimension_question) if r in bare]
        return (not off), (f"The remark '{off[0]}' belongs to another dimension." if off
                           else f"The evidence concerns {req.dimension}.")
    if check == "catches_safety":
        ok = req.ko_score is not None and req.ko_floor is not None and req.ko_score <= req.ko_floor
        return ok, ("The K.O. dimension is at or below its floor, consistent with the red flag." if ok
                    else "A safety problem is noted but the K.O. dimension stays above its floor.")
    return False, f"Unknown check {check!r}."


class _Locator:
    """Finds a known answer inside a templated prompt in one pass over the text: answers are indexed
    by their first :attr:`PROBE` characters (shorter ones are checked directly); among the answers found
    whose question also appears, the longest wins."""

    PROBE = 24

    def __init__(self, texts: Sequence[tuple[str, str]]) -> None:
        self.by_prefix: dict[str, list[tuple[str, str]]] = {}
        self.short: list[tuple[str, str]] = []
        for question, answer in texts:
            if len(answer) >= self.PROBE:
                self.by_prefix.setdefault(answer[: self.PROBE], []).append((question, answer))
            elif answer:
                self.short.append((question, answer))

    def find(self, text: str) -> tuple[str, str] | None:
        best: tuple[str, str] | None = None
        probe, index = self.PROBE, self.by_prefix
        for i in range(len(text) - probe + 1):
            for question, answer in index.get(text[i : i + probe], ()):
                if text.startswith(answer, i) and question in text and (best is None or len(answer) > len(best[1])):
                    best = (question, answer)
        if best is None:
            for question, answer in self.short:
                if answer in text and question in text and (best is None or len(answer) > len(best[1])):
                    best = (question, answer)
        return best


# ---------------------------------------------------------------------------------- the judge


class SimJudge:
    """The simulated judge's request handler; owns the truth index and the prefix-cache state.

    ``SimJudge(engine_or_url, params)(body) -> Reply`` — ``body`` is a chat-completions request.
    """

    def __init__(self, engine_or_url: Engine | str | None, params: SimParams | None = None) -> None:
        self.params = params or SimParams()
        self._given: dict[str, dict[str, int]] = {}
        self._given_texts: dict[str, tuple[str, str]] = {}
        if engine_or_url is None or isinstance(engine_or_url, Engine):
            self._engine = engine_or_url
        else:
            self._engine = store.engine_for(engine_or_url)
        self._lock = threading.Lock()
        self._truth: dict[str, dict[str, int]] = {}
        self._by_id: dict[tuple[str, str], dict[str, int]] = {}  # (dataset, example id) → labels
        self._loaded_at = -math.inf
        self._previous_prompt = ""
        self._texts: list[tuple[str, str]] = []
        self._locator: _Locator | None = None
        self._asks: dict[tuple[str, str], int] = {}  # asks at temperature > 0 per (answer digest, criterion)
        self.reload()

    @classmethod
    def from_truth(
        cls, truth: Mapping[tuple[str, str], Mapping[str, int]], params: SimParams | None = None
    ) -> SimJudge:
        """A judge whose planted truth is held in memory: ``(question, answer) → {criterion key: value}``.

        The same model as the served judge, without a database -- for calibration runs that draw many
        corpora (:mod:`judgekit.planted`). Reloads keep this truth.
        """
        judge = cls(None, params)
        judge._given = {_text_key(q, a): {k: int(v) for k, v in labels.items()} for (q, a), labels in truth.items()}
        judge._given_texts = {_text_key(q, a): (q.strip(), a.strip()) for q, a in truth}
        judge.reload()
        return judge

    # ----------------------------------------------------------------------------- truth index

    def reload(self) -> int:
        """(Re)load the truth index from the database; returns the number of examples indexed."""
        index: dict[str, dict[str, int]] = {k: dict(v) for k, v in self._given.items()}
        texts: dict[str, tuple[str, str]] = dict(self._given_texts)
        by_id: dict[tuple[str, str], dict[str, int]] = {}
        if self._engine is not None:
            q = (
                select(store.Example.question, store.Example.answer, store.Label.criterion, store.Label.value,
                       store.Dataset.name, store.Example.ext_id)
                .join(store.Label, store.Label.example_id == store.Example.id)
                .join(store.Annotator, store.Annotator.id == store.Label.annotator_id)
                .join(store.Dataset, store.Dataset.id == store.Example.dataset_id)
                .where(store.Annotator.name == REFERENCE_ANNOTATOR, store.Label.value.is_not(None))
                .order_by(store.Example.id)
            )
            with Session(self._engine) as s:
                for question, answer, criterion, value, dataset, ext_id in s.execute(q):
                    key = _text_key(question or "", answer or "")
                    labels = index.setdefault(key, {})
                    labels.setdefault(criterion, int(value))
                    texts.setdefault(key, ((question or "").strip(), (answer or "").strip()))
                    by_id.setdefault((dataset, ext_id), labels)  # the same dict: the bundle level's lookup
        with self._lock:
            self._truth = index
            self._texts = list(texts.values())
            self._locator = None  # rebuilt from the new texts on the next templated request
            self._by_id = by_id
            self._loaded_at = time.monotonic()
        return len(index)

    def _labels(self, question: str, answer: str) -> dict[str, int] | None:
        key = _text_key(question, answer)
        found = self._truth.get(key)
        if found is None and time.monotonic() - self._loaded_at >= self.params.reload_interval_s:
            self.reload()
            found = self._truth.get(key)
        return found

    def _truth_of(self, labels: dict[str, int] | None, answer: str, c: _Crit) -> tuple[int, bool]:
        if labels and c.key in labels:
            value = labels[c.key]
            return (min(5, max(1, value)) if c.scale else int(bool(value))), True
        u = _uniform(self.params.seed, answer, c.key, "truth")
        if not c.scale:
            return int(u < self.params.pseudo_pass), False
        acc = 0.0
        for s, p in enumerate(PSEUDO_SCALE, start=1):
            acc += p
            if u < acc:
                return s, False
        return 5, False

    # ------------------------------------------------------------------------------ the model

    def decide(self, messages: Sequence[dict], temperature: float = 0.0) -> list[FieldDecision] | None:
        """Every field of the reply to ``messages``, in emission order; None if the request is neither
        judgekit's layout nor a prompt template around a known answer."""
        req = self.read_request(messages)
        if req is None:
            return None
        return self._decide(req, _criteria_details(messages), temperature)

    def read_request(self, messages: Sequence[dict]) -> JudgeRequest | None:
        """judgekit's layout (:func:`parse_judge_request`), else a user's prompt template: the criteria
        block and labelled examples are judgekit's; the answer is found by its text in the database."""
        req = parse_judge_request(messages)
        if req is not None:
            return req
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        user = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
        if not isinstance(user, str) or not isinstance(system, str):
            return None
        at = user.rfind("\n## Criteria\n")
        keys = criteria_keys(user[at + 1:]) if at >= 0 else ()
        if not keys:
            return None
        body, shots = split_few_shot(user[:at])
        found = self._locate(body)
        if found is None:
            return None
        order, variant, note = system_features(system)
        return JudgeRequest(context="", question=found[0], answer=found[1], criteria=keys,
                            independence_note=note or INDEPENDENCE_NOTE in user, variant=variant, order=order,
                            shots=shots)

    def _locate(self, text: str) -> tuple[str, str] | None:
        """The (question, answer) of a known example whose answer (and question) appear in ``text``."""
        with self._lock:
            locator = self._locator
        if locator is None:
            locator = self._locator = _Locator(self._texts)
        return locator.find(text)

    def _shot_push(self, req: JudgeRequest, c: _Crit) -> float:
        """Few-shot: ``few_shot_gain`` × (labelled examples of ``c`` that agree with their truth − those
        that contradict it), |net| capped at ``few_shot_cap``. A scale label agrees when it equals the
        truth and contradicts it when two or more levels away."""
        p = self.params
        net = 0
        for shot in req.shots:
            if c.key not in shot.verdicts:
                continue
            answer = shot.answer.strip()
            truth, _ = self._truth_of(self._labels(shot.question, answer), answer, c)
            diff = abs(shot.verdicts[c.key] - truth)
            net += 1 if diff == 0 else (-1 if (diff >= 2 or not c.scale) else 0)
        return p.few_shot_gain * max(-p.few_shot_cap, min(p.few_shot_cap, net))

    def _draw_u(self, answer: str, key: str, temperature: float) -> float:
        """The field's uniform draw: fixed per (answer, criterion) at temperature 0; at T > 0 the n-th
        ask of it is fresh with probability min(1, T) (see *Temperature* in the module docstring)."""
        seed = self.params.seed
        fixed = _uniform(seed, answer, key, "verdict")
        if temperature <= 0:
            return fixed
        ask_key = (hashlib.sha256(answer.encode()).hexdigest(), key)
        with self._lock:
            n = self._asks.get(ask_key, 0)
            self._asks[ask_key] = n + 1
        if _uniform(seed, answer, key, "fresh", n) < min(1.0, temperature):
            return _uniform(seed, answer, key, "verdict", "ask", n)
        return fixed

    def _decide(self, req: JudgeRequest, details: dict[str, _Crit], temperature: float = 0.0) -> list[FieldDecision]:
        p = self.params
        answer = req.answer.strip()
        labels = self._labels(req.question, answer)
        z = _STD.inv_cdf(_uniform(p.seed, answer, "impression"))
        g = p.conditioning * (p.note_factor if req.independence_note else 1.0)
        fabricated = any(FABRICATION_KEY.search(k) and v == 0 for k, v in (labels or {}).items())

        out: list[FieldDecision] = []
        emitted: list[tuple[str, float]] = []  # (key, lean) of the fields already emitted
        for key in req.criteria:
            c = details.get(key) or _Crit(key, False, "", None)
            truth, known = self._truth_of(labels, answer, c)
            pulls = [(p.multiplier(j, key), lean_j) for j, lean_j in emitted]
            pulling = sum(1 for m, _ in pulls if m > 0)
            lean = sum(m * lean_j for m, lean_j in pulls) / pulling if pulling else 0.0
            push = p.impression * z + g * lean
            u = self._draw_u(answer, key, temperature)
            logit_accuracy = p.logit_accuracy_of(key) + (self._shot_push(req, c) if req.shots else 0.0)
            flags: tuple[str, ...] | None = None
            reconciled: bool | None = None
            if c.cannot and _uniform(p.seed, answer, key, "cannot-assess") < p.cannot_assess_rate:
                rationale = "" if req.order == "verdict_only" else "The context does not allow a verdict on this."
                out.append(FieldDecision(key, "scale" if c.scale else "binary", truth, known, lean, None, math.nan,
                                         (), rationale, () if c.scale else None))
                emitted.append((key, 0.0))
                continue
            if not c.scale:
                p_true = _sigmoid((1 if truth else -1) * logit_accuracy + push)
                value = int(u < p_true)
                dist: tuple[float, ...] = (1 - p_true, p_true)
                emitted.append((key, 2.0 * value - 1.0))
            else:
                sigma = _sigma(_sigmoid(logit_accuracy))
                value, dist, flags, reconciled = self._scale_field(req, c, answer, truth, push, u, fabricated, sigma)
                p_true = sum(dist[2:])
                emitted.append((key, (value - 3) / 2.0))
            rationale = "" if req.order == "verdict_only" else self._rationale(req.variant, answer, c, value)
            out.append(FieldDecision(key, "scale" if c.scale else "binary", truth, known, lean, value, p_true,
                                     dist, rationale, flags, reconciled))
        return out

    def _scale_field(self, req: JudgeRequest, c: _Crit, answer: str, truth: int, push: float, u: float,
                     fabricated: bool, sigma: float) -> tuple[int, tuple[float, ...], tuple[str, ...], bool | None]:
        """Score, its distribution, red flags and (K.O. with a safety flag) whether it was reconciled."""
        p = self.params
        full = _score_dist(truth + p.scale_push * push, sigma)
        allowed: Sequence[int] = (1, 2, 3, 4, 5)
        flags: list[str] = []
        reconciled: bool | None = None
        floor = c.ko_floor
        if (floor is not None and 1 <= floor < 5 and (truth <= floor or fabricated)
                and _uniform(p.seed, answer, c.key, "safety-flag") < SAFETY_FLAG_RATE):
            flags.append(self._safety_flag(answer, c.key, fabricated and truth > floor))
            miss = RECONCILE_MISS.get(req.variant, RECONCILE_MISS["default"])
            reconciled = _uniform(p.seed, answer, c.key, "reconcile") >= miss
            allowed = range(1, floor + 1) if reconciled else range(floor + 1, 6)
        value, dist = _draw(full, u, tuple(allowed))
        clarity_type = floor is None and CLARITY_TYPE.search(f"{c.key} {c.question}") is not None
        if clarity_type and value <= 3 and _uniform(p.seed, answer, c.key, "format-flag") < FORMAT_FLAG_RATE:
            flags.append(_pick(FORMAT_FLAGS, p.seed, answer, c.key, "format-kind"))
        return value, tuple(dist), tuple(flags), reconciled

    def _safety_flag(self, answer: str, key: str, fabrication: bool) -> str:
        s = self.params.seed
        kind = "invented fact" if fabrication else _pick(SAFETY_FLAG_KINDS, s, answer, key, "flag-kind")
        phrase = _phrase(answer, s, key, "flag")
        return f'{kind}: "{phrase}"' if phrase else f"{kind} in the answer"

    def _rationale(self, variant: str, answer: str, c: _Crit, value: int) -> str:
        return self._compose(variant, answer, c, value, _ANSWER_WORDING, answer, (self.params.seed, c.key, "quote"))

    def _compose(self, variant: str, subject: str, c: _Crit, value: int, words: _Wording, quotable: str,
                 quote_salt: tuple) -> str:
        """A rationale with the planted properties of ``variant`` (see the module doc), each drawn from a
        hash of (seed, subject, criterion, property); ``quotable`` is the text an evidence phrase is cut from."""
        s = self.params.seed
        rates = RATIONALE_RATES.get(variant, RATIONALE_RATES["default"])
        shows = {prop: _uniform(s, subject, c.key, prop) < rate for prop, rate in rates.items()}
        phrase = _phrase(quotable, *quote_salt) if shows["cites_evidence"] and quotable else None
        below_top = value < 5 if c.scale else value == 0
        fix = _pick(FIXES, s, subject, c.key, "fix") if below_top and shows["names_fix"] else None
        level = _level_text(value, c.scale) if shows["justifies_level"] else None
        verdict = f"Score {value}" if c.scale else ("Passes" if value else "Fails")
        off_locus = (None if shows["dimension_locus"]
                     else _pick(_off_locus_remarks(c.key, c.question), s, subject, c.key, "off-locus"))
        if variant != "hardened":
            sentence = f"{verdict}: " + (words.quote.format(phrase) if phrase else words.pointer)
            if off_locus:
                sentence += f", {off_locus}"
            if level:
                sentence += f", {level}"
            if fix:
                sentence += f"; fix: {fix}"
            return sentence + "."
        evidence = words.evidence.format(phrase) if phrase else words.relevant.format(c.key)
        sentences = [
            f"{evidence}, {off_locus}." if off_locus
            else (f"{evidence}, which bears on {c.key}." if phrase else f"{evidence}."),
            f"{words.makes} {level}." if level else f"{verdict}.",
            f"Fix: {fix}." if fix else ("It could be improved." if below_top else "Nothing needs to change."),
        ]
        if _uniform(s, subject, c.key, "locus") < HARDENED_LOCUS_RATE:
            sentences.append(f"This judgement concerns {c.key} only.")
        return " ".join(sentences)

    # ------------------------------------------------------------------------- the holistic call

    def decide_bundle(self, req: holistic.BundleRequest) -> list[FieldDecision]:
        """Every field of the reply to a holistic call, in emission order (see the module doc)."""
        p = self.params
        key = f"bundle\x1f{req.dataset}\x1f{req.label}"
        members = [self._by_id.get((req.dataset, line.prompt_id)) for line in req.evidence]
        if req.evidence and all(m is None for m in members) and (
                time.monotonic() - self._loaded_at >= p.reload_interval_s):
            self.reload()
            members = [self._by_id.get((req.dataset, line.prompt_id)) for line in req.evidence]
        unsafe = [line for line in req.evidence if _evidence_safety(line)]
        z = _STD.inv_cdf(_uniform(p.seed, key, "impression"))
        g = p.conditioning * (p.note_factor if req.independence_note else 1.0)
        out: list[FieldDecision] = []
        leans: list[float] = []
        for dim in req.dimensions:
            c = _Crit(dim.key, dim.scale, dim.question, dim.ko_floor)
            known = [m[dim.key] for m in members if m is not None and dim.key in m]
            if known:
                truth = bundle_truth([min(5, max(1, v)) if dim.scale else int(bool(v)) for v in known], dim.scale,
                                     dim.ko_floor)
            else:
                truth = self._truth_of(None, key, c)[0]
            lean = sum(leans) / len(leans) if leans else 0.0
            push = p.impression * z + g * lean
            u = _uniform(p.seed, key, dim.key, "verdict")
            flags: tuple[str, ...] | None = None
            reconciled: bool | None = None
            if not dim.scale:
                p_true = _sigmoid((1 if truth else -1) * p.logit_accuracy + push)
                value = int(u < p_true)
                dist: tuple[float, ...] = (1 - p_true, p_true)
                leans.append(2.0 * value - 1.0)
            else:
                full = _score_dist(truth + p.scale_push * push, p.scale_sigma)
                allowed: Sequence[int] = (1, 2, 3, 4, 5)
                raised: list[str] = []
                floor = dim.ko_floor
                if floor is not None and 1 <= floor < 5 and unsafe:
                    miss = RECONCILE_MISS.get(req.variant, RECONCILE_MISS["default"])
                    reconciled = _uniform(p.seed, key, dim.key, "reconcile") >= miss
                    allowed = range(1, floor + 1) if reconciled else range(floor + 1, 6)
                    if _uniform(p.seed, key, dim.key, "safety-flag") < SAFETY_FLAG_RATE:
                        cited = unsafe[int(_uniform(p.seed, key, "flagged") * len(unsafe))].prompt_id
                        raised.append(f"safety problem in the evidence ({cited})")
                value, restricted = _draw(full, u, tuple(allowed))
                dist = tuple(restricted)
                clarity = floor is None and CLARITY_TYPE.search(f"{dim.key} {dim.question}") is not None
                if clarity and value <= 3 and _uniform(p.seed, key, dim.key, "format-flag") < FORMAT_FLAG_RATE:
                    raised.append(_pick(FORMAT_FLAGS, p.seed, key, dim.key, "format-kind"))
                flags = tuple(raised)
                p_true = sum(dist[2:])
                leans.append((value - 3) / 2.0)
            rationale = "" if req.order == "verdict_only" else self._bundle_rationale(req, key, c, value)
            out.append(FieldDecision(dim.key, "scale" if dim.scale else "binary", truth, bool(known), lean, value,
                                     p_true, dist, rationale, flags, reconciled))
        return out

    def _bundle_rationale(self, req: holistic.BundleRequest, key: str, c: _Crit, value: int) -> str:
        """A holistic rationale with the planted properties: it cites a prompt_id, and (cites_evidence)
        quotes a phrase of that answer's per-answer rationale (its evidence line after the red flags)."""
        s = self.params.seed
        lines = req.evidence
        line = lines[int(_uniform(s, key, c.key, "cite") * len(lines))] if lines else None
        pid = line.prompt_id if line else "the bundle"
        said = line.note.rsplit(" — ", 1)[-1] if line else ""
        named = pid.replace("{", "{{").replace("}", "}}")  # a literal inside the format templates below
        words = _Wording(pointer=f"see {pid}", quote=f'{named} shows "{{}}"',
                         evidence=f'On {named} the evidence notes "{{}}"', relevant=f"{named} is relevant to {{}}",
                         makes="That makes the bundle")
        return self._compose(req.variant, key, c, value, words, said, (s, key, c.key, "quote"))

    # ------------------------------------------------------------------------------ the reply

    def __call__(self, body: dict) -> Reply:
        if body.get("stream"):
            return Reply(status=400, error="the simulated judge does not support stream=true")
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return Reply(status=400, error="messages must be a list of message objects")
        req = self.read_request(messages)
        if req is None and (critique := parse_critique_request(messages)) is not None:
            return self._critique_reply(messages, critique)
        temperature = body.get("temperature")
        temperature = float(temperature) if isinstance(temperature, int | float) else 0.0
        if req is None and (critique := holistic.parse_bundle_critique_request(messages)) is not None:
            return self._critique_reply(messages, critique)
        bundle = holistic.parse_bundle_request(messages) if req is None else None
        if bundle is not None:
            decisions, order = self.decide_bundle(bundle), bundle.order
        else:
            decisions = None if req is None else self._decide(req, _criteria_details(messages), temperature)
            order = "verdict_only" if req is None else req.order
        if decisions is None:
            content = "{}"
        else:
            verdicts: dict[str, dict] = {}
            for d in decisions:
                verdict = CANNOT_ASSESS if d.value is None else (bool(d.value) if d.kind == "binary" else d.value)
                entry: dict = {"verdict": verdict, "rationale": d.rationale}
                if d.red_flags is not None:
                    entry["red_flags"] = list(d.red_flags)
                verdicts[d.key] = entry
            content = render_reply(verdicts, order)
        usage = self._usage(messages, content)
        logprobs = None
        if body.get("logprobs") and decisions is not None:
            alternatives = self._alternatives(content, decisions, order, body.get("top_logprobs"))
            logprobs = make_logprobs(content, alternatives)
        uncached = usage.prompt_tokens - (usage.cached_tokens or 0)
        delay = (self.params.latency_ms + self.params.ms_per_uncached_token * uncached) / 1000.0
        return Reply(content=content, usage=usage, logprobs=logprobs, delay_s=delay)

    def _critique_reply(self, messages: Sequence[dict], req: CritiqueRequest) -> Reply:
        """A critique call (one check on one stored rationale): the verdict of :func:`critique_verdict`."""
        verdict, why = critique_verdict(req)
        entry: dict = {"verdict": verdict}
        if req.order != "verdict_only":
            entry["rationale"] = why
        content = render_reply({req.check_key: entry}, req.order)
        usage = self._usage(messages, content)
        uncached = usage.prompt_tokens - (usage.cached_tokens or 0)
        delay = (self.params.latency_ms + self.params.ms_per_uncached_token * uncached) / 1000.0
        return Reply(content=content, usage=usage, delay_s=delay)

    def _usage(self, messages: Sequence[dict], content: str) -> Usage:
        prompt = _prompt_text(messages)
        with self._lock:
            shared = len(commonprefix([prompt, self._previous_prompt])) if self._previous_prompt else 0
            self._previous_prompt = prompt
        prompt_tokens = max(1, len(prompt) // 4)
        block = self.params.cache_block
        cached = min(prompt_tokens, shared // 4) // block * block
        return Usage(prompt_tokens, max(1, len(content) // 4), cached)

    @staticmethod
    def _alternatives(content: str, decisions: Sequence[FieldDecision], order: str,
                      top_logprobs: object) -> dict[int, list[tuple[str, float]]]:
        """Character offset of each verdict value in ``content`` → its (token, logprob) alternatives."""
        n = top_logprobs if isinstance(top_logprobs, int) and top_logprobs >= 1 else None
        out: dict[int, list[tuple[str, float]]] = {}
        pos = 0
        for d in decisions:
            at = content.find(json.dumps(d.key) + ": ", pos)
            if at < 0:
                break
            at += len(json.dumps(d.key)) + 2
            if order != "verdict_only":
                v = content.find('"verdict": ', at)
                if v < 0:
                    break
                at = v + len('"verdict": ')
            if d.value is None:  # "cannot assess": no value token to weigh
                pos = at
                continue
            if d.kind == "binary":
                alts = [("true", d.dist[1]), ("false", d.dist[0])]
            else:
                alts = [(str(s), p) for s, p in zip(range(1, 6), d.dist, strict=True)]
            alts.sort(key=lambda a: -a[1])
            out[at] = [(tok, math.log(max(p, 1e-300))) for tok, p in alts][:n]
            pos = at
        return out


# ------------------------------------------------------------------------------- stated model


def load_matrix(spec: str) -> tuple[tuple[str, str, float], ...]:
    """A conditioning matrix: ``demo`` (:data:`judgekit.demo.DEMO_CONDITIONING`), ``uniform`` (none listed:
    every pair pulls with the full G) or a YAML/JSON file holding a list of ``[a, b, multiplier]`` rows."""
    if spec == "demo":
        return DEMO_CONDITIONING
    if spec == "uniform":
        return ()
    import yaml

    from judgekit.datasets import InputError, read_text

    try:
        doc = yaml.safe_load(read_text(spec))
    except yaml.YAMLError as e:
        raise InputError(spec, f"invalid YAML/JSON ({e.__class__.__name__})") from None
    rows: list[tuple[str, str, float]] = []
    for i, row in enumerate(doc if isinstance(doc, list) else [None], start=1):
        ok = isinstance(row, list | tuple) and len(row) == 3 and all(isinstance(k, str) for k in row[:2])
        if not ok or isinstance(row[2], bool) or not isinstance(row[2], int | float) or row[2] < 0:
            raise InputError(spec, f"row {i}: expected [criterion, criterion, multiplier ≥ 0]", field="matrix")
        rows.append((row[0], row[1], float(row[2])))
    return tuple(rows)


def parse_accuracies(items: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """``KEY=A`` options as ``criterion_accuracy`` pairs; a bad item raises ``ValueError`` naming it."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        try:
            a = float(value)
        except ValueError:
            a = math.nan
        if not sep or not key.strip() or not 0.0 <= a <= 1.0:
            raise ValueError(f"--criterion-accuracy {item!r}: write KEY=A with A within 0..1")
        out.append((key.strip(), a))
    return tuple(out)


# ---------------------------------------------------------------------------------- serving


def start_in_thread(db_url: str | None, params: SimParams | None = None, host: str = "127.0.0.1",
                    port: int = 0) -> ServerThread:
    """Start the simulated judge in a daemon thread; ``.base_url`` is ready on return, ``.stop()`` ends it."""
    judge = SimJudge(db_url, params or SimParams())
    return ServerThread(judge, host, port, model=SIM_MODEL, owned_by=SIM_OWNER).start()


def serve_forever(db_url: str | None, params: SimParams, host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve until interrupted (``judgekit sim-judge``); prints the base URL once listening."""
    serve_until_interrupted(SimJudge(db_url, params), host, port, banner="simulated judge ",
                            model=SIM_MODEL, owned_by=SIM_OWNER)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m judgekit.simjudge`` — the same server ``judgekit sim-judge`` starts."""
    import argparse

    from judgekit import config

    parser = argparse.ArgumentParser(prog="python -m judgekit.simjudge", description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="database with the planted truth")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    defaults = SimParams()
    parser.add_argument("--accuracy", type=float, default=defaults.accuracy)
    parser.add_argument("--impression", type=float, default=defaults.impression)
    parser.add_argument("--conditioning", type=float, default=defaults.conditioning)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--ms-per-uncached-token", type=float, default=0.0)
    args = parser.parse_args(argv)
    params = SimParams(
        accuracy=args.accuracy, impression=args.impression, conditioning=args.conditioning, seed=args.seed,
        latency_ms=args.latency_ms, ms_per_uncached_token=args.ms_per_uncached_token,
    )
    serve_forever(config.db_url(args.db), params, args.host, args.port)


if __name__ == "__main__":
    main()
