"""LangSmith evaluate() run locally (upload_results=False): 12 stored answers x 3 criteria, LLM-as-judge
evaluators calling the tool judge; the export is ExperimentResults.to_pandas() written as CSV."""
import json
import uuid
from pathlib import Path

import openai
from langsmith import Client, schemas
from langsmith.evaluation import evaluate

SLICE = json.loads(Path("slice.json").read_text())
CRITERIA = {c["key"]: c["question"] for c in SLICE["rubrics"][0]["criteria"]}
judge = openai.OpenAI(base_url="http://127.0.0.1:8790/v1", api_key="not-needed")
ANSWERS = {e["id"]: e["answer"] for e in SLICE["examples"]}


def target(inputs: dict) -> dict:
    return {"answer": ANSWERS[inputs["example_id"]]}  # the stored answer is the output being judged


def make_evaluator(key):
    def evaluator(inputs: dict, outputs: dict) -> dict:
        reply = judge.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content":
            f"Grade the answer. Reply with JSON {{\"reason\", \"pass\", \"score\"}}.\n<Output>\n{outputs['answer']}\n"
            f"</Output>\n<Rubric>\n{CRITERIA[key]}\n</Rubric>"}])
        try:
            verdict = json.loads(reply.choices[0].message.content)
            return {"key": key, "score": bool(verdict["pass"]), "comment": verdict["reason"]}
        except (ValueError, KeyError):
            return {"key": key, "score": None, "comment": reply.choices[0].message.content}
    evaluator.__name__ = key
    return evaluator


data = [schemas.Example(id=uuid.uuid5(uuid.NAMESPACE_URL, e["id"]), inputs={"example_id": e["id"], "question": e["question"]},
                        outputs=None) for e in SLICE["examples"]]
results = evaluate(target, data=data, evaluators=[make_evaluator(k) for k in ("answers_question", "grounded", "concise")],
                   upload_results=False, client=Client(api_key="not-needed", api_url="http://127.0.0.1:9"),
                   max_concurrency=0)
df = results.to_pandas()
df.to_csv("experiment.langsmith.csv", index=False)
print(df.columns.tolist(), len(df))
