"""Runs: create a run (dataset × rubric × judge × harness × sample) and execute it against a judge.

Execution is an asyncio fan-out with bounded concurrency: worker tasks take the planned calls in
example order (so the calls of one example go out close together and a server's prefix cache stays
warm), send each through the one client seam (:mod:`judgekit.client`), parse the reply
(:mod:`judgekit.parse`), and hand the result to a single writer thread that stores the call row and
its verdicts in a short transaction. A worker waits until its call is stored before taking the next
one, so a run killed at any moment repeats at most ``concurrency`` calls on :func:`resume`, which
sends only the (example, criterion) pairs that have no verdict yet.

A call that fails at the endpoint (after retries) is stored with status ``error`` and no verdicts —
resume retries it. A reply that cannot be parsed stores *unscored* verdicts (NULL) with the raw
reply: a result, never a fail. After ``breaker`` consecutive failed calls the run stops with status
``failed`` and a message naming the last error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import client as client_mod
from judgekit import fewshot, prompts, store
from judgekit.harness import Harness, PlannedCall, criterion_groups, sample_examples, shuffled
from judgekit.parse import p_pass_from_logprobs, parse_reply
from judgekit.rubric import Rubric

JudgeKind = str  # openai | simulated | local
EXAMPLE_CHUNK = 256
WORKERS_PER_CLIENT = 4


@dataclass(frozen=True)
class JudgeSpec:
    """A judge as the user names it: endpoint, model, and the *name* of the key variable."""

    base_url: str
    model: str
    kind: JudgeKind = "openai"
    api_key_env: str | None = None
    name: str | None = None
    temperature: float = 0.0
    timeout_s: float = 60.0
    max_tokens: int = 1024
    suppress_thinking: bool = False
    max_retries: int = 4


@dataclass
class Progress:
    """Live counters of one execution (this session only; totals over sessions are in the store)."""

    total_calls: int
    done_calls: int = 0
    failed_calls: int = 0
    unscored: int = 0
    retries: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started

    @property
    def fraction(self) -> float:
        return 1.0 if self.total_calls == 0 else self.done_calls / self.total_calls


@dataclass(frozen=True)
class RunSummary:
    run_id: int
    name: str
    status: str
    message: str
    calls_sent: int
    failed_calls: int
    unscored: int
    totals: dict


# --------------------------------------------------------------------------- creating runs


def detect_judge_kind(base_url: str, timeout_s: float = 2.0) -> JudgeKind:
    """``simulated`` when the endpoint's model list says so (judgekit's sim judge), else ``openai``."""
    import httpx

    try:
        resp = httpx.get(base_url.rstrip("/") + "/models", timeout=timeout_s)
        owners = {str(m.get("owned_by", "")) for m in resp.json().get("data", [])}
    except Exception:
        return "openai"
    return "simulated" if any("simulated" in o for o in owners) else "openai"


def create_run(
    s: Session,
    *,
    dataset: str,
    rubric: str,
    harness: Harness,
    judge: JudgeSpec,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    name: str | None = None,
) -> store.Run:
    """Validate and store a new run (status ``pending``) with its sample of examples."""
    if judge.api_key_env and not os.environ.get(judge.api_key_env):
        raise ValueError(f"--api-key-env {judge.api_key_env}: that environment variable is not set")
    ds = store.get_dataset(s, dataset)
    rubric_row = store.get_rubric_row(s, rubric)
    rubric_val = store.rubric_value(s, rubric_row)
    criterion_groups(harness, rubric_val)  # raises HarnessError on a bad spec
    prompts.variant(harness.prompt_variant)
    harness = resolve_prompt(s, harness, rubric_val, ds)
    ids = store.example_ids(s, ds.id)
    ordered = [ext for ext, _ in sorted(ids.items(), key=lambda kv: kv[1])]
    chosen = sample_examples(ordered, limit=limit, sample=sample, seed=seed)
    if not chosen:
        raise ValueError(f"no examples to judge in dataset {dataset!r} with this --limit/--sample")
    judge_row = store.get_or_create_judge(
        s,
        kind=judge.kind,
        name=judge.name or judge.model,
        base_url=judge.base_url,
        model=judge.model,
        api_key_env=judge.api_key_env,
        params={"temperature": judge.temperature, "max_retries": judge.max_retries},
        timeout_s=judge.timeout_s,
        max_tokens=judge.max_tokens,
        suppress_thinking=judge.suppress_thinking,
    )
    base = (
        name
        or f"{dataset}-{harness.label.replace(':', '-').replace('|', '_').replace('+', '')}-{judge.model}"
    )
    run_name = name or store.unique_run_name(s, base)
    return store.create_run(
        s,
        name=run_name,
        dataset=ds,
        rubric=rubric_row,
        judge=judge_row,
        harness=harness.to_dict(),
        example_ids=[ids[e] for e in chosen],
        sample={"limit": limit, "sample": sample, "seed": seed},
    )


def resolve_prompt(s: Session, harness: Harness, rubric: Rubric, dataset: store.Dataset) -> Harness:
    """The harness as the run stores it: the rubric's ``prompt_template`` when the harness names none
    (``builtin`` keeps judgekit's layout), and the few-shot pool drawn from the human column."""
    from dataclasses import replace

    from judgekit import prompt_templates

    if harness.prompt_template_name == prompt_templates.BUILTIN and not harness.prompt_template:
        harness = replace(harness, prompt_template_name="")
    elif not harness.prompt_template and rubric.prompt_template:
        prompt_templates.compile_template(rubric.prompt_template, f"rubric {rubric.name}")
        harness = replace(harness, prompt_template=rubric.prompt_template, prompt_template_name=f"rubric {rubric.name}")
    if harness.prompt_template and harness.layout != "shared_prefix":
        raise ValueError("a prompt template keeps the shared-prefix layout: drop --layout criterion_first")
    if harness.few_shot and not harness.few_shot_pool:
        from judgekit import fewshot

        pool = fewshot.choose_pool(s, dataset, rubric, harness.few_shot, harness.few_shot_seed, harness.few_shot_from)
        harness = replace(harness, few_shot_pool=pool)
    return harness


def judge_config(judge: store.Judge) -> client_mod.JudgeConfig:
    params = judge.params or {}
    return client_mod.JudgeConfig(
        base_url=judge.base_url or "",
        model=judge.model or "",
        api_key_env=judge.api_key_env,
        temperature=params.get("temperature", 0.0),
        timeout_s=judge.timeout_s or 60.0,
        max_tokens=judge.max_tokens or 1024,
        suppress_thinking=bool(judge.suppress_thinking),
        max_retries=params.get("max_retries", 4),
        name=judge.name,
    )


@dataclass(frozen=True)
class Estimate:
    """What a run will cost before it starts: calls, tokens (≈ 4 characters a token), money, time."""

    examples: int
    calls: int
    prompt_tokens: int
    cacheable_prompt_tokens: (
        int  # with the shared-prefix layout, all but an example's first call reuse its prefix
    )
    completion_tokens: int
    usd: float | None
    seconds: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


TYPICAL_LATENCY_S = {"simulated": 0.02, "local": 1.0, "openai": 2.0}


def estimate(
    s: Session,
    *,
    dataset: str,
    rubric: str,
    harness: Harness,
    n_examples: int,
    model: str | None = None,
    kind: JudgeKind = "openai",
    concurrency: int = 8,
) -> Estimate:
    """Calls, tokens, money and time of one harness over ``n_examples`` examples of a dataset."""
    from judgekit import reports

    ds = store.get_dataset(s, dataset)
    rubric_val = store.load_rubric(s, rubric)
    groups = criterion_groups(harness, rubric_val)
    chars = (
        s.scalar(
            select(
                func.avg(
                    func.length(store.Example.context)
                    + func.length(store.Example.question)
                    + func.length(store.Example.answer)
                )
            ).where(store.Example.dataset_id == ds.id)
        )
        or 0
    )
    system = len(prompts.system_prompt(harness)) + len(harness.prompt_template or rubric_val.prompt_template)
    per_criterion = sum(len(prompts.criterion_line(c, rubric_val.ko_rule)) for c in rubric_val.criteria)
    per_criterion = per_criterion / max(1, len(rubric_val.criteria)) + 40 + harness.few_shot * (chars + 60)
    prompt_tokens = int(n_examples * sum(system + chars + per_criterion * len(g) + 80 for g in groups) / 4)
    cacheable = (
        int(n_examples * (len(groups) - 1) * (system + chars) / 4) if harness.layout == "shared_prefix" else 0
    )
    out_per_criterion = 8 if harness.order == "verdict_only" else 45
    completion = int(n_examples * sum(out_per_criterion * len(g) + 4 for g in groups))
    calls = n_examples * len(groups)
    usd = (
        0.0
        if kind in ("simulated", "local")
        else reports.price_calls(model, prompt_tokens, cacheable, completion)
    )
    seconds = calls * TYPICAL_LATENCY_S.get(kind, 2.0) / max(1, concurrency if kind != "local" else 1)
    return Estimate(n_examples, calls, prompt_tokens, cacheable, completion, usd, seconds)


def create_comparison(
    s: Session,
    *,
    dataset: str,
    rubric: str,
    harnesses: list[Harness],
    judge: JudgeSpec,
    sample: int | None = None,
    seed: int = 0,
    prefix: str | None = None,
) -> list[str]:
    """One run per harness over the same seeded sample of examples — a comparison, ready to execute."""
    names = []
    for h in harnesses:
        base = f"{prefix or dataset}-{h.label}".replace(":", "-").replace("|", "_").replace("+", ".")
        if h.independence_note:
            base += "-note"
        if h.shuffle:
            base += "-shuffled"
        if h.prompt_variant != "default":
            base += f"-{h.prompt_variant}"
        if h.prompt_template:
            base += "-template"
        if h.few_shot:
            base += f"-fewshot{h.few_shot}"
        name = store.unique_run_name(s, base)
        names.append(
            create_run(
                s, dataset=dataset, rubric=rubric, harness=h, judge=judge, sample=sample, seed=seed, name=name
            ).name
        )
    return names


def create_rerun(
    s: Session, base: str | int, *, name: str | None = None, base_url: str | None = None, **harness_changes
) -> store.Run:
    """A new run over exactly ``base``'s examples with ``base``'s judge and harness, except
    ``harness_changes`` (e.g. ``prompt_template=…, prompt_template_name=…`` or ``few_shot=4``) — the B
    side of a prompt A/B. ``base_url`` points a simulated judge at the server that is up now."""
    from dataclasses import replace

    from judgekit.harness import parse_harness

    run = store.get_run(s, base)
    old = Harness.from_dict(run.harness)
    if old.kind not in ("single", "split", "grouped"):
        raise ValueError(f"run {run.name!r} is not a judge run ({old.kind}); re-judge a judge run")
    h = replace(old, few_shot_pool=(), **harness_changes)
    parse_harness(h.label, order=h.order, layout=h.layout, prompt_template=h.prompt_template,  # validates
                  prompt_template_name=h.prompt_template_name, few_shot=h.few_shot)
    judge = s.get(store.Judge, run.judge_id)
    params = judge.params or {}
    spec = JudgeSpec(base_url=base_url or judge.base_url or "", model=judge.model or "", kind=judge.kind,
                     api_key_env=judge.api_key_env, name=judge.name, temperature=params.get("temperature", 0.0),
                     timeout_s=judge.timeout_s or 60.0, max_tokens=judge.max_tokens or 1024,
                     suppress_thinking=bool(judge.suppress_thinking), max_retries=params.get("max_retries", 4))
    ds = s.get(store.Dataset, run.dataset_id)
    rubric = s.get(store.RubricRow, run.rubric_id)
    sample = run.sample or {}
    return create_run(s, dataset=ds.name, rubric=rubric.name, harness=h, judge=spec, limit=sample.get("limit"),
                      sample=sample.get("sample"), seed=sample.get("seed") or 0,
                      name=name or store.unique_run_name(s, f"{run.name}-b"))


# --------------------------------------------------------------------------- executing runs


@dataclass
class _Context:
    run_id: int
    rubric: Rubric
    harness: Harness
    crit_ids: dict[str, int]
    judge: client_mod.JudgeConfig
    shots: fewshot.ShotPicker | None = None


@dataclass
class _Done:
    planned: PlannedCall
    messages: list[dict]
    result: client_mod.CallResult
    verdicts: list[dict]
    future: concurrent.futures.Future


def _load_context(s: Session, run: store.Run) -> _Context:
    rubric_row = s.get(store.RubricRow, run.rubric_id)
    harness = Harness.from_dict(run.harness)
    return _Context(
        run_id=run.id,
        rubric=store.rubric_value(s, rubric_row),
        harness=harness,
        crit_ids={c.key: c.id for c in store.criterion_rows(s, rubric_row.id)},
        judge=judge_config(s.get(store.Judge, run.judge_id)),
        shots=fewshot.shot_picker(s, run.dataset_id, harness),
    )


def _pending_calls(
    engine: Engine, ctx: _Context
) -> Iterator[tuple[PlannedCall, prompts.ExampleText | prompts.CritiqueText]]:
    """The calls still missing, example by example, reading the store in chunks (no whole-run lists)."""
    if ctx.harness.kind == "critique":  # a critique run's calls come from another run's stored rationales
        from judgekit import critique

        yield from critique.pending_calls(engine, ctx.run_id, ctx.crit_ids)
        return
    groups = criterion_groups(ctx.harness, ctx.rubric)
    key_of = {cid: key for key, cid in ctx.crit_ids.items()}
    last = -1
    while True:
        with Session(engine) as s:
            rows = s.execute(
                select(
                    store.RunExample.position,
                    store.Example.id,
                    store.Example.ext_id,
                    store.Example.question,
                    store.Example.context,
                    store.Example.answer,
                )
                .join(store.Example, store.Example.id == store.RunExample.example_id)
                .where(store.RunExample.run_id == ctx.run_id, store.RunExample.position > last)
                .order_by(store.RunExample.position)
                .limit(EXAMPLE_CHUNK)
            ).all()
            if not rows:
                return
            done: dict[int, set[str]] = {}
            for ex_id, cid in s.execute(
                select(store.Verdict.example_id, store.Verdict.criterion_id).where(
                    store.Verdict.run_id == ctx.run_id, store.Verdict.example_id.in_([r[1] for r in rows])
                )
            ):
                done.setdefault(ex_id, set()).add(key_of.get(cid, ""))
        for position, ex_id, ext_id, question, context, answer in rows:
            last = position
            have = done.get(ex_id, set())
            text = prompts.ExampleText(question=question or "", context=context or "", answer=answer, key=ext_id)
            for group in groups:
                if all(k in have for k in group):
                    continue
                yield PlannedCall(ex_id, ext_id, shuffled(group, ctx.harness, ext_id)), text


def count_pending(engine: Engine, run_ref: str | int) -> int:
    with Session(engine) as s:
        ctx = _load_context(s, store.get_run(s, run_ref))
    return sum(1 for _ in _pending_calls(engine, ctx))


class _Writer:
    """The one thread that writes call results: group commit of whatever is queued, in order."""

    def __init__(self, engine: Engine, ctx: _Context) -> None:
        self.engine, self.ctx = engine, ctx
        self.queue: queue.Queue[_Done | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name=f"judgekit-writer-{ctx.run_id}", daemon=True)
        self.thread.start()

    def submit(self, item: _Done) -> None:
        self.queue.put(item)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()

    def _loop(self) -> None:
        stop = False
        while not stop:
            batch = [self.queue.get()]
            while len(batch) < 256:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            if batch[-1] is None or None in batch:
                stop = True
            items = [b for b in batch if b is not None]
            if not items:
                continue
            try:
                with Session(self.engine) as s, s.begin():
                    store.insert_calls(s, [self._call_row(i) for i in items], [i.verdicts for i in items])
            except BaseException as exc:  # report to every waiting worker; the run stops
                for item in items:
                    item.future.set_exception(exc)
                continue
            for item in items:
                item.future.set_result(None)

    def _call_row(self, item: _Done) -> dict:
        r = item.result
        return {
            "run_id": self.ctx.run_id,
            "example_id": item.planned.example_id,
            "criteria": list(item.planned.criteria),
            "attempts": r.attempts,
            "latency_s": r.latency_s,
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "cached_tokens": r.cached_tokens,
            "status": r.status,
            "error": r.error,
            "structured_mode": r.structured_mode,
            "request": {
                "messages": item.messages,
                "model": self.ctx.judge.model,
                "finish_reason": r.finish_reason,
            },
            "response_text": r.text,
            "created_at": store.utcnow(),
        }


def _messages(ctx: _Context, item: prompts.ExampleText | prompts.CritiqueText, criteria: list) -> list[dict]:
    """The prompt of one call: a judge call on an example, or a critique call on a stored rationale."""
    if isinstance(item, prompts.CritiqueText):
        return prompts.build_critique_messages(item, criteria, ctx.harness.order)
    shots = ctx.shots.for_call(item.key, [c.key for c in criteria]) if ctx.shots else ()
    return prompts.build_messages(item, criteria, ctx.harness, ctx.rubric.ko_rule, shots)


def _verdict_rows(ctx: _Context, planned: PlannedCall, result: client_mod.CallResult) -> list[dict]:
    if not result.ok:
        return []
    criteria = ctx.rubric.subset(list(planned.criteria))
    parsed = parse_reply(result.text, criteria)
    probs = (
        p_pass_from_logprobs(result.text or "", result.logprobs, criteria)
        if ctx.harness.logprobs and result.logprobs
        else {}
    )
    return [
        {
            "run_id": ctx.run_id,
            "example_id": planned.example_id,
            "criterion_id": ctx.crit_ids[c.key],
            "value": parsed[c.key].value,
            "rationale": parsed[c.key].rationale,
            "p_pass": probs.get(c.key),
            "red_flags": list(parsed[c.key].red_flags),
            "error": parsed[c.key].error,
        }
        for c in criteria
    ]


async def execute(
    engine: Engine,
    run_ref: str | int,
    *,
    concurrency: int = 8,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    breaker: int = 10,
    client=None,
) -> RunSummary:
    """Send every missing call of a run; safe to call again on the same run (that is resume)."""
    concurrency = max(1, int(concurrency))
    with Session(engine) as s, s.begin():
        run = store.get_run(s, run_ref)
        if run.status == "imported":
            raise ValueError(f"run {run.name!r} was imported from a file; there is nothing to send")
        ctx = _load_context(s, run)
        run.status, run.message = "running", None
        run.started_at = run.started_at or store.utcnow()
        run_name = run.name
    total = sum(1 for _ in _pending_calls(engine, ctx))
    state = Progress(total_calls=total)
    cancel = cancel or threading.Event()
    circuit = client_mod.CircuitBreaker(breaker)
    # Several clients, each serving a few workers: httpx's pool checks every idle connection on every
    # request, so one pool of 32 connections costs ~15 socket syscalls a call (profiled); pools of 4 do not.
    clients = [client] if client is not None else [
        client_mod.make_client(ctx.judge) for _ in range(-(-concurrency // WORKERS_PER_CLIENT))
    ]
    schema_cache: dict[tuple[str, ...], dict] = {}
    pending = _pending_calls(engine, ctx)
    writer = _Writer(engine, ctx)
    write_error: list[BaseException] = []

    async def worker(client) -> None:
        for planned, text in pending:  # a shared generator: each call is taken by exactly one worker
            if cancel.is_set() or circuit.open or write_error:
                return
            criteria = ctx.rubric.subset(list(planned.criteria))
            messages = _messages(ctx, text, criteria)
            schema = schema_cache.get(planned.criteria)
            if schema is None:
                schema = schema_cache[planned.criteria] = prompts.response_schema(criteria, ctx.harness.order)
            result = await client_mod.complete(
                client,
                ctx.judge,
                messages,
                schema=schema,
                structured=ctx.harness.structured,
                logprobs=ctx.harness.logprobs,
            )
            rows = _verdict_rows(ctx, planned, result)
            done = _Done(planned, messages, result, rows, concurrent.futures.Future())
            writer.submit(done)
            try:
                await asyncio.wrap_future(done.future)
            except BaseException as exc:
                write_error.append(exc)
                return
            circuit.record(result.ok, result.error)
            state.done_calls += 1
            state.retries += result.retries
            state.failed_calls += 0 if result.ok else 1
            state.unscored += sum(1 for r in rows if r["value"] is None)
            if progress is not None:
                progress(state)

    started = time.perf_counter()
    try:
        await asyncio.gather(*(worker(clients[i % len(clients)]) for i in range(concurrency)))
    finally:
        writer.close()
        if client is None:
            for c in clients:
                await c.close()
    wall = time.perf_counter() - started
    if write_error:
        status, message = "failed", f"could not store results: {write_error[0]}"
    elif circuit.open:
        status, message = "failed", f"{circuit.message}. Resume with `judgekit resume {run_name}`."
    elif cancel.is_set():
        status, message = "cancelled", f"cancelled after {state.done_calls} of {total} calls"
    else:
        missing = sum(1 for _ in _pending_calls(engine, ctx))
        status = "done" if missing == 0 else "incomplete"
        message = (
            "" if missing == 0 else f"{missing} calls failed at the endpoint; `judgekit resume {run_name}`"
        )
    with Session(engine) as s, s.begin():
        totals = run_totals(s, ctx.run_id)
        s.execute(
            update(store.Run)
            .where(store.Run.id == ctx.run_id)
            .values(
                status=status,
                message=message,
                totals=totals,
                wall_s=store.Run.wall_s + wall,
                finished_at=store.utcnow(),
            )
        )
    with Session(engine) as s:
        from judgekit import reports

        reports.warm_cache(s, run=ctx.run_id)
    return RunSummary(
        ctx.run_id, run_name, status, message, state.done_calls, state.failed_calls, state.unscored, totals
    )


def run_sync(engine: Engine, run_ref: str | int, **kwargs) -> RunSummary:
    return asyncio.run(execute(engine, run_ref, **kwargs))


def run_totals(s: Session, run_id: int) -> dict:
    """Calls, retries, failures, tokens and latency percentiles of a run, over all its sessions."""
    import numpy as np  # here, not at the top: a run's start-up does not wait for it

    c = store.Call
    row = s.execute(
        select(
            func.count(),
            func.coalesce(func.sum(c.attempts - 1), 0),
            func.coalesce(func.sum(c.prompt_tokens), 0),
            func.coalesce(func.sum(c.completion_tokens), 0),
            func.coalesce(func.sum(c.cached_tokens), 0),
            func.count().filter(c.status != "ok"),
        ).where(c.run_id == run_id)
    ).one()
    latencies = np.array(
        s.scalars(
            select(c.latency_s).where(c.run_id == run_id, c.status == "ok", c.latency_s.is_not(None))
        ).all(),
        dtype=float,
    )
    unscored = s.scalar(
        select(func.count())
        .select_from(store.Verdict)
        .where(store.Verdict.run_id == run_id, store.Verdict.value.is_(None))
    )
    p50, p95 = np.percentile(latencies, [50, 95]).round(4).tolist() if latencies.size else (None, None)
    return {
        "calls": int(row[0]),
        "retries": int(row[1]),
        "prompt_tokens": int(row[2]),
        "completion_tokens": int(row[3]),
        "cached_tokens": int(row[4]),
        "failed_calls": int(row[5]),
        "unscored": int(unscored or 0),
        "latency_p50": p50,
        "latency_p95": p95,
    }
