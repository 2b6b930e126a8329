"""Benchmark the grouping planner on the simulated judge, whose conditioning between criteria is stated.

Everything goes through the real path: the demo in a temporary SQLite file, the simulated judge over
HTTP, runs through the runner, ``planner.plan_groups`` on the stored runs. Three parts:

1. **The demo's stated matrix** (two triangles of criteria pull on each other, the other pairs do not).
   A pilot at temperature 0.5 over a seeded sample — ``split`` twice (the noise floor) and ``single`` —
   then the planner's recommendation, then a **fresh run** of the recommended grouping on the same
   answers: calls and prompt tokens saved against ``split`` (measured from the runs' totals), the worst
   induced |Δphi| among co-grouped pairs on the fresh run (grouped − split, paired, with its interval),
   and whether every co-grouped pair stays within the noise floor (checked as the audit checks a harness:
   false discovery rate 5 % across the pairs, then the pair's floor). Target: ≥ 40 % fewer calls.
2. **Every pair conditions every other** (a uniform matrix), at temperature 0 over all 600 answers: the
   planner must recommend ``split`` and say why. (A judge that spreads its pull over every earlier field
   pulls each pair weakly inside a six-criterion call; at temperature 0.5 the weakest pulls, |Δphi| ≈
   0.08, sit at the noise floor and the planner may co-group them — the floor is doing its job there.)
3. **A budget** (``calls=2`` on part 1's pilot): the recommendation must fit it and be the least
   distorting grouping that does.

Usage: ``python bench/planner_bench.py [--quick]``. The last line is machine-readable:
``RESULT calls_saved=… worst_fresh=… within_floor=… uniform_split=… budget_ok=…``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from sqlalchemy.orm import Session

from judgekit import audit, imports, noise, planner, reports, runner, simjudge, store
from judgekit.harness import parse_harness

TEMPERATURE = 0.5
TARGET_SAVED = 0.40


def _run(engine, base_url: str, name: str, spec: str, sample: int, seed: int, repeat: int = 1,
         temperature: float = TEMPERATURE) -> list[str]:
    judge = runner.JudgeSpec(base_url=base_url, model=simjudge.SIM_MODEL, kind="simulated", temperature=temperature)
    with Session(engine) as s, s.begin():
        names = runner.create_repeats(s, repeat=repeat, name=name, dataset="demo", rubric="demo",
                                      harness=parse_harness(spec), judge=judge, sample=sample, seed=seed)
    for n in names:
        summary = runner.run_sync(engine, n, concurrency=16)
        assert summary.status == "done", summary.message
    return names


def _pilot(engine, url: str, params: simjudge.SimParams, sample: int, seed: int, tag: str,
           temperature: float = TEMPERATURE):
    srv = simjudge.start_in_thread(url, params)
    try:
        split = _run(engine, srv.base_url, f"{tag}-split", "split", sample, seed, repeat=2, temperature=temperature)
        single = _run(engine, srv.base_url, f"{tag}-single", "single", sample, seed, temperature=temperature)[0]
    finally:
        srv.stop()
    return single, split, srv


def run(quick: bool = False) -> dict:
    sample = 150 if quick else 300
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["JUDGEKIT_HOME"] = tmp  # the matrix cache and prices.yaml of a throwaway workspace
        url = f"sqlite:///{Path(tmp) / 'bench.sqlite'}"
        engine = store.engine_for(url)
        with Session(engine) as s, s.begin():
            imports.load_demo(s, n_examples=600)
        t0 = time.perf_counter()

        # 1. the demo's stated matrix: pilot, plan, fresh run of the recommendation
        params = simjudge.SimParams()
        single, split, _ = _pilot(engine, url, params, sample, 1, "demo")
        with Session(engine) as s:
            plan = planner.plan_groups(s, single, split[0])
            budget_plan = planner.plan_groups(s, single, split[0], budget=planner.Budget(calls=2))
        rec = plan.recommended
        srv = simjudge.start_in_thread(url, params)
        try:
            fresh = _run(engine, srv.base_url, "fresh", rec.spec, sample, 1)[0]
        finally:
            srv.stop()
        with Session(engine) as s:
            grouped_src, split_src = reports.load_sources(s, [fresh, split[1]])
            floor = noise.noise_floor(s, split[0])
            t_fresh = store.get_run(s, fresh).totals
            t_split = store.get_run(s, split[1]).totals
        ev = audit.audit_evidence([split_src.binary, grouped_src.binary], ["split", "grouped"], split_src.keys,
                                  reference=0)
        co = {frozenset((a, b)) for g in rec.groups for i, a in enumerate(g) for b in g[i + 1:]}
        worst, worst_pair, within = 0.0, None, True
        for e in ev.pairs:
            if frozenset((e.a, e.b)) not in co:
                continue
            shift = e.shift["grouped"]
            if abs(shift.value) >= worst:
                worst, worst_pair = abs(shift.value), (e.a, e.b, shift)
            within &= not noise.beyond_floor(shift, floor.pair_floor(e.a, e.b), shown=shift.significant)
        pulled = {frozenset((a, b)) for a, b, m in params.matrix if m > 0}
        dependent_cogrouped = len(co & pulled)

        # 2. every pair conditions every other
        uniform = simjudge.SimParams(matrix=simjudge.load_matrix("uniform"))
        u_single, u_split, _ = _pilot(engine, url, uniform, 2 * sample, 2, "uniform", temperature=0.0)
        with Session(engine) as s:
            u_plan = planner.plan_groups(s, u_single, u_split[0])

        # 3. the budget: least distorting within two calls per answer
        two = [g for g in budget_plan.curve if g.calls_per_answer <= 2]
        budget_ok = (budget_plan.recommended.calls_per_answer <= 2
                     and budget_plan.recommended.worst == min(g.worst for g in two))
        seconds = time.perf_counter() - t0
        store.dispose_engines()
    calls_saved = 1 - t_fresh["calls"] / t_split["calls"]
    result = {
        "sample": sample,
        "recommended": rec.spec,
        "calls_per_answer": rec.calls_per_answer,
        "calls_saved": calls_saved,
        "prompt_tokens_saved": 1 - t_fresh["prompt_tokens"] / t_split["prompt_tokens"],
        "worst_fresh": worst,
        "worst_pair": f"{worst_pair[0]} × {worst_pair[1]} {worst_pair[2].value:+.2f} "
                      f"[{worst_pair[2].lo:+.2f}, {worst_pair[2].hi:+.2f}]" if worst_pair else "none",
        "within_floor": within,
        "dependent_cogrouped": dependent_cogrouped,
        "uniform_split": u_plan.recommended.spec == "split" and "every pair" in u_plan.why,
        "uniform_why": u_plan.why,
        "budget_ok": budget_ok,
        "budget_spec": budget_plan.recommended.spec,
        "budget_worst": budget_plan.recommended.worst,
        "seconds": seconds,
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 150-answer pilot instead of 300")
    r = run(quick=parser.parse_args().quick)
    for k, v in r.items():
        print(f"{k:>22}: {v}")
    print(f"RESULT calls_saved={r['calls_saved']:.3f} worst_fresh={r['worst_fresh']:.3f} "
          f"within_floor={str(r['within_floor']).lower()} uniform_split={str(r['uniform_split']).lower()} "
          f"budget_ok={str(r['budget_ok']).lower()}")


if __name__ == "__main__":
    main()
