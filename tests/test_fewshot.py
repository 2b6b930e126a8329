"""Few-shot from the human column: a seeded, balanced pool stored on the run; never the example judged;
the simulated judge's stated response; the agreement gain measured end to end on the demo."""

from __future__ import annotations

import json
import math

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import fewshot, imports, prompts, reports, simjudge, store
from judgekit.harness import Harness


def pool(engine, k: int, seed: int, source: str = "human"):
    with Session(engine) as s:
        ds = store.get_dataset(s, "demo")
        return fewshot.choose_pool(s, ds, store.load_rubric(s, "demo"), k, seed, source)


def test_pool_is_seeded_balanced_and_k_plus_one_per_criterion(demo, engine):
    a, b, c = pool(engine, 4, 7), pool(engine, 4, 7), pool(engine, 4, 8)
    assert a == b and a != c
    with Session(engine) as s:
        human = reports.load_human(s, "demo")
    for key, entries in a:
        assert len(entries) == 5
        assert len({e for e, _ in entries}) == 5
        values = [v for _, v in entries]
        col = human.raw[:, human.col(key)]
        if {0.0, 1.0} <= set(col.tolist()):  # both outcomes labelled: round-robin shows both
            assert values[:4].count(0) == 2 and values[:4].count(1) == 2
        row = {str(e): i for i, e in enumerate(human.index.ext)}
        assert all(col[row[e]] == v for e, v in entries)  # the human column's own values


def test_too_few_labels_refuses_the_run_naming_the_criterion_and_writes_nothing(cli, base_workspace, engine):
    """Dataset `base` has 2 labels of answers_question (ana): K = 2 needs 3 (the judged one may be among them)."""
    from tests.conftest import DATA

    assert cli("import-labels", DATA / "good" / "labels.jsonl", "--dataset", "base").exit_code == 0
    result = cli("run", "--dataset", "base", "--rubric", "support", "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m", "--judge-kind", "openai", "--few-shot", "2")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --few-shot 2: criterion 'answers_question' has 2 labelled examples in human of dataset 'base'; "
        "K + 1 = 3 are needed (one may be the example judged)")
    with Session(engine) as s:
        assert store.row_counts(s)["runs"] == 0
        with pytest.raises(store.NotFound, match="annotator 'nobody' has no labels"):
            fewshot.choose_pool(s, store.get_dataset(s, "base"), store.load_rubric(s, "support"), 1, 0,
                                "annotator:nobody")


def test_picker_never_shows_the_judged_example(demo, engine):
    with Session(engine) as s:
        ds = store.get_dataset(s, "demo")
        h = Harness(kind="split", few_shot=3, few_shot_from="human", few_shot_pool=pool(engine, 3, 1))
        picker = fewshot.shot_picker(s, ds.id, h)
        keys = store.load_rubric(s, "demo").keys
    in_pool = {e for _, entries in h.few_shot_pool for e, _ in entries}
    for ext in sorted(in_pool):
        for key in keys:
            shots = picker.for_call(ext, [key])
            assert len(shots) == 3
            assert picker.texts[ext] not in [sh.example for sh in shots]
    single = picker.for_call("not-in-pool", keys)
    assert sum(len(sh.verdicts) for sh in single) == 3 * len(keys)  # one example shown once with all its values


def test_simulated_judge_rule_for_labelled_examples(demo, engine):
    """Correct labels raise the criterion's accuracy by the stated logit step; wrong ones lower it."""
    judge = simjudge.SimJudge(engine, simjudge.SimParams(conditioning=0.0))
    with Session(engine) as s:
        rubric = store.load_rubric(s, "demo")
        exs = s.scalars(select(store.Example).order_by(store.Example.id).limit(6)).all()
        truth = dict(s.execute(select(store.Label.criterion, store.Label.value).where(
            store.Label.example_id == exs[0].id)).all())
    target = prompts.ExampleText(exs[0].question, exs[0].context, exs[0].answer)
    key = "answers_question"
    crit = [rubric.criterion(key)]

    def p_true(shot_values) -> float:
        shots = []
        for e, right in zip(exs[1:1 + len(shot_values)], shot_values, strict=True):
            with Session(engine) as s:
                t = s.scalar(select(store.Label.value).where(store.Label.example_id == e.id,
                                                             store.Label.criterion == key))
            shots.append(prompts.Shot(prompts.ExampleText(e.question, e.context, e.answer),
                                      ((key, t if right else 1 - t),)))
        msgs = prompts.build_messages(target, crit, Harness(kind="split"), None, shots)
        return judge.decide(msgs)[0].p_true

    p = simjudge.SimParams()
    base, good, bad = p_true([]), p_true([True] * 5), p_true([False] * 5)
    sign = 1 if truth[key] else -1
    logit = lambda x: math.log(x / (1 - x))  # noqa: E731
    assert logit(good) - logit(base) == pytest.approx(sign * 5 * p.few_shot_gain)
    assert logit(bad) - logit(base) == pytest.approx(-sign * 5 * p.few_shot_gain)


def test_few_shot_run_end_to_end_gains_agreement_on_the_demo(cli, engine, db_url):
    """`--few-shot 4` on the simulated judge over 150 demo answers: the pool is stored on the run, no call
    shows its own example, and κ with the human column rises on every criterion (the stated model)."""
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=150)
    srv = simjudge.start_in_thread(db_url)
    try:
        for name, extra in (("plain", []), ("shots", ["--few-shot", "4"])):
            result = cli("run", "--dataset", "demo", "--rubric", "demo", "--harness", "split", "--seed", "2",
                         "--base-url", srv.base_url, "--model", simjudge.SIM_MODEL, "--name", name, *extra)
            assert result.exit_code == 0, result.stderr
    finally:
        srv.stop()
    with Session(engine) as s:
        run = store.get_run(s, "shots")
        assert run.harness["few_shot"] == 4 and run.harness["few_shot_from"] == "human"
        assert run.harness["few_shot_seed"] == 2
        stored_pool = Harness.from_dict(run.harness).few_shot_pool
        assert stored_pool == pool(engine, 4, 2)
        calls = s.execute(select(store.Call.request, store.Example.answer).join(
            store.Example, store.Example.id == store.Call.example_id).where(store.Call.run_id == run.id)).all()
    assert len(calls) == 150 * 6
    for request, answer in calls:
        user = request["messages"][1]["content"]
        shots_part = user[user.index(prompts.FEW_SHOT_HEADER):]
        assert shots_part.count("### Labelled example ") == 4
        assert f"#### Answer\n{answer.strip()}\n" not in shots_part
    kappas = {}
    for name in ("plain", "shots"):
        result = cli("report", "agreement", "--run", name, "--format", "json")
        kappas[name] = {k: e["kappa"] for k, e in json.loads(result.stdout)["criteria"].items()}
    gains = {k: kappas["shots"][k] - kappas["plain"][k] for k in kappas["plain"]}
    assert sum(gains.values()) / len(gains) > 0.05, gains
    assert sum(g > 0 for g in gains.values()) >= 5, gains
