"""Harness throughput: the runner (persisting every call) vs a bare AsyncOpenAI loop, side by side.

A local OpenAI-compatible server (``python -m judgekit.openai_server``, its own process) answers every
call after ``--latency-ms`` (20 ms). Three measurements in one run, interleaved where it matters:

1. the runner: a ``split`` run of N calls at concurrency 32, each call stored with its verdicts;
2. a bare loop: the same N requests through ``openai.AsyncOpenAI`` at concurrency 32, nothing stored;
3. the runner at concurrency 1 over a smaller slice (throughput, calls/s, is what is compared).

Targets: runner / bare throughput ≥ 0.85; concurrency 32 / concurrency 1 throughput ≥ 20.
Run: ``python bench/harness_bench.py [--calls 3000] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy.orm import Session  # noqa: E402

from judgekit import imports, prompts, runner, store  # noqa: E402
from judgekit.harness import parse_harness  # noqa: E402


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "judgekit.openai_server", "--port", "0", "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    line = proc.stdout.readline()
    match = re.search(r"(http://\S+/v1)", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, match.group(1)


def make_run(engine, base_url: str, examples: int, name: str) -> str:
    with Session(engine) as s, s.begin():
        run = runner.create_run(
            s,
            dataset="demo",
            rubric="demo",
            harness=parse_harness("split", structured="json_object"),
            judge=runner.JudgeSpec(base_url=base_url, model="bench"),
            limit=examples,
            name=name,
            use_cache=False,  # the runs overlap and every call must be sent; replies are still cached (written)
        )
        return run.name


async def bare_loop(base_url: str, engine, examples: int, concurrency: int) -> int:
    """The same requests the runner sends, through a plain AsyncOpenAI client, nothing stored."""
    import openai

    from judgekit.harness import plan_calls

    harness = parse_harness("split", structured="json_object")
    with Session(engine) as s:
        rubric = store.load_rubric(s, "demo")
        ds = store.get_dataset(s, "demo")
        rows = s.execute(
            store.select(
                store.Example.id,
                store.Example.ext_id,
                store.Example.question,
                store.Example.context,
                store.Example.answer,
            )
            .where(store.Example.dataset_id == ds.id)
            .order_by(store.Example.id)
            .limit(examples)
        ).all()
    texts = {r[0]: prompts.ExampleText(r[2], r[3], r[4]) for r in rows}
    calls = plan_calls(harness, rubric, [(r[0], r[1]) for r in rows])
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    sem = asyncio.Semaphore(concurrency)

    async def one(call) -> None:
        criteria = rubric.subset(list(call.criteria))
        messages = prompts.build_messages(texts[call.example_id], criteria, harness)
        async with sem:
            await client.chat.completions.create(
                model="bench",
                messages=messages,
                temperature=0.0,
                max_tokens=1024,
                response_format={
                    "type": "json_object",
                    "schema": prompts.response_schema(criteria, harness.order),
                },
            )

    await asyncio.gather(*(one(c) for c in calls))
    await client.close()
    return len(calls)


def run(quick: bool = False, calls: int = 3000, latency_ms: float = 20.0) -> dict:
    calls = 600 if quick else calls
    examples = calls // 6
    serial_examples = max(10, examples // 10)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["JUDGEKIT_DB_URL"] = f"sqlite:///{tmp}/bench.sqlite"
        engine = store.engine_for()
        with Session(engine) as s, s.begin():
            imports.load_demo(s, n_examples=max(examples, 600))
        proc, base_url = start_server(latency_ms)
        try:
            # warm up both paths (connections, imports)
            asyncio.run(bare_loop(base_url, engine, 5, 32))
            runner.run_sync(engine, make_run(engine, base_url, 5, "warmup"), concurrency=32)

            t0 = time.perf_counter()
            summary = runner.run_sync(engine, make_run(engine, base_url, examples, "c32"), concurrency=32)
            runner_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            bare_calls = asyncio.run(bare_loop(base_url, engine, examples, 32))
            bare_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            serial = runner.run_sync(engine, make_run(engine, base_url, serial_examples, "c1"), concurrency=1)
            serial_s = time.perf_counter() - t0
        finally:
            proc.terminate()
            proc.wait(5)
        with Session(engine) as s:
            stored = store.row_counts(s)
        store.dispose_engines()
    assert summary.calls_sent == bare_calls, (summary.calls_sent, bare_calls)
    runner_tput = summary.calls_sent / runner_s
    bare_tput = bare_calls / bare_s
    serial_tput = serial.calls_sent / serial_s
    result = {
        "calls": summary.calls_sent,
        "runner_s": runner_s,
        "runner_calls_per_s": runner_tput,
        "bare_s": bare_s,
        "bare_calls_per_s": bare_tput,
        "serial_calls": serial.calls_sent,
        "serial_s": serial_s,
        "serial_calls_per_s": serial_tput,
        "runner_vs_bare": runner_tput / bare_tput,
        "c32_vs_c1": runner_tput / serial_tput,
        "stored_calls": stored["calls"],
        "stored_verdicts": stored["verdicts"],
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    r = run(quick=args.quick, calls=args.calls, latency_ms=args.latency_ms)
    print(
        f"endpoint latency {args.latency_ms:g} ms; {r['calls']} calls at concurrency 32; "
        f"{r['serial_calls']} calls at concurrency 1"
    )
    print(f"  runner (persisting)  {r['runner_s']:7.2f} s  {r['runner_calls_per_s']:8.1f} calls/s")
    print(f"  bare AsyncOpenAI     {r['bare_s']:7.2f} s  {r['bare_calls_per_s']:8.1f} calls/s")
    print(f"  runner, conc. 1      {r['serial_s']:7.2f} s  {r['serial_calls_per_s']:8.1f} calls/s")
    print(f"  stored: {r['stored_calls']} call rows, {r['stored_verdicts']} verdicts")
    ok1 = r["runner_vs_bare"] >= 0.85
    ok2 = r["c32_vs_c1"] >= 20
    print(
        f"RESULT runner_vs_bare={r['runner_vs_bare']:.3f} target=0.85 holds={str(ok1).lower()} "
        f"c32_vs_c1={r['c32_vs_c1']:.1f} target=20 holds={str(ok2).lower()}"
    )


if __name__ == "__main__":
    main()
