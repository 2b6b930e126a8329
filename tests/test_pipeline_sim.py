"""End to end on the simulated judge: the pipeline (runner → store → statistics) recovers the
conditioning the simulation injects — seed 003's finding, from data."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import imports, runner, simjudge, store
from judgekit.harness import parse_harness

PAIR = ("answers_question", "cites_source")


def verdict_matrix(s: Session, run_name: str) -> dict[str, dict[int, int]]:
    run = store.get_run(s, run_name)
    keys = {c.id: c.key for c in store.criterion_rows(s, run.rubric_id)}
    out: dict[str, dict[int, int]] = {}
    for ex, cid, value in s.execute(
        select(store.Verdict.example_id, store.Verdict.criterion_id, store.Verdict.value).where(
            store.Verdict.run_id == run.id
        )
    ):
        out.setdefault(keys[cid], {})[ex] = value
    return out


def phi(a: dict[int, int], b: dict[int, int]) -> float:
    ids = sorted(set(a) & set(b))
    return float(np.corrcoef([a[i] for i in ids], [b[i] for i in ids])[0, 1])


def test_single_call_conditioning_is_recovered(engine, db_url):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=600)
    srv = simjudge.start_in_thread(db_url, simjudge.SimParams())  # default conditioning
    try:
        names = {}
        for spec in ("single", "split"):
            judge = runner.JudgeSpec(base_url=srv.base_url, model=simjudge.SIM_MODEL, kind="simulated")
            with Session(engine) as s, s.begin():
                names[spec] = runner.create_run(
                    s,
                    dataset="demo",
                    rubric="demo",
                    harness=parse_harness(spec),
                    judge=judge,
                    name=f"sim-{spec}",
                ).name
            summary = runner.run_sync(engine, names[spec], concurrency=16)
            assert summary.status == "done" and summary.unscored == 0
    finally:
        srv.stop()
    with Session(engine) as s:
        single = verdict_matrix(s, names["single"])
        split = verdict_matrix(s, names["split"])
        ids = store.example_ids(s, store.get_dataset(s, "demo").id)
        reference = {}
        for r in store.labels_for_dataset(s, store.get_dataset(s, "demo").id):
            if r["annotator"] == "reference":
                reference.setdefault(r["criterion"], {})[ids[r["example_id"]]] = r["value"]
    assert len(single[PAIR[0]]) == len(split[PAIR[0]]) == 600
    phi_single, phi_split, phi_ref = (phi(m[PAIR[0]], m[PAIR[1]]) for m in (single, split, reference))
    # the simulation injects conditioning only between fields of one reply: single ≫ split ≈ reference
    assert phi_single > phi_split + 0.15, (phi_single, phi_split)
    assert phi_single > phi_ref + 0.15, (phi_single, phi_ref)
    assert abs(phi_split - phi_ref) < 0.15, (phi_split, phi_ref)
    # and a real association (grounded × no_fabrication) survives under both harnesses
    assert phi(split["grounded"], split["no_fabrication"]) > 0.2
    assert phi(single["grounded"], single["no_fabrication"]) > 0.2
