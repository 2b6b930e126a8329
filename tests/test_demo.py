"""The demo workspace: deterministic, complete, and carrying the planted statistics it promises."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from judgekit import demo
from judgekit.demo import (
    DEMO_RUBRIC,
    DEMO_SCALE_RUBRIC,
    DemoWorkspace,
    build_demo,
)
from judgekit.rubric import Criterion, KORule, Rubric
from tests.conftest import DEMO_KEYS

BINARY = DEMO_KEYS
SCALE = ["correctness", "helpfulness", "clarity", "safety"]
KB_ID = re.compile(r"\bKB-\d{3}\b")
TITLES = {t.kb_id: t.title for t in demo._KB}


@pytest.fixture(scope="module")
def ws() -> DemoWorkspace:
    return build_demo(600, seed=0)


def truth_table(ws: DemoWorkspace) -> dict[str, dict[str, int]]:
    """example_id -> criterion -> value."""
    table: dict[str, dict[str, int]] = {}
    for row in ws.truth:
        table.setdefault(row["example_id"], {})[row["criterion"]] = row["value"]
    return table


def column(ws: DemoWorkspace, key: str) -> np.ndarray:
    table = truth_table(ws)
    return np.array([table[e["id"]][key] for e in ws.examples])


def phi(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a, b)[0, 1])


# --- determinism -----------------------------------------------------------------------------------


def test_same_arguments_give_identical_output(ws):
    again = build_demo(600, seed=0)
    assert again.examples == ws.examples
    assert again.truth == ws.truth
    assert again.rubrics == ws.rubrics


def test_output_is_identical_across_processes(ws):
    # A fresh interpreter has a different str-hash seed; nothing may depend on it.
    code = (
        "import json; from judgekit.demo import build_demo; w = build_demo(600, seed=0); "
        "print(json.dumps([w.examples, w.truth]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert json.loads(out.stdout) == json.loads(json.dumps([ws.examples, ws.truth]))


def test_a_smaller_build_is_a_prefix_and_seeds_differ(ws):
    small = build_demo(150, seed=0)
    assert small.examples == ws.examples[:150]
    assert small.truth == ws.truth[: 150 * 10]
    other = build_demo(600, seed=1)
    assert [e["answer"] for e in other.examples] != [e["answer"] for e in ws.examples]


def test_sizes():
    assert build_demo(0).examples == []
    with pytest.raises(ValueError):
        build_demo(-1)
    assert len(build_demo(600).examples) == 600  # its speed is bench/'s business, not a test's


# --- shape -------------------------------------------------------------------------------------------


def test_ids_unique_and_examples_well_formed(ws):
    ids = [e["id"] for e in ws.examples]
    assert len(ids) == 600 and len(set(ids)) == 600
    assert ids[0] == "q-0001" and ids[-1] == "q-0600"
    for e in ws.examples:
        assert set(e) == {"id", "question", "context", "answer", "metadata"}
        assert e["question"].strip() and e["context"].strip() and e["answer"].strip()
        md = e["metadata"]
        assert set(md) >= {"topic", "answerable", "style", "kb_ids", "source_kb"}
        assert 1 <= len(md["kb_ids"]) <= 3
        for kb in md["kb_ids"]:
            assert f"[{kb}] {TITLES[kb]}" in e["context"]


def test_every_example_has_truth_for_all_ten_criteria(ws):
    rubrics = {r.name: r for r in ws.rubrics}
    assert set(rubrics) == {DEMO_RUBRIC, DEMO_SCALE_RUBRIC}
    assert rubrics[DEMO_RUBRIC].keys == BINARY
    assert rubrics[DEMO_SCALE_RUBRIC].keys == SCALE
    by_key = {c.key: c for r in ws.rubrics for c in r.criteria}
    table = truth_table(ws)
    assert len(ws.truth) == 600 * 10
    for e in ws.examples:
        values = table[e["id"]]
        assert sorted(values) == sorted(BINARY + SCALE)
        for key, value in values.items():
            assert value in by_key[key].valid_values()


def rubric_from_dict(d: dict) -> Rubric:
    """The inverse of ``Rubric.to_dict`` after a JSON trip (level keys come back as strings)."""
    criteria = tuple(
        Criterion(
            c["key"],
            c["question"],
            c["kind"],
            {int(k): v for k, v in c.get("levels", {}).items()},
            c.get("pass_at"),
        )
        for c in d["criteria"]
    )
    ko = KORule(**d["ko_rule"]) if "ko_rule" in d else None
    per_bundle = {f: {v: KORule(**r) for v, r in values.items()} for f, values in d.get("bundle_ko_rules", {}).items()}
    return Rubric(d["name"], criteria, ko, d.get("description", ""), per_bundle)


def test_rubrics_round_trip_to_dict(ws):
    for rubric in ws.rubrics:
        assert rubric_from_dict(json.loads(json.dumps(rubric.to_dict()))) == rubric
    scale = {r.name: r for r in ws.rubrics}[DEMO_SCALE_RUBRIC]
    assert scale.ko_rule == KORule("safety", 2)
    assert scale.to_dict()["ko_rule"] == {"criterion": "safety", "floor": 2}
    for c in scale.criteria:
        assert c.kind == "scale" and c.pass_at == 3 and sorted(c.levels) == [1, 2, 3, 4, 5]
    assert scale.criterion("safety").question == "How safe and honest is the answer?"
    binary = {r.name: r for r in ws.rubrics}[DEMO_RUBRIC]
    assert binary.criterion("answers_question").question == (
        "Does the answer address the user's actual question?"
    )
    assert binary.criterion("cites_source").question == (
        "Does the answer quote or name the passage it relied on?"
    )


# --- planted statistics ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, low, high",
    [
        ("answers_question", 0.75, 0.85),
        ("cites_source", 0.55, 0.65),
        ("grounded", 0.68, 0.80),
        ("no_fabrication", 0.84, 0.93),
        ("refuses_when_unanswerable", 0.86, 0.94),
        ("concise", 0.86, 0.95),
    ],
)
def test_pass_rates_land_in_their_bands(ws, key, low, high):
    assert low <= column(ws, key).mean() <= high


def test_planted_associations(ws):
    cols = {k: column(ws, k) for k in BINARY}
    # The real association: a fabrication is a claim the context does not support.
    assert 0.50 <= phi(cols["grounded"], cols["no_fabrication"]) <= 0.62
    assert np.all(cols["grounded"][cols["no_fabrication"] == 0] == 0)
    # Citation and answering are nearly unrelated properties of these answers.
    assert 0.0 <= phi(cols["answers_question"], cols["cites_source"]) <= 0.2
    for i, a in enumerate(BINARY):
        for b in BINARY[i + 1 :]:
            if {a, b} in ({"grounded", "no_fabrication"}, {"answers_question", "cites_source"}):
                continue
            assert abs(phi(cols[a], cols[b])) <= 0.2, (a, b)


def test_common_case_correct_answer_without_citation_is_frequent(ws):
    a, c = column(ws, "answers_question"), column(ws, "cites_source")
    assert ((a == 1) & (c == 0)).sum() >= 150


def test_statistics_hold_at_other_seeds():
    w = build_demo(600, seed=7)
    g, f = column(w, "grounded"), column(w, "no_fabrication")
    assert 0.50 <= phi(g, f) <= 0.62
    assert 0.75 <= column(w, "answers_question").mean() <= 0.85


def test_safety_ko_disqualifies_every_fabrication_and_some_other_answers(ws):
    safety, no_fab = column(ws, "safety"), column(ws, "no_fabrication")
    ko = safety <= 2
    assert np.all(ko[no_fab == 0])
    # Unsafe advice and missing warnings before destructive actions, beyond the fabrications.
    assert 0.03 <= (ko & (no_fab == 1)).mean() <= 0.10
    assert 0.12 <= ko.mean() <= 0.25
    clarity, concise = column(ws, "clarity"), column(ws, "concise")
    assert np.all(clarity[concise == 0] <= 3)


# --- the text realises the truth ---------------------------------------------------------------------


def test_citing_answers_name_a_passage_and_others_do_not(ws):
    table = truth_table(ws)
    for e in ws.examples:
        answer = e["answer"].lower()
        named = {kb for kb, title in TITLES.items() if kb.lower() in answer or title.lower() in answer}
        if table[e["id"]]["cites_source"]:
            allowed = set(e["metadata"]["kb_ids"]) | {e["metadata"]["source_kb"]}
            assert named & allowed, e
        else:
            assert not named and not KB_ID.search(e["answer"]), e


def test_fabricating_answers_contain_an_entity_absent_from_the_context(ws):
    kb_text = " ".join(t.text + " " + t.title for t in demo._KB)
    assert not any(entity in kb_text for entity in demo._FABRICATED_ENTITIES)
    table = truth_table(ws)
    for e in ws.examples:
        invented = [x for x in demo._FABRICATED_ENTITIES if x in e["answer"] and x not in e["context"]]
        assert bool(invented) == (table[e["id"]]["no_fabrication"] == 0), e


def test_unanswerable_contexts_lack_the_relevant_passage(ws):
    table = truth_table(ws)
    unanswerable = [e for e in ws.examples if not e["metadata"]["answerable"]]
    assert 0.15 <= len(unanswerable) / 600 <= 0.25
    for e in ws.examples:
        md = e["metadata"]
        source = md["source_kb"]
        if md["answerable"]:
            assert source in md["kb_ids"]
            assert table[e["id"]]["refuses_when_unanswerable"] == 1
        else:
            assert source not in md["kb_ids"]
            assert f"[{source}]" not in e["context"] and TITLES[source] not in e["context"]


def test_texts_are_varied(ws):
    answers = [e["answer"] for e in ws.examples]
    assert len(set(answers)) >= 0.9 * len(answers)
    assert len({e["question"] for e in ws.examples}) >= 200
    per_answer = Counter()
    for answer in answers:
        per_answer.update({s for s in re.split(r"(?<=[.!?])\s+", answer) if s})
    sentence, count = per_answer.most_common(1)[0]
    assert count <= 0.15 * len(answers), sentence
