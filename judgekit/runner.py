"""Runs: create a run (dataset × rubric × judge × harness × sample) and execute it against a judge.

Execution is an asyncio fan-out with bounded concurrency: worker tasks take the planned calls in
example order (so the calls of one example go out close together and a server's prefix cache stays
warm), send each through the one client seam (:mod:`judgekit.client`), parse the reply
(:mod:`judgekit.parse`), and hand the result to a single writer thread that stores the call row and
its verdicts in a short transaction. A worker waits until its call is stored before taking the next
one, so a run killed at any moment repeats at most ``concurrency`` calls on :func:`resume`, which
sends only the (example, criterion) pairs that have no verdict yet.

At temperature 0 a call whose request was answered before (same endpoint, model and body, in any run)
is served from the response cache (:mod:`judgekit.response_cache`): nothing is sent or billed, the call
row says ``from_cache`` and the run's totals count it under ``cache_hits``. ``judgekit run --repeat N``
creates N runs of one harness over the same examples that know they are repeats of each other
(:func:`create_repeats`); they never read the cache, because they exist to ask the judge again.

A call that fails at the endpoint (after retries) is stored with status ``error`` and no verdicts —
resume retries it. A reply that cannot be parsed stores *unscored* verdicts (NULL) with the raw
reply (bounded: :func:`judgekit.rawtext.reply_columns`): a result, never a fail. A call the endpoint
refuses for good for its example (``rejected``: the prompt exceeds the context, a content filter) is
stored with unscored verdicts that say why — not retried, not counted by the breaker, and the run
completes with those examples marked and counted. After ``breaker`` consecutive failed calls the run
stops with status ``failed`` and a message naming the last error.

One process at a time: :func:`execute` holds the run's lease (:mod:`judgekit.lease`) while it works,
so a second ``resume`` refuses instead of sending every call twice. In the main thread, Ctrl-C
(SIGINT) or SIGTERM stops taking new calls, lets the calls in flight finish for up to
:data:`INTERRUPT_GRACE_S` seconds, stores what came back, and leaves the run ``interrupted``
(resumable); a second Ctrl-C abandons the calls still in flight at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import client as client_mod
from judgekit import fewshot, holistic, lease, matrix_cache, pricing, prompts, rawtext, redact, response_cache, store
from judgekit.harness import Harness, PlannedCall, criterion_groups, sample_examples, shuffled
from judgekit.judges import (  # noqa: F401 - public here too (runner.JudgeSpec, …)
    JudgeKind,
    JudgeSpec,
    check_judge,
    detect_judge_kind,
    judge_config,
    store_judge,
)
from judgekit.parse import p_pass_from_logprobs, parse_reply
from judgekit.rubric import Rubric

EXAMPLE_CHUNK = 256
WORKERS_PER_CLIENT = 4
INLINE_PARSE_CHARS = 64 * 1024  # longer replies are parsed in a worker thread, off the event loop
INTERRUPT_GRACE_S = 5.0  # after Ctrl-C, calls in flight may finish (and be stored) for this long


@dataclass
class Progress:
    """Live counters of one execution (this session only; totals over sessions are in the store)."""

    total_calls: int
    done_calls: int = 0
    failed_calls: int = 0
    unscored: int = 0
    retries: int = 0
    rejected_calls: int = 0  # permanent per-example refusals (also in failed_calls)
    cache_hits: int = 0  # calls answered from the response cache (nothing sent)
    cannot_assess: int = 0  # verdicts where the judge said "cannot assess"
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
    cache_hits: int = 0
    cannot_assess: int = 0


# --------------------------------------------------------------------------- creating runs


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
    use_cache: bool = True,
    repeat_group: str | None = None,
    repeat_index: int | None = None,
) -> store.Run:
    """Validate and store a new run (status ``pending``) with its sample of examples.

    ``use_cache=False`` (``--no-cache``) never serves it from the response cache; ``repeat_group`` /
    ``repeat_index`` make it one of the repeats of :func:`create_repeats`.
    """
    check_judge(judge)
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
    judge_row = store_judge(s, judge)
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
        use_cache=use_cache,
        repeat_group=repeat_group,
        repeat_index=repeat_index,
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
def create_repeats(
    s: Session, *, repeat: int, name: str | None = None, base: str | None = None, **run_args
) -> list[str]:
    """``repeat`` runs of one harness over the same examples (``judgekit run --repeat N``), named
    ``GROUP-r1`` … ``GROUP-rN`` and sharing the repeat group ``GROUP`` — ``name`` exactly, else the first
    free name from ``base`` (default: derived from dataset, harness and model); with ``repeat`` 1, one
    plain run named like :func:`create_run` would.

    Their verdicts disagree only where the judge disagrees with itself: the test–retest agreement
    across them is the judge's noise floor (:mod:`judgekit.noise`). Temperature-0 repeats are honest
    too — they never read the response cache — and show how deterministic the endpoint really is.
    """
    if repeat < 1:
        raise ValueError(f"--repeat must be at least 1, not {repeat}")
    if repeat == 1:
        chosen = name or (store.unique_run_name(s, base) if base else None)
        return [create_run(s, name=chosen, **run_args).name]
    harness, judge, dataset = run_args["harness"], run_args["judge"], run_args["dataset"]
    stem = name or base or (
        f"{dataset}-{harness.label.replace(':', '-').replace('|', '_').replace('+', '')}-{judge.model}")

    def taken(group: str) -> bool:
        members = [f"{group}-r{k}" for k in range(1, repeat + 1)]
        return s.scalar(select(func.count()).select_from(store.Run).where(
            (store.Run.repeat_group == group) | store.Run.name.in_(members))) > 0

    group, i = stem, 2
    while taken(group):
        if name is not None:
            raise ValueError(f"run names {name}-r1 … {name}-r{repeat} (or repeat group {name!r}) are taken")
        group, i = f"{stem}-{i}", i + 1
    return [
        create_run(s, name=f"{group}-r{k}", repeat_group=group, repeat_index=k, **run_args).name
        for k in range(1, repeat + 1)
    ]


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


@dataclass(frozen=True)
class CostModel:
    """What any grouping of a rubric's criteria costs per answer of a dataset, before a call is sent.

    Every call carries the system text (and the prompt template, if any) and the example (context,
    question, answer: the dataset's average length) plus, per criterion it asks, the criterion's lines and
    its few-shot examples; a reply costs about 45 tokens a criterion (8 with ``verdict_only``). ≈ 4
    characters a token. With the shared-prefix layout every call of an example but the first can reuse
    the system text and the example from a prefix cache.
    """

    system_chars: int
    example_chars: float
    criterion_chars: dict[str, float]
    out_per_criterion: int
    shared_prefix: bool
    model: str | None
    kind: JudgeKind
    prices: dict = field(default_factory=dict, compare=False)  # the price table, read once

    def estimate(self, groups: Sequence[Sequence[str]], n_examples: int, concurrency: int = 8) -> Estimate:
        """Calls, tokens, money and time of ``groups`` (the criterion keys of each call) over ``n_examples``."""
        shared = self.system_chars + self.example_chars
        prompt = int(n_examples * sum(shared + sum(self.criterion_chars[k] for k in g) + 80 for g in groups) / 4)
        cacheable = int(n_examples * (len(groups) - 1) * shared / 4) if self.shared_prefix else 0
        completion = int(n_examples * sum(self.out_per_criterion * len(g) + 4 for g in groups))
        calls = n_examples * len(groups)
        usd = (0.0 if self.kind in ("simulated", "local")
               else pricing.price_calls(self.model, prompt, cacheable, completion, self.prices))
        seconds = calls * TYPICAL_LATENCY_S.get(self.kind, 2.0) / max(1, concurrency if self.kind != "local" else 1)
        return Estimate(n_examples, calls, prompt, cacheable, completion, usd, seconds)


def cost_model(
    s: Session, *, dataset: str, rubric: str, harness: Harness, model: str | None = None, kind: JudgeKind = "openai"
) -> CostModel:
    """The :class:`CostModel` of a dataset × rubric with a harness's options (order, prompt variant, layout)."""
    ds = store.get_dataset(s, dataset)
    rubric_val = store.load_rubric(s, rubric)
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
    few_shot = harness.few_shot * (float(chars) + 60)  # each labelled example repeats an example's texts
    return CostModel(
        system_chars=len(prompts.system_prompt(harness)) + len(harness.prompt_template or rubric_val.prompt_template),
        example_chars=float(chars),
        criterion_chars={c.key: len(prompts.criterion_line(c, rubric_val.ko_rule)) + 40 + few_shot
                         for c in rubric_val.criteria},
        out_per_criterion=8 if harness.order == "verdict_only" else 45,
        shared_prefix=harness.layout == "shared_prefix",
        model=model,
        kind=kind,
        prices={} if kind in ("simulated", "local") else pricing.load_prices(),
    )


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
    costs = cost_model(s, dataset=dataset, rubric=rubric, harness=harness, model=model, kind=kind)
    groups = criterion_groups(harness, store.load_rubric(s, rubric))
    return costs.estimate(groups, n_examples, concurrency)


def comparison_names(dataset: str, harnesses: Sequence[Harness], prefix: str | None = None, repeat: int = 1
                     ) -> list[str]:
    """The run names a comparison asks for, per harness ``PREFIX-LABEL[-note][-shuffled][-VARIANT][-template]
    [-fewshotK]`` (``PREFIX`` defaults to the dataset), each with ``-r1`` … ``-rN`` when it is repeated. A
    name already taken gets ``-2``, ``-3`` … when the runs are made (:func:`create_repeats`)."""
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
        names.append(base)
    return names if repeat == 1 else [f"{b}-r{k}" for b in names for k in range(1, repeat + 1)]


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
    repeat: int = 1,
    use_cache: bool = True,
) -> list[str]:
    """One run per harness over the same seeded sample of examples — a comparison, ready to execute;
    with ``repeat`` > 1, that many repeats of each harness (:func:`create_repeats`)."""
    names: list[str] = []
    for h, base in zip(harnesses, comparison_names(dataset, harnesses, prefix), strict=True):
        names += create_repeats(s, repeat=repeat, base=base, dataset=dataset, rubric=rubric, harness=h,
                                judge=judge, sample=sample, seed=seed, use_cache=use_cache)
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
class RunContext:
    run_id: int
    rubric: Rubric
    harness: Harness
    crit_ids: dict[str, int]
    judge: client_mod.JudgeConfig
    shots: fewshot.ShotPicker | None = None
    read_cache: bool = False  # serve calls from the response cache (temperature 0, not --no-cache, no repeat)
    write_cache: bool = False  # keep fresh replies in it (temperature 0)


@dataclass
class _Done:
    planned: PlannedCall
    messages: list[dict]
    result: client_mod.CallResult
    verdicts: list[dict]
    future: concurrent.futures.Future
    cache_key: str | None = None
    cached: dict | None = None  # the cache entry this call was answered from (a hit)
    cache_entry: dict | None = None  # the entry to store for a fresh reply worth keeping


def load_context(s: Session, run: store.Run) -> RunContext:
    rubric_row = s.get(store.RubricRow, run.rubric_id)
    harness = Harness.from_dict(run.harness)
    judge = judge_config(s.get(store.Judge, run.judge_id))
    return RunContext(
        run_id=run.id,
        rubric=store.rubric_value(s, rubric_row),
        harness=harness,
        crit_ids={c.key: c.id for c in store.criterion_rows(s, rubric_row.id)},
        judge=judge,
        shots=fewshot.shot_picker(s, run.dataset_id, harness),
        read_cache=response_cache.may_read(judge, use_cache=bool(run.use_cache), repeat_group=run.repeat_group),
        write_cache=response_cache.may_write(judge),
    )


def pending_calls(
    engine: Engine, ctx: RunContext
) -> Iterator[tuple[PlannedCall, prompts.ExampleText | prompts.CritiqueText]]:
    """The calls still missing, example by example, reading the store in chunks (no whole-run lists)."""
    if ctx.harness.kind == "critique":  # a critique run's calls come from another run's stored rationales
        from judgekit import critique

        yield from critique.pending_calls(engine, ctx.run_id, ctx.crit_ids)
        return
    if ctx.harness.level == "bundle":  # seed 002's holistic call: one bundle's evidence per call
        from judgekit import bundles

        yield from bundles.pending_calls(engine, ctx.run_id, ctx.harness, ctx.rubric, ctx.crit_ids)
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
        ctx = load_context(s, store.get_run(s, run_ref))
    return sum(1 for _ in pending_calls(engine, ctx))


class _Writer:
    """The one thread that writes call results: group commit of whatever is queued, in order."""

    def __init__(self, engine: Engine, ctx: RunContext) -> None:
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
                with Session(self.engine) as s, s.begin():  # the call, its verdicts and its cache entry at once
                    store.insert_calls(s, [self._call_row(i) for i in items], [i.verdicts for i in items])
                    store.insert_cached_replies(s, [i.cache_entry for i in items if i.cache_entry is not None])
            except BaseException as exc:  # report to every waiting worker; the run stops
                for item in items:
                    item.future.set_exception(exc)
                continue
            for item in items:
                item.future.set_result(None)

    def _call_row(self, item: _Done) -> dict:
        r = item.result
        request = {"messages": item.messages, "model": self.ctx.judge.model, "finish_reason": r.finish_reason}
        if item.cache_key is not None:  # the request's content address; a hit also records its saving
            request["cache"] = {"key": item.cache_key, "hit": item.cached is not None,
                                "stored": item.cache_entry is not None}
            if item.cached is not None:
                request["cache"]["saved"] = response_cache.saved_usage(item.cached)
        return {
            "run_id": self.ctx.run_id,
            "example_id": item.planned.example_id,
            "bundle_id": item.planned.bundle_id,
            "criteria": list(item.planned.criteria),
            "attempts": r.attempts,
            "latency_s": r.latency_s,
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "cached_tokens": r.cached_tokens,
            "status": r.status,
            "error": rawtext.clip(r.error, 2000) if r.error else None,
            "structured_mode": r.structured_mode,
            "request": request,
            **rawtext.reply_columns(r.text),
            "created_at": store.utcnow(),
            "from_cache": item.cached is not None,
        }


def call_messages(ctx: RunContext, item, criteria: list) -> list[dict]:
    """The prompt of one call: a judge call on an example or on a bundle's evidence (the holistic call),
    or a critique call on a stored rationale."""
    if isinstance(item, prompts.CritiqueText):
        return prompts.build_critique_messages(item, criteria, ctx.harness.order)
    if isinstance(item, holistic.BundleText):
        return holistic.build_messages(item, criteria, ctx.harness)
    if isinstance(item, holistic.BundleCritiqueText):
        return holistic.build_critique_messages(item, criteria, ctx.harness.order)
    shots = ctx.shots.for_call(item.key, [c.key for c in criteria]) if ctx.shots else ()
    return prompts.build_messages(item, criteria, ctx.harness, ctx.rubric.ko_rule, shots)


def parse_verdict_rows(ctx: RunContext, planned: PlannedCall, result: client_mod.CallResult) -> list[dict]:
    """The verdict rows of one finished call: parsed from an ok reply; unscored, with the endpoint's reason,
    for a call rejected for good (so resume does not send it again); none for a failed call (pending)."""
    criteria = ctx.rubric.subset(list(planned.criteria))
    if result.rejected:
        reason = rawtext.clip(f"rejected by the endpoint for this example: {result.error}", 2000)
        return [
            {"run_id": ctx.run_id, "example_id": planned.example_id, "criterion_id": ctx.crit_ids[c.key],
             "value": None, "rationale": None, "p_pass": None, "red_flags": [], "error": reason,
             "cannot_assess": False}
            for c in criteria
        ]
    if not result.ok:
        return []
    parsed = parse_reply(result.text, criteria)
    probs = (
        p_pass_from_logprobs(result.text or "", result.logprobs, criteria)
        if ctx.harness.logprobs and result.logprobs
        else {}
    )

    def unit(key: str) -> dict:  # a verdict on an example, or on a bundle (store.BundleVerdict: no P(pass))
        if planned.bundle_id is not None:
            return {"bundle_id": planned.bundle_id}
        return {"example_id": planned.example_id, "p_pass": probs.get(key),
                "cannot_assess": parsed[key].cannot_assess}

    return [
        {
            "run_id": ctx.run_id,
            **unit(c.key),
            "criterion_id": ctx.crit_ids[c.key],
            "value": parsed[c.key].value,
            "rationale": rawtext.storable(parsed[c.key].rationale),
            "red_flags": [rawtext.storable(f) for f in parsed[c.key].red_flags],
            "error": rawtext.storable(parsed[c.key].error),
        }
        for c in criteria
    ]


async def verdict_rows(ctx: RunContext, planned: PlannedCall, result: client_mod.CallResult) -> list[dict]:
    """:func:`parse_verdict_rows`, in a worker thread for a long reply so parsing never holds up the event loop."""
    if len(result.text or "") > INLINE_PARSE_CHARS:
        return await asyncio.to_thread(parse_verdict_rows, ctx, planned, result)
    return parse_verdict_rows(ctx, planned, result)


async def execute(
    engine: Engine,
    run_ref: str | int,
    *,
    concurrency: int = 8,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    breaker: int = 10,
    client=None,
    lease_wait_s: float = 0.0,
) -> RunSummary:
    """Send every missing call of a run; safe to call again on the same run (that is resume).

    Holds the run's lease throughout: raises :class:`judgekit.lease.LeaseHeld` (nothing sent, nothing
    changed) when another live process is executing the run, after waiting up to ``lease_wait_s``.
    """
    with Session(engine) as s:
        run = store.get_run(s, run_ref)
        if run.status == "imported":
            raise ValueError(f"run {run.name!r} was imported from a file; there is nothing to send")
        run_id, run_name = run.id, run.name
    held = lease.acquire(engine, run_id, run_name=run_name, wait_s=lease_wait_s)
    try:
        return await _execute_leased(
            engine, run_id, held, concurrency=concurrency, progress=progress, cancel=cancel, breaker=breaker,
            client=client,
        )
    finally:
        held.release()


@contextlib.contextmanager
def _interrupts(on_signal: Callable[[], None]):
    """Route SIGINT/SIGTERM to ``on_signal`` while a run executes (main thread only: elsewhere the process's
    own handlers stay, and the dashboard stops runs with its cancel switch)."""
    loop = asyncio.get_running_loop()
    installed = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, on_signal)
                installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


async def _execute_leased(
    engine: Engine,
    run_id: int,
    held: lease.Lease,
    *,
    concurrency: int,
    progress: Callable[[Progress], None] | None,
    cancel: threading.Event | None,
    breaker: int,
    client,
) -> RunSummary:
    concurrency = max(1, int(concurrency))
    with Session(engine) as s:
        ctx = load_context(s, s.get(store.Run, run_id))
    # Several clients, each serving a few workers: httpx's pool checks every idle connection on every
    # request, so one pool of 32 connections costs ~15 socket syscalls a call (profiled); pools of 4 do not.
    # (Built before the run is marked running: an unset key variable leaves the run as it was.)
    clients = [client] if client is not None else [
        client_mod.make_client(ctx.judge) for _ in range(-(-concurrency // WORKERS_PER_CLIENT))
    ]
    cancel = cancel or threading.Event()
    interrupted = threading.Event()
    tasks: list[asyncio.Future] = []
    loop = asyncio.get_running_loop()

    def abandon_in_flight() -> None:
        for t in tasks:
            t.cancel()

    def on_signal() -> None:
        if interrupted.is_set():  # a second Ctrl-C: do not wait for the calls in flight
            abandon_in_flight()
            return
        interrupted.set()
        cancel.set()
        loop.call_later(INTERRUPT_GRACE_S, abandon_in_flight)

    signals = contextlib.ExitStack()  # Ctrl-C ends the run as interrupted from before it is marked running
    signals.enter_context(_interrupts(on_signal))
    try:
        return await _send(engine, ctx, held, clients, client is not None, concurrency=concurrency,
                           progress=progress, cancel=cancel, interrupted=interrupted, breaker=breaker,
                           tasks=tasks, signals=signals)
    finally:
        signals.close()


async def _send(
    engine: Engine,
    ctx: RunContext,
    held: lease.Lease,
    clients: list,
    borrowed_client: bool,
    *,
    concurrency: int,
    progress: Callable[[Progress], None] | None,
    cancel: threading.Event,
    interrupted: threading.Event,
    breaker: int,
    tasks: list[asyncio.Future],
    signals: contextlib.ExitStack,
) -> RunSummary:
    """Mark the run running, fan its pending calls out over ``concurrency`` workers, store the outcome."""
    with Session(engine) as s, s.begin():
        run = s.get(store.Run, ctx.run_id)
        run.status, run.message = "running", None
        run.started_at = run.started_at or store.utcnow()
        run_name = run.name
    total = sum(1 for _ in pending_calls(engine, ctx))
    state = Progress(total_calls=total)
    circuit = client_mod.CircuitBreaker(breaker)
    schema_cache: dict[tuple[str, ...], dict] = {}
    pending = pending_calls(engine, ctx)
    writer = _Writer(engine, ctx)
    write_error: list[BaseException] = []
    lookup = response_cache.Lookup(engine, ctx.judge) if ctx.read_cache else None

    def stopping() -> bool:
        return cancel.is_set() or circuit.open or bool(write_error) or held.lost.is_set()

    async def worker(client) -> None:
        for planned, text in pending:  # a shared generator: each call is taken by exactly one worker
            if stopping():
                return
            criteria = ctx.rubric.subset(list(planned.criteria))
            messages = call_messages(ctx, text, criteria)
            schema = schema_cache.get(planned.criteria)
            if schema is None:
                schema = schema_cache[planned.criteria] = prompts.response_schema(criteria, ctx.harness.order)
            key = cached = entry = None
            if ctx.read_cache or ctx.write_cache:
                key = response_cache.request_key(ctx.judge, messages, schema=schema,
                                                 structured=ctx.harness.structured, logprobs=ctx.harness.logprobs)
                cached = lookup.get(key) if lookup is not None else None
            if cached is not None:
                result = response_cache.result_from_entry(cached)
            else:
                result = await client_mod.complete(
                    client,
                    ctx.judge,
                    messages,
                    schema=schema,
                    structured=ctx.harness.structured,
                    logprobs=ctx.harness.logprobs,
                )
            rows = await verdict_rows(ctx, planned, result)
            if key is not None and cached is None and ctx.write_cache:
                complete = bool(rows) and all(r["value"] is not None or r.get("cannot_assess") for r in rows)
                entry = response_cache.entry_for(key, ctx.judge, result, complete=complete)
            done = _Done(planned, messages, result, rows, concurrent.futures.Future(), key, cached, entry)
            writer.submit(done)
            try:
                await asyncio.shield(asyncio.wrap_future(done.future))
            except asyncio.CancelledError:
                raise  # the write itself goes on in the writer thread; close() waits for it
            except BaseException as exc:
                write_error.append(exc)
                return
            if not result.rejected:  # a per-example refusal says nothing about the endpoint's health
                circuit.record(result.ok, result.error)
            state.done_calls += 1
            state.retries += result.retries
            state.failed_calls += 0 if result.ok else 1
            state.rejected_calls += 1 if result.rejected else 0
            state.unscored += sum(1 for r in rows if r["value"] is None and not r.get("cannot_assess"))
            state.cannot_assess += sum(1 for r in rows if r.get("cannot_assess"))
            state.cache_hits += cached is not None
            if progress is not None:
                progress(state)

    tasks.extend(asyncio.ensure_future(worker(clients[i % len(clients)])) for i in range(concurrency))
    started = time.perf_counter()
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)
        signals.close()  # the calls are over: what follows is quick bookkeeping
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                raise r
    finally:
        writer.close()
        if lookup is not None:
            lookup.close()
        if not borrowed_client:
            for c in clients:
                await c.close()
    wall = time.perf_counter() - started
    if write_error:
        status, message = "failed", f"could not store results: {write_error[0]}"
    elif interrupted.is_set():
        status, message = "interrupted", (
            f"interrupted after {state.done_calls} of {total} calls (the replies that came back are stored); "
            f"`judgekit resume {run_name}` sends the rest"
        )
    elif held.lost.is_set():
        status, message = "interrupted", "another process took over this run's lease; this one stopped"
    elif circuit.open:
        status, message = "failed", f"{circuit.message}. Resume with `judgekit resume {run_name}`."
    elif cancel.is_set():
        status, message = "cancelled", f"cancelled after {state.done_calls} of {total} calls"
    else:
        missing = sum(1 for _ in pending_calls(engine, ctx))
        status = "done" if missing == 0 else "incomplete"
        message = (
            "" if missing == 0 else f"{missing} calls failed at the endpoint; `judgekit resume {run_name}`"
        )
    with Session(engine) as s, s.begin():
        totals = store.run_totals(s, ctx.run_id)
        if status == "done" and totals["rejected_calls"]:
            message = rejected_message(totals)
        store.finish_run(s, ctx.run_id, status=status, message=rawtext.storable(redact.scrub(message)),
                         totals=totals, wall_s=wall)
    with Session(engine) as s:
        matrix_cache.written(s, run=ctx.run_id)
    return RunSummary(
        ctx.run_id, run_name, status, message, state.done_calls - state.cache_hits, state.failed_calls,
        state.unscored, totals, state.cache_hits, state.cannot_assess,
    )


def rejected_message(totals: dict) -> str:
    """How a finished run reports the examples the endpoint refused for good (their verdicts are unscored)."""
    return (
        f"{totals['rejected_calls']} calls on {totals['rejected_examples']} examples were refused by the endpoint "
        "for good (e.g. the prompt exceeds the model's context); their verdicts are stored unscored with the "
        "reason, and resume does not send them again"
    )


def run_sync(engine: Engine, run_ref: str | int, **kwargs) -> RunSummary:
    return asyncio.run(execute(engine, run_ref, **kwargs))
