"""Langfuse score exports for 12 stored answers x 3 criteria, built offline with the Langfuse SDK.

The judging is real (one call per answer and criterion to the tool judge); what a Langfuse server would
store and export is built with the SDK's own pieces: trace ids from Langfuse.create_trace_id(seed=<example
id>) (the SDK's documented way to tie a trace to an external id), scores as the SDK's API response types
(langfuse.api.scores: ScoreV3_*), serialised by the SDK into the shape api.scores.get_many() returns. The
same scores are also written in the blob-storage export layout (snake_case CSV columns of Langfuse's
getScoresForBlobStorageExport). No Langfuse server is involved.
"""
import csv
import datetime as dt
import json
import uuid
from pathlib import Path

import openai
from langfuse import Langfuse
from langfuse.api.scores.types import GetScoresV3Response
from langfuse.api.scores.types.get_scores_v3meta import GetScoresV3Meta
from langfuse.api.scores.types.score_subject_v3 import ScoreSubjectV3_Trace
from langfuse.api.scores.types.score_v3 import ScoreV3_Boolean, ScoreV3_Categorical, ScoreV3_Numeric

SLICE = json.loads(Path("slice.json").read_text())
CRITERIA = {c["key"]: c["question"] for c in SLICE["rubrics"][0]["criteria"]}
judge = openai.OpenAI(base_url="http://127.0.0.1:8790/v1", api_key="not-needed")
KINDS = {"answers_question": "BOOLEAN", "grounded": "NUMERIC", "concise": "CATEGORICAL"}
T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)

scores, blob = [], []
for n, e in enumerate(SLICE["examples"]):
    trace_id = Langfuse.create_trace_id(seed=e["id"])
    for key, kind in KINDS.items():
        reply = judge.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content":
            f"Grade the answer. Reply with JSON {{\"reason\", \"pass\", \"score\"}}.\n<Output>\n{e['answer']}\n"
            f"</Output>\n<Rubric>\n{CRITERIA[key]}\n</Rubric>"}]).choices[0].message.content
        try:
            verdict = json.loads(reply)
            passed, comment = bool(verdict["pass"]), verdict["reason"]
        except (ValueError, KeyError):
            passed, comment = None, reply  # an unreadable reply: the evaluator records it as 'unknown'
        ts = T0 + dt.timedelta(seconds=n)
        common = dict(id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{e['id']}/{key}")), project_id="judgekit-demo",
                      name=key, source="EVAL", timestamp=ts, environment="default", created_at=ts, updated_at=ts,
                      comment=comment, metadata={"judge_model": "gpt-4o-mini"},
                      subject=ScoreSubjectV3_Trace(id=trace_id))
        if kind == "BOOLEAN" and passed is not None:
            score = ScoreV3_Boolean(value=passed, **common)
        elif kind == "NUMERIC" and passed is not None:
            score = ScoreV3_Numeric(value=float(passed), **common)
        else:
            score = ScoreV3_Categorical(value={True: "pass", False: "fail", None: "unknown"}[passed], **common)
        scores.append(score)
        d = score.dict()
        blob.append({"id": d["id"], "timestamp": ts.strftime("%Y-%m-%d %H:%M:%S.%f"), "project_id": "judgekit-demo",
                     "environment": "default", "trace_id": trace_id, "observation_id": "", "session_id": "",
                     "dataset_run_id": "", "name": key,
                     "value": 0 if score.data_type == "CATEGORICAL" else int(score.value),
                     "source": "EVAL", "comment": comment, "data_type": score.data_type,
                     "string_value": score.value if score.data_type == "CATEGORICAL" else "",
                     "created_at": ts.strftime("%Y-%m-%d %H:%M:%S.%f"),
                     "updated_at": ts.strftime("%Y-%m-%d %H:%M:%S.%f")})

response = GetScoresV3Response(data=scores, meta=GetScoresV3Meta(limit=100, next_cursor=None))
with open("scores.api.json", "w", encoding="utf-8") as f:
    f.write(json.dumps(json.loads(response.json()), indent=2, ensure_ascii=False) + "\n")
with open("scores.blob.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(blob[0]))
    w.writeheader()
    w.writerows(blob)
print(len(scores), "scores")
