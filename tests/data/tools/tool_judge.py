"""The endpoint the committed tool fixtures were generated against (not used by the tests).

An OpenAI-compatible server (:mod:`judgekit.openai_server`) that answers *other tools'* grader prompts
— promptfoo's llm-rubric, inspect-ai's model_graded_qa, autorubric's criterion grader — with verdicts
drawn from the demo's planted truth, so an imported run has a known relation to the ``reference``
labels. judgekit's own simulated judge (``judgekit sim-judge``) only reads judgekit's prompt layout.

How a request is read: the example is the demo answer (of the first 30) that occurs in the prompt
text (the longest one, if several); the criterion is the rubric criterion whose question occurs in it.
The verdict is the planted truth, flipped (binary) or moved by ±1 (scale) with probability
``NOISE`` from a hash of (example, criterion) — a judge of known accuracy. The reply takes the shape the
prompt asks for: a ``response_format`` JSON schema is filled; a prompt that asks for "GRADE: C/I"
gets one; otherwise promptfoo's ``{"reason", "pass", "score"}``. (example, criterion) pairs in
``UNPARSEABLE`` get a reply no grader can read, so each fixture shows how its tool records that.

    .venv/bin/python tests/data/tools/tool_judge.py --port 8790 [--record requests.jsonl]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading

from judgekit import demo
from judgekit.openai_server import Reply, ServerThread

NOISE = 0.15
UNPARSEABLE = {("q-0007", "concise"), ("q-0007", "clarity")}
EXAMPLES = demo.build_demo(n_examples=30)
TRUTH = {(t["example_id"], t["criterion"]): t["value"] for t in EXAMPLES.truth}
CRITERIA = [c for r in EXAMPLES.rubrics for c in r.criteria]


def _u(*parts: object) -> float:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big") / 2**64


def _prompt_text(body: dict) -> str:
    out = []
    for m in body.get("messages") or ():
        c = m.get("content")
        if isinstance(c, list):
            c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
        out.append(str(c or ""))
    return "\n".join(out)


def _find(text: str) -> tuple[dict | None, list]:
    found = [e for e in EXAMPLES.examples if e["answer"].strip() in text]
    example = max(found, key=lambda e: len(e["answer"])) if found else None
    crits = [c for c in CRITERIA if c.question in text]
    return example, crits


def verdict(example_id: str, crit) -> int:
    truth = TRUTH[(example_id, crit.key)]
    u = _u("tool-judge", example_id, crit.key)
    if crit.is_scale:
        if u < NOISE:
            return max(1, truth - 1)
        if u < 2 * NOISE:
            return min(5, truth + 1)
        return truth
    return 1 - truth if u < NOISE else truth


def _reason(example_id: str, crit, value: int) -> str:
    if crit.is_scale:
        return f"Scored {value} for {crit.key}: {crit.levels[value]}."
    return f"The answer {'meets' if value else 'does not meet'} the {crit.key} requirement."


def _option_number(text: str, value: int) -> int | None:
    """The (1-based, possibly shuffled) number of the listed option whose label starts with the score."""
    block = re.search(r"<options>(.*?)</options>", text, re.S)
    for line in (block.group(1).splitlines() if block else ()):
        m = re.match(rf"\s*(\d+)\. {value}\b", line)
        if m:
            return int(m.group(1))
    return None


def _fill(schema: dict, example_id: str, crit, text: str) -> object:
    """A value for a JSON schema, decided by the verdict (autorubric's structured output)."""
    value = verdict(example_id, crit)
    props = schema.get("properties") or {}
    out = {}
    for name, p in props.items():
        kind = p.get("type")
        if name == "selected_option":
            out[name] = _option_number(text, value)
        elif "enum" in p:
            options = p["enum"]
            want = "MET" if value else "UNMET"
            out[name] = want if want in options else options[0]
        elif kind == "boolean":
            out[name] = bool(value)
        elif kind == "integer":
            out[name] = value
        elif kind == "number":
            out[name] = float(value)
        else:
            out[name] = _reason(example_id, crit, value)
    return out


def handle(body: dict, log=None) -> Reply:
    text = _prompt_text(body)
    example, crits = _find(text)
    if "generate 3-4 concise evaluation steps" in text:  # promptfoo g-eval, first call: no answer yet
        return Reply(content=json.dumps({"steps": ["Read the criterion.", "Check the reply against it.",
                                                   "Decide how fully the reply meets it."]}))
    if log is not None:
        log(body, example and example["id"], [c.key for c in crits])
    if example is None or len(crits) != 1:
        return Reply(content="I cannot tell which answer or criterion this is about.")
    crit = crits[0]
    ex_id = example["id"]
    if (ex_id, crit.key) in UNPARSEABLE:
        return Reply(content="Hmm, hard to say; it depends on what the user wanted.")
    value = verdict(ex_id, crit)
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
    if schema:
        return Reply(content=json.dumps(_fill(schema, ex_id, crit, text)))
    if "rate the Reply on one metric" in text:  # promptfoo g-eval, second call: an integer 0–10
        score = 2 * value if crit.is_scale else (9 if value else 2)
        return Reply(content=json.dumps({"score": score, "reason": _reason(ex_id, crit, value)}))
    if re.search(r"GRADE: ?\$?LETTER|GRADE: C", text):
        return Reply(content=f"{_reason(ex_id, crit, value)}\nGRADE: {'C' if crit.passes(value) else 'I'}")
    if crit.is_scale:
        return Reply(content=json.dumps({"reason": _reason(ex_id, crit, value), "pass": crit.passes(value),
                                         "score": value}))
    return Reply(content=json.dumps({"reason": _reason(ex_id, crit, value), "pass": bool(value),
                                     "score": float(value)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8790)
    ap.add_argument("--record", help="append every request (and what it was read as) to this JSONL file")
    args = ap.parse_args()
    lock = threading.Lock()

    def log(body, ex, crits):
        if args.record:
            with lock, open(args.record, "a", encoding="utf-8") as f:
                f.write(json.dumps({"example": ex, "criteria": crits, "body": body}) + "\n")

    srv = ServerThread(lambda body: handle(body, log), port=args.port, model="tool-judge").start()
    print(f"listening on {srv.base_url}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
