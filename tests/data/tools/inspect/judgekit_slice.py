"""inspect-ai tasks that grade 12 stored demo answers (no model call for the answer itself).

binary: three model_graded_qa scorers, one per criterion, each registered under the criterion key.
scale:  one scorer whose value is a dict {criterion key: 1-5 score} (a dict-valued score).
"""
import json
import re
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import get_model
from inspect_ai.scorer import Score, accuracy, mean, model_graded_qa, scorer
from inspect_ai.solver import solver

SLICE = json.loads(Path("slice.json").read_text())
RUBRICS = {r["name"]: r for r in SLICE["rubrics"]}
GRADER = "openai/gpt-4o-mini"


def samples():
    return [Sample(id=e["id"], input=e["question"], target="",
                   metadata={"answer": e["answer"], "context": e["context"]}) for e in SLICE["examples"]]


@solver
def stored_answer():
    """The submission is the stored answer: set it as the output instead of calling a model."""
    async def solve(state, generate):
        state.output.completion = state.metadata["answer"]
        return state
    return solve


def criterion(rubric, key):
    return next(c for c in RUBRICS[rubric]["criteria"] if c["key"] == key)


def graded(key):
    template = """
You are assessing a submitted answer on a given task based on a criterion. Here is the data:

[BEGIN DATA]
***
[Task]: {question}
***
[Submission]: {answer}
***
[Criterion]: """ + criterion("demo", key)["question"] + """
***
[END DATA]

Does the submission meet the criterion?

{instructions}
"""
    @scorer(metrics=[accuracy()], name=key)
    def s():
        return model_graded_qa(template=template, model=GRADER)
    return s()


@task
def binary():
    return Task(dataset=samples(), solver=stored_answer(),
                scorer=[graded(k) for k in ("answers_question", "grounded", "concise")])


@scorer(metrics={"*": [mean()]})
def quality():
    """One grader call per scale criterion; the score is a dict of 1-5 values (None when unreadable)."""
    keys = ("correctness", "helpfulness", "clarity")

    async def score(state, target):
        model = get_model(GRADER)
        values, reasons = {}, []
        for key in keys:
            c = criterion("demo-scale", key)
            levels = "; ".join(f"{n} = {t}" for n, t in sorted(c["levels"].items()))
            prompt = (f"Rate the answer on a scale of 1 to 5.\nLevels: {levels}\n\n"
                      f"Question: {state.input_text}\nAnswer: {state.output.completion}\n\n"
                      f"Criterion: {c['question']}\n"
                      'Reply with JSON: {"reason": string, "score": integer from 1 to 5}')
            out = await model.generate(prompt)
            m = re.search(r'"score":\s*(\d+)', out.completion)
            values[key] = int(m.group(1)) if m else None
            reasons.append(f"{key}: {out.completion}")
        return Score(value=values, answer=state.output.completion, explanation="\n".join(reasons))
    return score


@task
def scale():
    return Task(dataset=samples(), solver=stored_answer(), scorer=quality())
