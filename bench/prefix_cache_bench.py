"""What the shared-prefix prompt layout buys a split harness on the bundled local judge.

A split harness sends one call per criterion; a single harness one call for all. On a server that
reuses the KV cache of a shared prompt prefix between consecutive requests (llama-cpp-python's server
does), the ``shared_prefix`` layout (example first, criterion last) lets each split call after the
first process only its short criterion tail, so six split calls should cost little more than one
single call. The ``criterion_first`` layout puts the criterion text first, breaks the shared prefix
after the system message, and makes every split call re-read the ~900-token example.

Workload: 5 synthetic support examples (``--quick``: 2) whose context makes the full single-call
prompt about 900 tokens; the 6-criterion binary rubric of seed 003. For each example, in one run and
interleaved (layout order alternates per example to cancel drift), it times

* ``single``: one call asking all six criteria,
* ``split``: six calls, one per criterion, sent one after another,

in both layouts, with ``order=verdict_only`` and the same caps in every cell (``max_tokens`` 60 for a
split call, 120 for a single call — a verdict-only reply needs ~8 and ~50 tokens), JSON constrained by
``{"type": "json_object", "schema": …}``, temperature 0. Prompt processing thus dominates. Before
the single call and before the first split call of each example the server's cache is flushed with
an unrelated prompt, so each harness starts cold, as it would on the next example of a real run.
No new example is started after ``BUDGET_S`` (a busy machine yields fewer examples, not a runaway
bench). The server's flags are :class:`judgekit.localjudge.LocalJudge`'s; ``--server-arg`` adds more
(e.g. ``--server-arg=--cache --server-arg=true`` to compare llama-cpp-python's state cache).

Usage: ``python bench/prefix_cache_bench.py [--quick]``. The last line is machine-readable:
``RESULT split_single_shared=<r1> split_single_criterion_first=<r2> target=1.5 holds=<r1<=1.5>``
where each ratio is the split harness's wall time per example over the single harness's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judgekit.harness import Harness  # noqa: E402
from judgekit.localjudge import LocalJudge  # noqa: E402
from judgekit.parse import parse_reply  # noqa: E402
from judgekit.prompts import ExampleText, build_messages, response_schema  # noqa: E402
from judgekit.rubric import Criterion, Rubric  # noqa: E402

TARGET = 1.5
BUDGET_S = 200.0  # no new example after this; keeps the bench near 4 minutes on a busy machine
LAYOUTS = ("shared_prefix", "criterion_first")
SPLIT_MAX_TOKENS = 60
SINGLE_MAX_TOKENS = 120

RUBRIC = Rubric(
    name="support",
    criteria=(
        Criterion("answers_question", "Does the answer address the user's actual question?"),
        Criterion("cites_source", "Does the answer quote or name the passage of the context it relied on?"),
        Criterion("grounded", "Is every factual claim in the answer supported by the context?"),
        Criterion("no_fabrication", "Is the answer free of invented entities, numbers, links or policies?"),
        Criterion(
            "refuses_when_unanswerable",
            "If the context does not contain the answer, does the answer say so instead of guessing?",
        ),
        Criterion("concise", "Is the answer free of padding, repetition and irrelevant detail?"),
    ),
)

# ------------------------------------------------------------------------------------ examples

_PRODUCTS = ["Aurora router", "Nimbus backup", "Keystone billing", "Lumen camera", "Harbor VPN", "Cedar CRM"]
_TOPICS = [
    ("refunds", "A refund can be requested within {d} days of purchase from the Orders page."),
    ("warranty", "Hardware is covered by a {d}-month limited warranty against manufacturing defects."),
    ("data retention", "Deleted items stay recoverable in the trash for {d} days, then are purged."),
    ("password reset", "A reset link is valid for {d} minutes and can be used once."),
    ("shipping", "Standard shipping takes {d} business days; express orders ship the same day."),
    ("seat limits", "The Team plan includes {d} seats; more seats are billed monthly per seat."),
    ("exports", "Exports run in the background and the download link expires after {d} hours."),
    ("two-factor", "Two-factor codes rotate every {d} seconds; backup codes work once each."),
]
_QUESTIONS = [
    "How long do I have to ask for a refund, and where do I do it?",
    "My export link stopped working after a day. Why, and what can I do?",
    "Can I recover a file I deleted three weeks ago?",
    "How many seats does the Team plan include, and what happens if we add more?",
    "Is the camera's broken lens covered by the warranty?",
]
_ANSWERS = [
    "According to the refunds article, you can request a refund within {d} days from the Orders page.",
    "Export links expire after {d} hours (Exports article). Start a new export and download it sooner.",
    "Probably yes — our support team can restore anything from the last year via the admin console.",
    "The Team plan includes {d} seats. Extra seats are billed monthly per seat, per the seat-limits page.",
    "Yes, all lens damage is covered for life under our premium care program, call 1-800-555-0199.",
]


def make_examples(n: int, paragraphs: int = 11) -> list[ExampleText]:
    """Synthetic support examples; ``paragraphs`` sets the context length (11 → ~900-token single prompts)."""
    out = []
    for i in range(n):
        parts = []
        for p in range(paragraphs):
            product = _PRODUCTS[(i + p) % len(_PRODUCTS)]
            topic, fact = _TOPICS[(i * 3 + p) % len(_TOPICS)]
            d = 7 + (i * 5 + p * 3) % 40
            parts.append(
                f"[{p + 1}] {product} — {topic}. {fact.format(d=d)} Contact support from the Help menu "
                f"if the {topic} rules do not match your account."
            )
        d = 7 + (i * 5) % 40
        out.append(
            ExampleText(
                question=_QUESTIONS[i % len(_QUESTIONS)],
                context="\n".join(parts),
                answer=_ANSWERS[i % len(_ANSWERS)].format(d=d),
            )
        )
    return out


# ---------------------------------------------------------------------------------------- calls


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a process so far (all threads); nan where /proc is unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / _TICKS


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _call(http: httpx.Client, judge: LocalJudge, messages: list[dict], schema: dict, max_tokens: int) -> dict:
    cpu0 = _cpu_s(judge.pid)
    t0 = time.perf_counter()
    resp = http.post(
        judge.base_url + "/chat/completions",
        json={
            "model": judge.model,
            "messages": messages,
            "temperature": 0.0,
            "max_tokens": max_tokens,
            "response_format": {"type": "json_object", "schema": schema},
        },
    )
    elapsed = time.perf_counter() - t0
    cpu = _cpu_s(judge.pid) - cpu0
    resp.raise_for_status()
    body = resp.json()
    return {
        "s": elapsed,
        "cpu_s": cpu,
        "text": body["choices"][0]["message"]["content"],
        "prompt_tokens": body["usage"]["prompt_tokens"],
        "completion_tokens": body["usage"]["completion_tokens"],
    }


def _flush(http: httpx.Client, judge: LocalJudge) -> None:
    """Evict the KV cache's prefix with an unrelated prompt so the next call starts cold."""
    http.post(
        judge.base_url + "/chat/completions",
        json={"model": judge.model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 2},
    ).raise_for_status()


def time_example(http: httpx.Client, judge: LocalJudge, example: ExampleText, layout: str) -> dict:
    """Single then split for one example in one layout; each starts from a flushed cache."""
    base = Harness(order="verdict_only", structured="json_object", layout=layout)  # type: ignore[arg-type]
    criteria = list(RUBRIC.criteria)
    _flush(http, judge)
    single = _call(
        http, judge, build_messages(example, criteria, replace(base, kind="single")),
        response_schema(criteria, "verdict_only"), SINGLE_MAX_TOKENS,
    )
    _flush(http, judge)
    split = [
        _call(http, judge, build_messages(example, [c], replace(base, kind="split")),
              response_schema([c], "verdict_only"), SPLIT_MAX_TOKENS)
        for c in criteria
    ]
    replies = [(single["text"], criteria)]
    replies += [(call["text"], [c]) for call, c in zip(split, criteria, strict=True)]
    scored = sum(v.value is not None for text, asked in replies for v in parse_reply(text, asked).values())
    return {
        "single_s": single["s"],
        "split_s": sum(c["s"] for c in split),
        "single_cpu_s": single["cpu_s"],
        "split_cpu_s": sum(c["cpu_s"] for c in split),
        "split_calls_s": [c["s"] for c in split],
        "single_prompt_tokens": single["prompt_tokens"],
        "split_prompt_tokens": [c["prompt_tokens"] for c in split],
        "completion_tokens": single["completion_tokens"] + sum(c["completion_tokens"] for c in split),
        "scored": scored,
    }


def run(quick: bool = False, extra_args: tuple[str, ...] = (), budget_s: float = BUDGET_S, log=print) -> dict:
    """Run the bench and return per-layout timings and the split/single ratios.

    Examples are measured whole (both layouts, both harnesses); no new example is started once
    ``budget_s`` has passed, so a busy machine gives fewer examples rather than a runaway bench.
    """
    examples = make_examples(2 if quick else 5)
    rows: dict[str, list[dict]] = {layout: [] for layout in LAYOUTS}
    load_before = _loadavg()
    started = time.perf_counter()
    with LocalJudge(extra_args=extra_args) as judge, httpx.Client(timeout=300) as http:
        _call(http, judge, build_messages(examples[0], list(RUBRIC.criteria), Harness(order="verdict_only")),
              response_schema(list(RUBRIC.criteria), "verdict_only"), 8)  # warm-up (not timed)
        for i, example in enumerate(examples):
            if i > 0 and time.perf_counter() - started > budget_s:
                log(f"time budget of {budget_s:.0f}s spent: stopping after {i} of {len(examples)} examples")
                break
            order = LAYOUTS if i % 2 == 0 else LAYOUTS[::-1]
            for layout in order:
                r = time_example(http, judge, example, layout)
                rows[layout].append(r)
                log(
                    f"example {i + 1} {layout:<15} single {r['single_s']:5.2f}s "
                    f"({r['single_prompt_tokens']} prompt tokens)  split {r['split_s']:5.2f}s = "
                    + " + ".join(f"{s:.2f}" for s in r["split_calls_s"])
                    + f"  ratio {r['split_s'] / r['single_s']:.2f}"
                    + f" (cpu {r['split_cpu_s'] / r['single_cpu_s']:.2f})"
                    + f"  scored {r['scored']}/12"
                )
    n = len(rows[LAYOUTS[0]])
    out: dict = {"examples": n, "split_max_tokens": SPLIT_MAX_TOKENS, "single_max_tokens": SINGLE_MAX_TOKENS,
                 "load_before": load_before, "load_after": _loadavg(), "layouts": {}}
    for layout in LAYOUTS:
        single = sum(r["single_s"] for r in rows[layout])
        split = sum(r["split_s"] for r in rows[layout])
        calls = [s for r in rows[layout] for s in r["split_calls_s"]]
        first = [r["split_calls_s"][0] for r in rows[layout]]
        later = [s for r in rows[layout] for s in r["split_calls_s"][1:]]
        out["layouts"][layout] = {
            "single_s_per_example": single / n,
            "split_s_per_example": split / n,
            "split_call_s_mean": statistics.fmean(calls),
            "split_first_call_s_mean": statistics.fmean(first),
            "split_later_call_s_mean": statistics.fmean(later),
            "ratio": split / single,
            "median_example_ratio": statistics.median(r["split_s"] / r["single_s"] for r in rows[layout]),
            "cpu_ratio": sum(r["split_cpu_s"] for r in rows[layout])
            / sum(r["single_cpu_s"] for r in rows[layout]),
            "prompt_tokens_single": statistics.fmean(r["single_prompt_tokens"] for r in rows[layout]),
            "rows": rows[layout],
        }
    out["split_single_shared"] = out["layouts"]["shared_prefix"]["ratio"]
    out["split_single_criterion_first"] = out["layouts"]["criterion_first"]["ratio"]
    out["holds"] = out["split_single_shared"] <= TARGET
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 examples instead of 5")
    parser.add_argument("--server-arg", action="append", default=[],
                        help="extra llama_cpp.server argument (repeatable), e.g. --server-arg=--cache")
    args = parser.parse_args()
    t0 = time.perf_counter()
    r = run(quick=args.quick, extra_args=tuple(args.server_arg))
    print(f"caps: max_tokens {r['split_max_tokens']} per split call, {r['single_max_tokens']} per single "
          "call; order verdict_only; identical in both layouts")
    for layout, d in r["layouts"].items():
        print(
            f"{layout:<15} prompt ~{d['prompt_tokens_single']:.0f} tokens  "
            f"single {d['single_s_per_example']:.2f}s/example  "
            f"split {d['split_s_per_example']:.2f}s/example (per call {d['split_call_s_mean']:.2f}s; first "
            f"{d['split_first_call_s_mean']:.2f}s, later {d['split_later_call_s_mean']:.2f}s)  "
            f"split/single {d['ratio']:.2f} (median per example {d['median_example_ratio']:.2f}; "
            f"server CPU time {d['cpu_ratio']:.2f})"
        )
    load = [f"{x:.1f}" if x is not None else "n/a" for x in (r["load_before"], r["load_after"])]
    print(f"{r['examples']} examples, interleaved; 1-min load average {load[0]} before, {load[1]} after "
          f"on {os.cpu_count()} cores. Other work on the machine inflates wall and CPU times alike "
          "(llama.cpp's threads spin while they wait for each other); a call far off its layout's usual "
          "time was contended.")
    print(f"bench took {time.perf_counter() - t0:.0f}s")
    print(
        f"RESULT split_single_shared={r['split_single_shared']:.2f} "
        f"split_single_criterion_first={r['split_single_criterion_first']:.2f} target={TARGET} "
        f"holds={str(r['holds']).lower()}"
    )


if __name__ == "__main__":
    main()
