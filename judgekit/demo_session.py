"""`make demo`: the judges, a single/split pair of runs on each, and the dashboard — one command.

Starts the simulated judge (a thread in this process) and the bundled local judge (llama.cpp, a
subprocess), creates the demo comparison runs if they do not exist yet (or resumes them), executes
them in background threads — the simulated pair first (seconds), then seed 002's holistic A/B on the
simulated judge (:func:`holistic_ab`), then the local pair on a seeded sample (one request at a time:
the local server serves one) — and serves the dashboard in the foreground. The dashboard shows the
runs' progress from the store as they fill in. Ctrl-C stops all.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import threading

from sqlalchemy.orm import Session

from judgekit import config, continuation, imports, lease, matrix_cache, runner, simjudge, sources, store
from judgekit.harness import parse_harness

# a finished run or an import fills the matrix cache through the source loaders (see matrix_cache.written)
matrix_cache.warm_after_writes(sources.warm_cache)


SIM_RUNS = (("demo-sim-single", "single"), ("demo-sim-split", "split"))
LOCAL_RUNS = (("demo-local-single", "single"), ("demo-local-split", "split"))
LOCAL_SAMPLE, LOCAL_SEED = 60, 1


def ensure_run(engine, name: str, spec: str, judge: runner.JudgeSpec, rubric: str = "demo", **sample) -> str:
    with Session(engine) as s, s.begin():
        try:
            return store.get_run(s, name).name
        except store.NotFound:
            return runner.create_run(
                s,
                dataset="demo",
                rubric=rubric,
                harness=parse_harness(spec),
                judge=judge,
                name=name,
                **sample,
            ).name


# Seed 002's holistic A/B on the demo: a per-answer run of demo-scale, then one holistic call per bundle
# (model × pack) with the default and the hardened prompt, a reference holistic run by a stronger
# simulated judge, and a critique of each variant's dimension rationales.
AB_SCALE_RUN = "demo-sim-scale"
AB_BUNDLE_BY = ("model", "pack")
AB_RUNS = {"default": "demo-bundle-default", "hardened": "demo-bundle-hardened"}
AB_REFERENCE = "demo-bundle-reference"
AB_CRITIQUES = {v: f"critique-{name}" for v, name in AB_RUNS.items()}
STRONG_SIM = simjudge.SimParams(accuracy=0.97, impression=0.2, conditioning=0.0, seed=1)
STRONG_NAME = "judgekit-sim-strong"


def holistic_ab(engine, base_url: str, strong_base_url: str, concurrency: int = 16) -> dict[str, str]:
    """Create (or resume) and execute the demo's holistic A/B; returns the run names by role.

    ``base_url`` serves the simulated judge, ``strong_base_url`` a stronger one (:data:`STRONG_SIM`:
    more accurate, other noise) whose hardened holistic run is the reference for mean |Δ|.
    """
    from judgekit import bundles, critique

    judge = runner.JudgeSpec(base_url=base_url, model=simjudge.SIM_MODEL, kind="simulated", max_tokens=1024)
    strong = runner.JudgeSpec(base_url=strong_base_url, model=simjudge.SIM_MODEL, kind="simulated",
                              name=STRONG_NAME, max_tokens=1024)
    ensure_run(engine, AB_SCALE_RUN, "single", judge, rubric="demo-scale")
    runner.run_sync(engine, AB_SCALE_RUN, concurrency=concurrency)
    roles = {**{f"holistic-{v}": n for v, n in AB_RUNS.items()}, "reference": AB_REFERENCE}
    for role, name in roles.items():
        variant = "hardened" if role != "holistic-default" else "default"
        with Session(engine) as s, s.begin():
            try:
                store.get_run(s, name)
            except store.NotFound:
                bundles.create_bundle_run(
                    s, from_run=AB_SCALE_RUN, bundle_by=AB_BUNDLE_BY, dataset="demo", rubric="demo-scale",
                    harness=parse_harness("single", prompt_variant=variant),
                    judge=strong if role == "reference" else judge, name=name)
        runner.run_sync(engine, name, concurrency=concurrency)
    for variant, name in AB_CRITIQUES.items():
        with Session(engine) as s, s.begin():
            try:
                store.get_run(s, name)
            except store.NotFound:
                critique.create_critique_run(s, target=AB_RUNS[variant], judge=judge, name=name)
        runner.run_sync(engine, name, concurrency=concurrency)
    return {**roles, "per-answer": AB_SCALE_RUN, **{f"critique-{v}": n for v, n in AB_CRITIQUES.items()}}


def judge_runs(engine, base_url: str, model: str, kind: str, runs, concurrency: int, **sample) -> None:
    judge = runner.JudgeSpec(base_url=base_url, model=model, kind=kind, timeout_s=300.0, max_tokens=400)
    for name, spec in runs:
        run_name = ensure_run(engine, name, spec, judge, **sample)
        try:
            summary = continuation.continue_run_sync(engine, run_name, concurrency=concurrency)
        except lease.LeaseHeld as e:  # e.g. the dashboard is already resuming it
            print(f"[demo] {e}", flush=True)
            continue
        print(
            f"[demo] {summary.name}: {summary.status} ({summary.calls_sent} calls this session)", flush=True
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--sim-judge-port", type=int, default=8765)
    parser.add_argument("--local-judge-port", type=int, default=8766)
    parser.add_argument("--no-local", action="store_true", help="skip the bundled local judge")
    args = parser.parse_args(argv)

    url = config.db_url()
    engine = store.engine_for(url)
    with Session(engine) as s, s.begin():
        imports.load_demo(s)

    sim = simjudge.start_in_thread(url, simjudge.SimParams(), port=args.sim_judge_port)
    print(f"[demo] simulated judge on {sim.base_url}", flush=True)
    local = None

    def background() -> None:
        nonlocal local
        judge_runs(engine, sim.base_url, simjudge.SIM_MODEL, "simulated", SIM_RUNS, concurrency=16)
        strong = simjudge.start_in_thread(url, STRONG_SIM)
        try:
            holistic_ab(engine, sim.base_url, strong.base_url)
            print("[demo] holistic A/B (bundle level) done: see the Prompt A/B page, level bundles", flush=True)
        finally:
            strong.stop()
        if args.no_local:
            return
        try:
            from judgekit import localjudge

            local = localjudge.LocalJudge(port=args.local_judge_port).start()
        except Exception as exc:  # the demo still works without it
            print(f"[demo] the bundled local judge did not start: {exc}", flush=True)
            return
        print(f"[demo] local judge on {local.base_url}", flush=True)
        judge_runs(
            engine,
            local.base_url,
            local.model,
            "local",
            LOCAL_RUNS,
            concurrency=1,
            sample=LOCAL_SAMPLE,
            seed=LOCAL_SEED,
        )

    threading.Thread(target=background, name="demo-runs", daemon=True).start()
    env = {**os.environ, "JUDGEKIT_DB_URL": url}
    app = subprocess.Popen(config.app_command("127.0.0.1", args.port), env=env)
    print(f"[demo] dashboard on http://127.0.0.1:{args.port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: app.terminate())
    try:
        app.wait()
    except KeyboardInterrupt:
        app.terminate()
        app.wait(10)
    finally:
        if local is not None:
            local.stop()
        sim.stop()


if __name__ == "__main__":
    main()
