"""`make demo`: the judges, a single/split pair of runs on each, and the dashboard — one command.

Starts the simulated judge (a thread in this process) and the bundled local judge (llama.cpp, a
subprocess), creates the demo comparison runs if they do not exist yet (or resumes them), executes
them in background threads — the simulated pair first (seconds), then the local pair on a seeded
sample (one request at a time: the local server serves one) — and serves the dashboard in the
foreground. The dashboard shows the runs' progress from the store as they fill in. Ctrl-C stops all.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import threading

from sqlalchemy.orm import Session

from judgekit import config, imports, runner, simjudge, store
from judgekit.harness import parse_harness

SIM_RUNS = (("demo-sim-single", "single"), ("demo-sim-split", "split"))
LOCAL_RUNS = (("demo-local-single", "single"), ("demo-local-split", "split"))
LOCAL_SAMPLE, LOCAL_SEED = 60, 1


def ensure_run(engine, name: str, spec: str, judge: runner.JudgeSpec, **sample) -> str:
    with Session(engine) as s, s.begin():
        try:
            return store.get_run(s, name).name
        except store.NotFound:
            return runner.create_run(
                s,
                dataset="demo",
                rubric="demo",
                harness=parse_harness(spec),
                judge=judge,
                name=name,
                **sample,
            ).name


def judge_runs(engine, base_url: str, model: str, kind: str, runs, concurrency: int, **sample) -> None:
    judge = runner.JudgeSpec(base_url=base_url, model=model, kind=kind, timeout_s=300.0, max_tokens=400)
    for name, spec in runs:
        run_name = ensure_run(engine, name, spec, judge, **sample)
        summary = runner.run_sync(engine, run_name, concurrency=concurrency)
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
