"""OpenAI Batch API runs: the same calls as :mod:`judgekit.runner`, sent as one batch file.

Flow: :func:`build_batch_file` plans the run's *pending* calls exactly as the live runner does
(``runner.pending_calls``, ``prompts.build_messages``, ``prompts.response_schema``) and writes one
request line each → :func:`submit` uploads it and creates the batch → :func:`poll` waits for a final
status → :func:`import_results` downloads the output and error files and stores every line as a call
row with its parsed verdicts, through the same ``store.insert_call`` as live runs, so a batch run and
a live run of one harness are comparable row for row. :func:`run_batch` does all three.

**Resume.** The batch's state (:class:`BatchState`: input file id, batch id, status, output/error
file ids, request count) is kept in ``Run.batch`` and written *before* each step returns, so any
interruption is picked up where it stopped:

* crash after the upload, before the batch id was stored → the batch is looked up by its input file
  (``GET /v1/batches``) and adopted if the server did create it, else created from the stored file;
* crash while waiting → polling continues on the stored batch id; no second batch is created;
* crash during the import → the import is repeated; a ``custom_id`` whose verdicts exist, or whose
  error call from this batch is already stored, is skipped, so importing twice adds nothing.

A line that failed at the endpoint (error file, or a non-200 ``status_code``) is stored as an
``error`` call with no verdicts; its pairs stay pending, so the next :func:`run_batch` (``judgekit
resume RUN``) sends just those as a new batch. A reply that cannot be parsed stores *unscored*
verdicts — never a fail. A ``failed`` batch leaves the run ``failed``; an ``expired`` or
``cancelled`` one keeps whatever finished (imported) and leaves the rest pending; either way the
run's message says what happened and that the run can be batched again.

``custom_id`` is ``<run_id>:<example_id>:<crit1+crit2…>`` (internal example id; criteria in the order
asked). The API key is read from the variable the judge names (the client seam) and scrubbed from
every stored or raised message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from judgekit import client as client_mod
from judgekit import lease, prompts, rawtext, runner, store
from judgekit.harness import PlannedCall

if TYPE_CHECKING:  # openai is imported when a batch is sent or checked, not by every page that lists runs
    import openai

__all__ = [
    "BatchError",
    "BatchState",
    "build_batch_file",
    "custom_id",
    "import_results",
    "load_state",
    "poll",
    "run_batch",
    "run_batch_sync",
    "submit",
]

ENDPOINT = "/v1/chat/completions"
MAX_REQUESTS = 50_000  # OpenAI's per-batch limit; the rest go into the next batch (resume)
MAX_FILE_BYTES = 190 * 1024 * 1024  # under OpenAI's 200 MB input-file limit
FILE_TIMEOUT_S = 600.0  # uploads and downloads of large files outlast a judge's per-call timeout
IMPORT_CHUNK = 500  # call rows per transaction while importing
TRANSIENT_POLL_FAILURES = 10  # consecutive failed status checks before poll gives up
IN_FLIGHT = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
FINISHED = frozenset({"completed", "expired", "cancelled"})  # may have output to import
TERMINAL = FINISHED | {"failed"}
RUN_STATUS = "batching"  # Run.status while a batch is submitted and not yet imported


class BatchError(RuntimeError):
    """A batch step failed (upload, create, status, download). The message holds no credentials."""


@dataclass(frozen=True)
class BatchState:
    """One run's current OpenAI batch, as stored in ``Run.batch``.

    ``status`` is OpenAI's batch status, or ``uploaded`` (file sent, batch not yet created) or
    ``empty`` (nothing was pending, nothing submitted). ``imported`` turns true once the output and
    error files are in the store. ``history`` lists earlier batches of the run (id, status, counts).
    """

    status: str
    input_file_id: str | None = None
    batch_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_count: int = 0
    completed: int = 0
    failed: int = 0
    mode: str = "json_schema"
    message: str | None = None
    imported: bool = False
    submitted_at: float | None = None
    history: tuple[dict, ...] = field(default=())

    @property
    def needs_import(self) -> bool:
        return self.status in FINISHED and not self.imported

    @property
    def live(self) -> bool:
        """Submitted work not yet in the store: while true, submitting again returns this batch."""
        return self.status == "uploaded" or self.status in IN_FLIGHT or self.needs_import

    def to_dict(self) -> dict:
        out = asdict(self)
        out["history"] = list(self.history)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> BatchState:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["history"] = tuple(known.get("history") or ())
        return cls(**known)

    def summary(self) -> dict:
        return {
            "batch_id": self.batch_id,
            "status": self.status,
            "requests": self.request_count,
            "completed": self.completed,
            "failed": self.failed,
            "imported": self.imported,
        }


def custom_id(run_id: int, planned: PlannedCall) -> str:
    """``<run_id>:<example_id>:<crit1+crit2…>`` — unique per run, since a call covers its criteria once."""
    return f"{run_id}:{planned.example_id}:{'+'.join(planned.criteria)}"


# --------------------------------------------------------------------------------- state I/O


def load_state(engine: Engine, run_ref: str | int) -> BatchState | None:
    """The run's stored batch state, or ``None`` if it was never batched (CLI ``resume`` checks this)."""
    with Session(engine) as s:
        data = store.get_run(s, run_ref).batch
    return BatchState.from_dict(data) if data else None


def _save(engine: Engine, run_id: int, state: BatchState, **run_values: Any) -> None:
    with Session(engine) as s, s.begin():
        store.update_run(s, run_id, batch=state.to_dict(), **run_values)


def _context(engine: Engine, run_ref: str | int) -> tuple[runner.RunContext, str, BatchState | None]:
    with Session(engine) as s:
        run = store.get_run(s, run_ref)
        if run.status == "imported":
            raise ValueError(f"run {run.name!r} was imported from a file; there is nothing to send")
        state = BatchState.from_dict(run.batch) if run.batch else None
        return runner.load_context(s, run), run.name, state


def _mode(ctx: runner.RunContext) -> str:
    """The structured-output mode of the batch: OpenAI takes json_schema, unless the harness fixed one."""
    return "json_schema" if ctx.harness.structured == "auto" else ctx.harness.structured


@contextlib.asynccontextmanager
async def _client(
    ctx: runner.RunContext, client: openai.AsyncOpenAI | None
) -> AsyncIterator[openai.AsyncOpenAI]:
    if client is not None:
        yield client
        return
    own = client_mod.make_client(ctx.judge)
    try:
        yield own
    finally:
        await own.close()


def _key(client: openai.AsyncOpenAI) -> str:
    key = getattr(client, "api_key", "")
    return key if isinstance(key, str) else ""


def _api_error(what: str, exc: Exception, client: openai.AsyncOpenAI) -> BatchError:
    import openai

    if isinstance(exc, openai.APIStatusError):
        detail = client_mod.status_message(exc)
    elif isinstance(exc, openai.APIConnectionError):
        detail = client_mod.connection_message(exc)
    else:
        detail = f"{type(exc).__name__}: {str(exc)[:300]}"
    return BatchError(client_mod.scrub(f"{what} failed: {detail}", _key(client)))


# --------------------------------------------------------------------------------- the file


def _lines(engine: Engine, ctx: runner.RunContext) -> tuple[bytes, int]:
    mode = _mode(ctx)
    schemas: dict[tuple[str, ...], dict] = {}
    out: list[bytes] = []
    size = 0
    for planned, text in runner.pending_calls(engine, ctx):
        criteria = ctx.rubric.subset(list(planned.criteria))
        messages = runner.call_messages(ctx, text, criteria)
        schema = schemas.get(planned.criteria)
        if schema is None:
            schema = schemas[planned.criteria] = prompts.response_schema(criteria, ctx.harness.order)
        # The body the live runner would POST (client.request_body / _post_chat), plus the response_format.
        kwargs = client_mod.request_body(ctx.judge, messages, ctx.harness.logprobs, 5)
        body = {k: v for k, v in kwargs.items() if k not in ("timeout", "extra_body")}
        body.update(kwargs.get("extra_body") or {})
        fmt = client_mod.response_format(mode, schema)
        if fmt is not None:
            body["response_format"] = fmt
        line = (
            json.dumps(
                {
                    "custom_id": custom_id(ctx.run_id, planned),
                    "method": "POST",
                    "url": ENDPOINT,
                    "body": body,
                },
                ensure_ascii=False,
            ).encode()
            + b"\n"
        )
        if len(out) >= MAX_REQUESTS or size + len(line) > MAX_FILE_BYTES:
            break  # OpenAI's limits; the remaining calls stay pending for the next batch
        out.append(line)
        size += len(line)
    return b"".join(out), len(out)


def build_batch_file(engine: Engine, run_ref: str | int) -> tuple[bytes, int]:
    """The JSONL batch file of a run's pending calls, and how many request lines it holds.

    Same planning and prompts as a live run; ``response_format`` is ``json_schema`` (the harness's
    explicit structured mode if it names one). At most 50,000 lines / 190 MB — OpenAI's limits.
    """
    ctx, _name, _state = _context(engine, run_ref)
    return _lines(engine, ctx)


# ------------------------------------------------------------------------------------ submit


def _adopt(state: BatchState, batch: Any, key: str) -> BatchState:
    """Fold a retrieved ``Batch`` object into the state (its error text scrubbed of the key)."""
    counts = getattr(batch, "request_counts", None)
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    message = "; ".join(
        f"{e.code or 'error'}: {e.message or ''}" + (f" (line {e.line})" if e.line is not None else "")
        for e in errors
    )
    return replace(
        state,
        batch_id=batch.id,
        status=batch.status,
        input_file_id=batch.input_file_id or state.input_file_id,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
        completed=getattr(counts, "completed", 0) or 0,
        failed=getattr(counts, "failed", 0) or 0,
        request_count=(getattr(counts, "total", 0) or state.request_count),
        message=rawtext.storable(client_mod.scrub(message, key)) if message else state.message,
    )


async def _find_batch(client: openai.AsyncOpenAI, input_file_id: str, scan: int = 200) -> Any | None:
    """A batch the server created from this input file (a crash may have lost its id), if any."""
    import openai

    seen = 0
    try:
        async for b in client.batches.list(limit=100):
            if b.input_file_id == input_file_id:
                return b
            seen += 1
            if seen >= scan:
                break
    except openai.NotFoundError:  # a server without the list route: nothing to adopt
        return None
    return None


def _in_flight_message(state: BatchState) -> str:
    return (
        f"OpenAI batch {state.batch_id} {state.status}: {state.completed + state.failed} of "
        f"{state.request_count} requests finished"
    )


async def submit(engine: Engine, run_ref: str | int, client: openai.AsyncOpenAI | None = None) -> BatchState:
    """Upload the run's pending calls as a batch file and create the batch; the state is stored first.

    If ``Run.batch`` already holds a live batch (in flight, or finished but not yet imported), nothing
    is sent and that state is returned. With nothing pending the returned state is not live (the
    previous one, or ``status="empty"``).
    """
    import openai

    ctx, _name, state = _context(engine, run_ref)
    if state is not None and state.live and state.status != "uploaded":
        return state
    async with _client(ctx, client) as c:
        try:
            if state is not None and state.status == "uploaded" and state.input_file_id:
                found = await _find_batch(c, state.input_file_id)
                if found is not None:  # created before the crash: adopt it, never create a second
                    state = _adopt(state, found, _key(c))
                    _save(engine, ctx.run_id, state, status=RUN_STATUS, message=_in_flight_message(state))
                    return state
            data, count = _lines(engine, ctx)
            if count == 0:
                return state if state is not None else BatchState(status="empty", mode=_mode(ctx))
            if state is not None and state.status == "uploaded" and state.request_count == count:
                input_file_id = state.input_file_id  # the stored upload still matches what is pending
            else:
                history = (
                    () if state is None else state.history + ((state.summary(),) if state.batch_id else ())
                )
                uploaded = await c.files.create(
                    file=(f"judgekit-run-{ctx.run_id}.jsonl", data), purpose="batch", timeout=FILE_TIMEOUT_S
                )
                input_file_id = uploaded.id
                state = BatchState(
                    status="uploaded",
                    input_file_id=input_file_id,
                    request_count=count,
                    mode=_mode(ctx),
                    submitted_at=time.time(),
                    history=history,
                )
                _save(engine, ctx.run_id, state, status=RUN_STATUS,
                      message=f"batch file uploaded ({count} requests); creating the batch",
                      started_at=func.coalesce(store.Run.started_at, store.utcnow()))
            created = await c.batches.create(
                input_file_id=input_file_id,
                endpoint=ENDPOINT,
                completion_window="24h",
                metadata={"judgekit_run": str(ctx.run_id)},
            )
        except openai.APIError as exc:
            raise _api_error("submitting the batch", exc, c) from None
    state = _adopt(state, created, _key(c))
    _save(engine, ctx.run_id, state, status=RUN_STATUS, message=_in_flight_message(state))
    return state


# -------------------------------------------------------------------------------------- poll


def _transient_errors() -> tuple[type[Exception], ...]:
    """The faults a status check retries at the next interval."""
    import openai

    return openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError, openai.InternalServerError


async def poll(
    engine: Engine,
    run_ref: str | int,
    *,
    interval_s: float = 30,
    timeout_s: float | None = None,
    progress: Callable[[BatchState], None] | None = None,
    client: openai.AsyncOpenAI | None = None,
    cancel: threading.Event | None = None,
) -> BatchState:
    """Check the run's batch every ``interval_s`` until it is completed/failed/expired/cancelled.

    Every status is stored (``Run.batch``, and the run's message). Returns early with the current,
    still running state once ``timeout_s`` has passed or ``cancel`` is set (the batch itself goes on).
    Network faults and 429/5xx on a status check are retried at the next interval; after 10 in a row
    (or any other error) :class:`BatchError`.
    """
    import openai

    ctx, _name, state = _context(engine, run_ref)
    if state is None or state.batch_id is None:
        raise BatchError(f"run {_name!r} has no submitted batch to poll")
    if state.status not in IN_FLIGHT:
        return state
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    transient = 0
    async with _client(ctx, client) as c:
        while True:
            try:
                batch = await c.batches.retrieve(state.batch_id)
            except _transient_errors() as exc:
                transient += 1
                if transient >= TRANSIENT_POLL_FAILURES:
                    raise _api_error(f"checking batch {state.batch_id} ({transient} times)", exc, c) from None
            except openai.APIError as exc:
                raise _api_error(f"checking batch {state.batch_id}", exc, c) from None
            else:
                transient = 0
                new = _adopt(state, batch, _key(c))
                if new != state:
                    state = new
                    _save(engine, ctx.run_id, state, status=RUN_STATUS, message=_in_flight_message(state))
            if progress is not None:
                progress(state)
            if state.status in TERMINAL:
                return state
            if deadline is not None and time.monotonic() + interval_s > deadline:
                return state
            if cancel is not None and cancel.is_set():
                return state
            await asyncio.sleep(interval_s)


# ------------------------------------------------------------------------------------ import


async def _download(client: openai.AsyncOpenAI, file_id: str | None) -> list[dict]:
    if not file_id:
        return []
    content = await client.files.content(file_id, timeout=FILE_TIMEOUT_S)
    out = []
    for text in content.content.splitlines():
        with contextlib.suppress(ValueError):
            line = json.loads(text)
            if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                out.append(line)
    return out


def _line_result(line: dict, mode: str, key: str) -> client_mod.CallResult:
    """One output/error line → the :class:`~judgekit.client.CallResult` a live call would have given."""
    response = line.get("response") if isinstance(line.get("response"), dict) else None
    error = line.get("error") if isinstance(line.get("error"), dict) else None
    code = response.get("status_code") if response else None
    body = response.get("body") if response else None
    if code == 200 and error is None:
        failure = client_mod.reply_failure(body)  # a 200 error envelope is a failed line, as live
        if failure is None:
            try:
                return client_mod.result_from_reply(body, mode, 1, 0, 0.0, 0.0)
            except Exception as exc:  # a malformed envelope: the endpoint's fault, as in a live call
                failure = f"unexpected response ({type(exc).__name__}: {str(exc)[:200]})"
        message = failure
    elif code is not None:
        err = body.get("error", body) if isinstance(body, dict) else body
        detail = err.get("message") if isinstance(err, dict) else err
        message = f"HTTP {code}: {str(detail if detail is not None else '')[:300]}"
    elif error is not None:
        message = f"batch error {error.get('code') or ''}: {str(error.get('message') or '')[:300]}"
    else:
        message = "batch line has neither a response nor an error"
    status = code if isinstance(code, int) else None
    return client_mod.failed_result(
        client_mod.scrub(message, key), mode, 1, 0, rejected=client_mod.is_permanent(status, message)
    )


def _call_row(
    ctx: runner.RunContext,
    planned: PlannedCall,
    messages: list[dict],
    result: client_mod.CallResult,
    state: BatchState,
    line: dict,
) -> dict:
    """The runner's call-row shape (``_Writer._call_row``); latency is unknown in a batch."""
    return {
        "run_id": ctx.run_id,
        "example_id": planned.example_id,
        "criteria": list(planned.criteria),
        "attempts": result.attempts,
        "latency_s": None,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cached_tokens": result.cached_tokens,
        "status": result.status,
        "error": rawtext.clip(result.error, 2000) if result.error else None,
        "structured_mode": result.structured_mode,
        "request": {
            "messages": messages,
            "model": ctx.judge.model,
            "finish_reason": result.finish_reason,
            "batch_id": state.batch_id,
            "custom_id": line["custom_id"],
            "batch_line_id": line.get("id"),
        },
        **rawtext.reply_columns(result.text),
        "created_at": store.utcnow(),
    }


@dataclass
class _Imported:
    calls: int = 0
    failed: int = 0
    unscored: int = 0


def _store_lines(
    engine: Engine, ctx: runner.RunContext, state: BatchState, lines: dict[str, dict], key: str
) -> _Imported:
    """Store the lines whose pairs are still pending and not already imported from this batch."""
    with Session(engine) as s:
        done = set(
            s.scalars(
                select(store.Call.request["custom_id"].as_string()).where(
                    store.Call.run_id == ctx.run_id,
                    store.Call.request["batch_id"].as_string() == state.batch_id,
                )
            )
        )
    counts = _Imported()
    rows: list[tuple[dict, list[dict]]] = []

    def flush() -> None:
        if rows:
            with Session(engine) as s, s.begin():
                for call, verdicts in rows:
                    store.insert_call(s, call, verdicts)
            rows.clear()

    # Walking the pending calls re-derives each request's messages (same planner, same prompts) and
    # skips every custom_id whose verdicts already exist.
    for planned, text in runner.pending_calls(engine, ctx):
        cid = custom_id(ctx.run_id, planned)
        line = lines.get(cid)
        if line is None or cid in done:
            continue
        criteria = ctx.rubric.subset(list(planned.criteria))
        messages = runner.call_messages(ctx, text, criteria)
        result = _line_result(line, state.mode, key)
        verdicts = runner.parse_verdict_rows(ctx, planned, result)
        rows.append((_call_row(ctx, planned, messages, result, state, line), verdicts))
        counts.calls += 1
        counts.failed += 0 if result.ok else 1
        counts.unscored += sum(1 for v in verdicts if v["value"] is None)
        if len(rows) >= IMPORT_CHUNK:
            flush()
    flush()
    return counts


def _outcome(state: BatchState, name: str, missing: int, totals: dict) -> tuple[str, str]:
    """The run's status and message after a batch has been imported (or has failed)."""
    again = f"`judgekit resume {name}` submits them as a new batch"
    bid = state.batch_id or "(none)"
    if missing == 0:
        return "done", runner.rejected_message(totals) if totals.get("rejected_calls") else ""
    if state.status == "failed":
        why = state.message or "no reason given"
        return "failed", (
            f"OpenAI batch {bid} failed: {why}. Nothing from it was judged; "
            f"`judgekit resume {name}` submits a new batch."
        )
    if state.status in ("expired", "cancelled"):
        verb = "expired before it finished" if state.status == "expired" else "was cancelled"
        return state.status, (
            f"OpenAI batch {bid} {verb}: {state.completed + state.failed} of "
            f"{state.request_count} requests came back and were imported; {missing} calls "
            f"are still missing — {again}."
        )
    failed = f"{state.failed} requests failed in batch {bid}; " if state.failed else ""
    return "incomplete", f"{failed}{missing} calls are still missing — {again}."


async def import_results(
    engine: Engine, run_ref: str | int, client: openai.AsyncOpenAI | None = None, *, wall_s: float = 0.0
) -> runner.RunSummary:
    """Store a finished batch's results; idempotent. Sets the run's status, message and totals.

    Output lines become ``ok`` calls with parsed verdicts (unparseable → unscored); error-file lines
    and non-200 responses become ``error`` calls without verdicts (pending for the next batch). A
    ``failed`` batch imports nothing and leaves the run ``failed`` with the batch's reason.
    """
    import openai

    ctx, name, state = _context(engine, run_ref)
    if state is None:
        raise BatchError(f"run {name!r} has no batch to import")
    if state.status == "uploaded" or state.status in IN_FLIGHT:
        raise BatchError(f"batch {state.batch_id} of run {name!r} is still {state.status}; poll it first")
    counts = _Imported()
    if state.needs_import:
        async with _client(ctx, client) as c:
            try:
                lines = {line["custom_id"]: line for line in await _download(c, state.output_file_id)}
                for line in await _download(c, state.error_file_id):
                    lines.setdefault(line["custom_id"], line)
            except openai.APIError as exc:
                raise _api_error(f"downloading the results of batch {state.batch_id}", exc, c) from None
            counts = _store_lines(engine, ctx, state, lines, _key(c))
        state = replace(state, imported=True)
    missing = sum(1 for _ in runner.pending_calls(engine, ctx))
    with Session(engine) as s, s.begin():
        totals = store.run_totals(s, ctx.run_id)
        status, message = _outcome(state, name, missing, totals)
        store.finish_run(s, ctx.run_id, status=status, message=message, totals=totals, wall_s=wall_s,
                         batch=state.to_dict())
    return runner.RunSummary(
        ctx.run_id, name, status, message, counts.calls, counts.failed, counts.unscored, totals
    )


# --------------------------------------------------------------------------------- all three


async def run_batch(
    engine: Engine,
    run_ref: str | int,
    *,
    interval_s: float = 30,
    progress: Callable[[BatchState], None] | None = None,
    client: openai.AsyncOpenAI | None = None,
    lease_wait_s: float = 0.0,
    cancel: threading.Event | None = None,
) -> runner.RunSummary:
    """Submit the run's pending calls (or pick up its live batch), wait for it, import the results.

    Safe to call again after an interruption at any point: it never creates a second batch while
    one is live, and importing is idempotent. With nothing pending it only refreshes the run's status.
    Holds the run's lease (:mod:`judgekit.lease`) throughout, like a live run: a second process
    continuing the same run refuses with :class:`judgekit.lease.LeaseHeld`.
    """
    started = time.perf_counter()
    ctx, name, _state = _context(engine, run_ref)
    held = lease.acquire(engine, ctx.run_id, run_name=name, wait_s=lease_wait_s)
    try:
        async with _client(ctx, client) as c:
            state = await submit(engine, run_ref, client=c)
            if state.status == "empty":  # never batched and nothing pending
                return _nothing(engine, run_ref)
            if state.status in IN_FLIGHT:
                try:
                    state = await poll(
                        engine, run_ref, interval_s=interval_s, progress=progress, client=c, cancel=cancel
                    )
                except asyncio.CancelledError:  # Ctrl-C while waiting: the batch goes on; say how to pick it up
                    with Session(engine) as s, s.begin():
                        store.update_run(s, ctx.run_id, message=f"OpenAI batch {state.batch_id} is still running; "
                                         f"interrupted while waiting — `judgekit resume {name}` picks it up")
                    raise
            if state.status in IN_FLIGHT:  # stopped waiting (cancel); the batch goes on, resume picks it up
                return _still_batching(engine, run_ref, state)
            return await import_results(engine, run_ref, client=c, wall_s=time.perf_counter() - started)
    finally:
        held.release()


def _still_batching(engine: Engine, run_ref: str | int, state: BatchState) -> runner.RunSummary:
    with Session(engine) as s:
        run = store.get_run(s, run_ref)
        message = f"{_in_flight_message(state)}; stopped waiting — `judgekit resume {run.name}` picks the batch up"
        return runner.RunSummary(run.id, run.name, RUN_STATUS, message, 0, 0, 0, store.run_totals(s, run.id))


def _nothing(engine: Engine, run_ref: str | int) -> runner.RunSummary:
    with Session(engine) as s, s.begin():
        run = store.get_run(s, run_ref)
        run.totals = store.run_totals(s, run.id)
        run.status, run.message = "done", ""
        return runner.RunSummary(run.id, run.name, "done", "", 0, 0, 0, run.totals)


def run_batch_sync(engine: Engine, run_ref: str | int, **kwargs: Any) -> runner.RunSummary:
    """:func:`run_batch` from synchronous code (the CLI)."""
    return asyncio.run(run_batch(engine, run_ref, **kwargs))
