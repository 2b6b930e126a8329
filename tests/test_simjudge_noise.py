"""The simulated judge's stated model, issue 13's parts: pair-specific conditioning (the demo's matrix),
per-criterion accuracy, and test–retest noise at temperature > 0 equal to what the model states.

The model is exercised in-process (``SimJudge.decide`` on the prompts a runner would send) so that many
asks are cheap; the HTTP path is covered by tests/test_repeats_cache.py and tests/test_noise.py.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from judgekit import prompts, simjudge
from judgekit.demo import DEMO_CONDITIONING
from judgekit.harness import criterion_groups, parse_harness


def judge_all(judge: simjudge.SimJudge, rubric, texts, spec: str, temperature: float = 0.0) -> np.ndarray:
    """(answers, criteria) verdicts of one harness, asked as a runner would ask them."""
    h = parse_harness(spec)
    V = np.full((len(texts), len(rubric.keys)), np.nan)
    for i, t in enumerate(texts):
        for group in criterion_groups(h, rubric):
            for d in judge.decide(prompts.build_messages(t, rubric.subset(list(group)), h), temperature):
                V[i, rubric.keys.index(d.key)] = d.value
    return V


def phi(V: np.ndarray, i: int, j: int) -> float:
    return float(np.corrcoef(V[:, i], V[:, j])[0, 1])


def test_the_demo_matrix_conditions_only_the_pairs_it_names(demo600):
    engine, rubric, texts, _ = demo600
    judge = simjudge.SimJudge(engine, simjudge.SimParams())
    single, split = judge_all(judge, rubric, texts, "single"), judge_all(judge, rubric, texts, "split")
    keys = rubric.keys
    for i, j in itertools.combinations(range(len(keys)), 2):
        m = judge.params.multiplier(keys[i], keys[j])
        shift = phi(single, i, j) - phi(split, i, j)
        if m > 0:  # a pulling pair: one call inflates its association (0.21–0.33 on these answers)
            assert shift > 0.15, (keys[i], keys[j], shift)
        else:  # no direct pull; what is left comes through third criteria the two share a call with
            assert abs(shift) < 0.1, (keys[i], keys[j], shift)
    # a grouping that co-groups only pairs that do not pull reproduces split exactly (temperature 0)
    grouped = judge_all(judge, rubric, texts,
                        "grouped:answers_question+grounded+concise|cites_source+no_fabrication")
    np.testing.assert_array_equal(grouped, split)
    # the matrix is the stated one, symmetric, and pairs it does not list pull with the full strength
    assert judge.params.matrix == DEMO_CONDITIONING
    assert judge.params.multiplier("cites_source", "answers_question") == 1.0
    assert judge.params.multiplier("grounded", "concise") == 0.0
    assert judge.params.multiplier("tone", "concise") == 1.0


def test_a_uniform_matrix_pulls_every_pair(demo600):
    engine, rubric, texts, _ = demo600
    judge = simjudge.SimJudge(engine, simjudge.SimParams(matrix=simjudge.load_matrix("uniform")))
    grouped = judge_all(judge, rubric, texts[:300], "grouped:answers_question+grounded+concise|cites_source")
    split = judge_all(judge, rubric, texts[:300], "split")
    assert not np.array_equal(grouped, split)
    assert phi(grouped, 0, 2) - phi(split, 0, 2) > 0.1  # answers_question × grounded now pulls


@pytest.mark.parametrize("temperature", [0.5, 1.0])
def test_retest_noise_is_the_stated_noise(demo600, temperature):
    engine, rubric, texts, truth = demo600
    params = simjudge.SimParams(criterion_accuracy=(("concise", 0.7),))
    judge = simjudge.SimJudge(engine, params)
    first = judge_all(judge, rubric, texts, "split", temperature)
    second = judge_all(judge, rubric, texts, "split", temperature)
    n = len(texts)
    for j, key in enumerate(rubric.keys):
        expected = params.expected_retest(key, truth[:, j], temperature)
        flips = float((first[:, j] != second[:, j]).mean())
        sd = math.sqrt(expected.flip_rate * (1 - expected.flip_rate) / n)
        assert abs(flips - expected.flip_rate) < 3.5 * sd, (key, flips, expected)
    concise = params.expected_retest("concise", truth[:, 5], temperature)
    answers = params.expected_retest("answers_question", truth[:, 0], temperature)
    assert concise.flip_rate > answers.flip_rate + 0.05  # the badly read criterion is the noisy one
    # the per-criterion accuracy is the stated one at any temperature (u stays uniform)
    accuracy = float((first[:, 5] == truth[:, 5]).mean())
    z, w = np.polynomial.hermite_e.hermegauss(80)
    expected_acc = float(np.dot(w / w.sum(), 1 / (1 + np.exp(-(params.logit_accuracy_of("concise") + 0.5 * z)))))
    assert abs(accuracy - expected_acc) < 3.5 * math.sqrt(expected_acc * (1 - expected_acc) / n)


def test_temperature_zero_repeats_exactly(demo600):
    engine, rubric, texts, _ = demo600
    judge = simjudge.SimJudge(engine, simjudge.SimParams())
    np.testing.assert_array_equal(judge_all(judge, rubric, texts[:100], "single"),
                                  judge_all(judge, rubric, texts[:100], "single"))


def test_expected_retest_by_hand():
    # no impression (w = 0), T = 1: every answer passes with p = a or 1 - a, so two asks flip with
    # probability 2a(1 - a) = 2 · 0.8 · 0.2 = 0.32. With half the truths passing, π = 0.5 and
    # κ = 1 - 0.32 / (2 · 0.5 · 0.5) = 0.36.
    params = simjudge.SimParams(accuracy=0.8, impression=0.0)
    got = params.expected_retest("c", [1, 0] * 50, 1.0)
    assert got.flip_rate == pytest.approx(0.32, abs=1e-9)
    assert got.pass_rate == pytest.approx(0.5, abs=1e-9)
    assert got.kappa == pytest.approx(0.36, abs=1e-9)
    # T = 0.5: q = 1 - 0.5² = 0.75 of the asks are independent, so 0.75 · 0.32 = 0.24
    assert params.expected_retest("c", [1, 0] * 50, 0.5).flip_rate == pytest.approx(0.24, abs=1e-9)
    assert params.expected_retest("c", [1, 0] * 50, 0.0).flip_rate == 0.0
    # all truths pass and a = 1: every verdict passes, κ undefined (not 0, not 1)
    assert math.isnan(simjudge.SimParams(accuracy=1.0, impression=0.0).expected_retest("c", [1] * 10, 1.0).kappa)


def test_bad_model_parameters_are_refused(tmp_path):
    with pytest.raises(ValueError, match="accuracy of concise"):
        simjudge.SimParams(criterion_accuracy=(("concise", 1.5),))
    with pytest.raises(ValueError, match="KEY=A"):
        simjudge.parse_accuracies(["concise"])
    path = tmp_path / "matrix.yaml"
    path.write_text("- [a, b, 0.5]\n- [a, c]\n")
    from judgekit.datasets import InputError

    with pytest.raises(InputError, match="row 2"):
        simjudge.load_matrix(str(path))
    path.write_text("- [a, b, 0.5]\n")
    assert simjudge.load_matrix(str(path)) == (("a", "b", 0.5),)
