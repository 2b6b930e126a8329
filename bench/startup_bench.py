"""CLI start-up: ``judgekit --help``, ``import judgekit.cli``, and the start-up share of a 3,000-call run.

Whole processes, timed from outside, interleaved so that a noisy machine slows every figure alike:

1. ``judgekit --help`` (the console script) — target ≤ 0.35 s (median of N runs); beside it the floor
   every Python CLI pays here: ``python -c pass`` and ``python -c "import typer"``;
2. ``python -c "import judgekit.cli"`` — the cost of registering every command;
3. ``judgekit run`` of 3,000 calls (500 demo answers × 6 criteria, ``split``, concurrency 32) against a
   local OpenAI-compatible server answering after 20 ms, in its own process. The server notes the wall
   time of the first chat request; *start-up* = first request − process start, *share* = start-up /
   (process exit − process start). Target: share ≤ 10 %. The rest (the calls, storing them, the summary)
   is printed beside it.

Run: ``python bench/startup_bench.py [--quick]``; ``make bench`` includes it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
JUDGEKIT = str(BIN / "judgekit")


def _wall(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    return time.perf_counter() - t0


def cli_timings(n: int) -> dict[str, float]:
    """Median wall seconds of each command over ``n`` interleaved rounds (after one warm-up round)."""
    cmds = {
        "help": [JUDGEKIT, "--help"],
        "python": [sys.executable, "-c", "pass"],
        "typer": [sys.executable, "-c", "import typer"],
        "import_cli": [sys.executable, "-c", "import judgekit.cli"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for rnd in range(n + 1):
        for key, cmd in cmds.items():
            t = _wall(cmd)
            if rnd:
                times[key].append(t)
    return {k: statistics.median(v) for k, v in times.items()}


# ------------------------------------------------------------------------------------------ the run


def serve(latency_ms: float, first_file: str) -> None:
    """The bench's endpoint (its own process): a valid judge reply after ``latency_ms``; the wall time of
    the first chat request after ``first_file`` was removed goes to ``first_file``."""
    sys.path.insert(0, str(ROOT))
    from judgekit.openai_server import echo_reply
    from judgekit.openai_server import serve as serve_http

    marker = Path(first_file)

    async def handler(body: dict):
        if not marker.exists():  # the bench removes it before each run: the first request of each run
            marker.write_text(repr(time.time()))
        reply = echo_reply(body)
        reply.delay_s = latency_ms / 1000.0
        return reply

    async def main() -> None:
        server, _ = await serve_http(handler, "127.0.0.1", 0)
        print(f"listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def run_share(examples: int, latency_ms: float, concurrency: int, rounds: int,
              exe: str = JUDGEKIT) -> dict[str, float]:
    """Start-up, total and share of ``judgekit run`` (median over ``rounds`` runs, each a new run);
    ``exe`` is the console script (another checkout's, to compare side by side)."""
    work = Path(tempfile.mkdtemp(prefix="jk-startup-"))
    db = f"sqlite:///{work / 'bench.sqlite'}"
    env = {**os.environ, "JUDGEKIT_DB_URL": db, "JUDGEKIT_HOME": str(work)}
    subprocess.run([exe, "demo", "--examples", str(examples)], check=True, env=env, cwd=work,
                   stdout=subprocess.DEVNULL)
    first_file = str(work / "first.txt")
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(latency_ms), first_file],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = server.stdout.readline()
        url = re.search(r"(http://\S+/v1)", line).group(1)
        shares, startups, totals = [], [], []
        for i in range(rounds):
            Path(first_file).unlink(missing_ok=True)
            cmd = [exe, "run", "--dataset", "demo", "--rubric", "demo", "--harness", "split", "--limit",
                   str(examples), "--base-url", url, "--model", "bench", "--structured", "json_object",
                   "--concurrency", str(concurrency), "--name", f"startup-{i}",
                   "--no-cache"]  # every round sends its calls (the response cache would answer rounds 2+)
            t0 = time.time()
            subprocess.run(cmd, check=True, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            end = time.time()
            first = float(Path(first_file).read_text())
            startups.append(first - t0)
            totals.append(end - t0)
            shares.append((first - t0) / (end - t0))
    finally:
        server.terminate()
        server.wait(10)
    return {"share": statistics.median(shares), "startup_s": statistics.median(startups),
            "total_s": statistics.median(totals), "calls": examples * 6}


def run(quick: bool = False) -> dict[str, float]:
    out = cli_timings(3 if quick else 7)
    out |= run_share(100 if quick else 500, 20.0, 32, 1 if quick else 3)
    return out


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        serve(float(sys.argv[2]), sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--vs", metavar="JUDGEKIT", help="another checkout's judgekit script: its run start-up "
                        "measured the same way, right after this one's")
    parser.add_argument("--calls", type=int, default=0, help="run size for --vs (default 3000; 600 with --quick)")
    args = parser.parse_args()
    if args.vs:
        examples = (args.calls or (600 if args.quick else 3000)) // 6
        for exe in (JUDGEKIT, args.vs):
            r = run_share(examples, 20.0, 32, 3, exe)
            print(f"{exe}: start-up {r['startup_s']:.2f} s of {r['total_s']:.2f} s = {r['share']:.1%}")
        return
    r = run(args.quick)
    print(f"judgekit --help           {r['help']:.3f} s   (target ≤ 0.35 s)")
    print(f"  python -c pass          {r['python']:.3f} s;  import typer {r['typer']:.3f} s")
    print(f"import judgekit.cli       {r['import_cli']:.3f} s")
    print(f"run of {r['calls']} calls: start-up {r['startup_s']:.2f} s of {r['total_s']:.2f} s = {r['share']:.1%} "
          "(target ≤ 10 %)")


if __name__ == "__main__":
    main()
