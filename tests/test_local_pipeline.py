"""Smoke test on the bundled local judge (a real LLM: llama.cpp + SmolLM2-135M): the runner's
single and split harnesses over demo examples, through the real openai client and structured output."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import client, imports, localjudge, runner, store
from judgekit.harness import parse_harness

pytestmark = pytest.mark.local_llm


@pytest.fixture(scope="module")
def local():
    with localjudge.LocalJudge() as judge:
        yield judge


def test_single_and_split_on_real_model(local, engine):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    judge = runner.JudgeSpec(base_url=local.base_url, model=local.model, kind="local", timeout_s=120.0,
                             max_tokens=300)
    names = []
    for spec in ("single", "split"):
        with Session(engine) as s, s.begin():
            names.append(runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness(spec),
                                           judge=judge, limit=5, name=f"local-{spec}").name)
        summary = runner.run_sync(engine, names[-1], concurrency=1)
        assert summary.status == "done", summary.message
    with Session(engine) as s:
        for name in names:
            run = store.get_run(s, name)
            total = s.scalar(select(func.count()).select_from(store.Verdict).where(store.Verdict.run_id == run.id))
            scored = s.scalar(select(func.count(store.Verdict.value)).where(store.Verdict.run_id == run.id))
            assert total == 5 * 6
            assert scored / total >= 0.8, (name, scored, total)
            modes = set(s.scalars(select(store.Call.structured_mode).where(store.Call.run_id == run.id)))
            assert modes == {"json_object"}  # llama.cpp refuses json_schema; auto settled on json_object + schema
        assert client.known_structured_mode(runner.judge_config(s.get(store.Judge, run.judge_id))) == "json_object"
