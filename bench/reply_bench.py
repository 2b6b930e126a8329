"""Benchmark what one hostile judge reply can cost: parse time, event-loop stall, and database growth.

Workload: (1) ``parse.parse_reply`` on the worst shapes of reply text the parser bounds — 1 MB of ``{"a": ``
(a brace scan from every ``{`` would be quadratic), 100,000 unclosed ``<think>`` tags, 100,000 unclosed
fences — and on a 10 MB reply (unscored unread); (2) the runner storing six 10 MB replies from a local
OpenAI-compatible server while a ticker task measures the longest gap between its ticks on the runner's
event loop; (3) the database's growth for those six calls.

Usage: ``python bench/reply_bench.py [--quick]``. The last line is machine-readable:
``RESULT worst_parse_s=... loop_stall_s=... db_bytes_per_call=... holds=true|false``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from judgekit import runner, store
from judgekit.harness import parse_harness
from judgekit.openai_server import Reply, ServerThread
from judgekit.parse import parse_reply
from judgekit.rubric import Criterion, Rubric

TARGET_PARSE_S = 0.25
TARGET_STALL_S = 0.5
TARGET_BYTES_PER_CALL = 150_000
LEVELS = {i: str(i) for i in range(1, 6)}


def worst_parse_seconds(size: int) -> dict[str, float]:
    crit = [Criterion("quality", "Q?", "scale", LEVELS, 3)]
    texts = {
        "braces": '{"a": ' * (size // 6),
        "think": "<think>" * (size // 7) + '{"quality": 4}',
        "fences": "```json\n" * (size // 8),
        "10 MB": '{"quality": 4}' + " " * 10_000_000,
    }
    out = {}
    for name, text in texts.items():
        t0 = time.perf_counter()
        parse_reply(text, crit)
        out[name] = time.perf_counter() - t0
    return out


def stored_run(calls: int, reply_mb: int) -> tuple[float, float]:
    """(longest event-loop gap in seconds, database bytes per call) for ``calls`` replies of ``reply_mb`` MB."""
    body = json.dumps({"quality": {"verdict": 4, "rationale": "x" * (reply_mb * 1024 * 1024)}})
    with tempfile.TemporaryDirectory() as tmp, ServerThread(lambda req: Reply(content=body)) as srv:
        url = f"sqlite:///{Path(tmp) / 'bench.sqlite'}"
        engine = store.engine_for(url)
        with Session(engine) as s, s.begin():
            store.insert_dataset(s, "d", [{"id": f"e{i}", "answer": f"a{i}"} for i in range(calls)])
            store.save_rubric(s, Rubric("sc", (Criterion("quality", "Q?", "scale", LEVELS, 3),)))
            runner.create_run(s, dataset="d", rubric="sc", harness=parse_harness("single"),
                              judge=runner.JudgeSpec(base_url=srv.base_url, model="m", timeout_s=60), name="r")

        def db_bytes() -> int:
            return sum(p.stat().st_size for p in Path(tmp).glob("bench.sqlite*"))

        with Session(engine) as s:
            before = s.scalar(select(func.count()).select_from(store.Call))
        size_before = db_bytes()
        gaps: list[float] = []

        async def main() -> None:
            done = asyncio.Event()

            async def ticker() -> None:
                last = time.perf_counter()
                while not done.is_set():
                    await asyncio.sleep(0.005)
                    now = time.perf_counter()
                    gaps.append(now - last)
                    last = now

            tick = asyncio.create_task(ticker())
            await runner.execute(engine, "r", concurrency=2)
            done.set()
            await tick

        asyncio.run(main())
        with Session(engine) as s:
            assert s.scalar(select(func.count()).select_from(store.Call)) - before == calls
        growth = db_bytes() - size_before
        store.dispose_engines()
    return max(gaps), growth / calls


def run(quick: bool = False) -> dict:
    parse = worst_parse_seconds(200_000 if quick else 1_000_000)
    stall, per_call = stored_run(3 if quick else 6, 2 if quick else 10)
    worst = max(parse.values())
    holds = worst <= TARGET_PARSE_S and stall <= TARGET_STALL_S and per_call <= TARGET_BYTES_PER_CALL
    return {"parse": parse, "worst_parse_s": worst, "loop_stall_s": stall, "db_bytes_per_call": per_call,
            "holds": holds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    r = run(parser.parse_args().quick)
    for name, seconds in r["parse"].items():
        print(f"parse {name:<8} {seconds * 1000:8.1f} ms")
    print(f"longest event-loop gap while storing 10 MB replies: {r['loop_stall_s'] * 1000:.0f} ms")
    print(f"database growth per 10 MB reply: {r['db_bytes_per_call'] / 1024:.0f} KB")
    print(f"RESULT worst_parse_s={r['worst_parse_s']:.4f} loop_stall_s={r['loop_stall_s']:.4f} "
          f"db_bytes_per_call={r['db_bytes_per_call']:.0f} holds={str(r['holds']).lower()}")


if __name__ == "__main__":
    main()
