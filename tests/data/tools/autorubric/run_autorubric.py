"""Grade 12 demo answers with autorubric (criterion grader, one call per criterion) on the tool judge."""
import asyncio
import json
import sys
from pathlib import Path

from autorubric import DataItem, LLMConfig, Rubric, RubricDataset
from autorubric.eval import evaluate
from autorubric.graders import CriterionGrader

slice_ = json.loads(Path("slice.json").read_text())
rubrics = {r["name"]: r for r in slice_["rubrics"]}
which = sys.argv[1]
if which == "binary":
    keys = ["answers_question", "grounded", "concise"]
    crits = [{"name": k, "weight": 10.0, "requirement": next(c["question"] for c in rubrics["demo"]["criteria"] if c["key"] == k)} for k in keys]
else:
    keys = ["correctness", "helpfulness", "clarity"]
    crits = []
    for k in keys:
        c = next(c for c in rubrics["demo-scale"]["criteria"] if c["key"] == k)
        crits.append({"name": k, "weight": 10.0, "requirement": c["question"], "scale_type": "ordinal",
                      "options": [{"label": f"{n} - {t}", "value": (int(n) - 1) / 4} for n, t in sorted(c["levels"].items())]})
rubric = Rubric.from_dict(crits)
items = [DataItem(submission=e["answer"], description=e["id"], prompt=e["question"]) for e in slice_["examples"]]
dataset = RubricDataset(prompt="Answer the customer's support question.", rubric=rubric, items=items, name=f"judgekit-demo-{which}")
dataset.to_file(f"dataset.{which}.json")
grader = CriterionGrader(llm_config=LLMConfig(model="openai/gpt-4o-mini", api_base="http://127.0.0.1:8790/v1", api_key="not-needed", temperature=0.0))
result = asyncio.run(evaluate(dataset, grader, show_progress=False, experiment_name=f"demo-{which}", experiments_dir="experiments", resume=False))
print(which, result.successful_items, result.failed_items, result.total_token_usage, result.total_completion_cost)
