"""The ``judgekit`` command line (typer). Thin: parse arguments, open a session, call the library.

Every command takes ``--db URL`` (default ``JUDGEKIT_DB_URL``, else ``sqlite:///db/judgekit.sqlite``).
A bad file or argument exits with status 2 and one line naming the file, line and field.

Start-up: this module and every ``cli_*`` module import only the standard library, typer and
:mod:`judgekit.cli_common` at their top; library modules are imported inside the commands or named with
``lazy(...)`` — see :mod:`judgekit.cli_common` for the rule and how to add a command.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from judgekit.cli_common import (  # noqa: F401 - re-exported for the cli_* modules
    DbOption,
    UsageError,
    fail,
    friendly_errors,
    lazy,
    transaction,
)

store = lazy("judgekit.store")

app = typer.Typer(
    help="judgekit — judge meta-evaluation: run several LLM-judge harnesses over the same stored outputs, "
    "label a human column, and see which criterion associations are real.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rich's import alone costs a tenth of a second at every start
)


def command(name: str | None = None, **kwargs) -> Callable:
    def register(fn: Callable) -> Callable:
        return app.command(name, **kwargs)(friendly_errors(fn))

    return register


# --------------------------------------------------------------------------- workspace


@command()
def init(db: DbOption = None) -> None:
    """Create or upgrade the database schema (a second run is a no-op)."""
    engine = store.engine_for(db, migrate=False)
    applied = store.upgrade(engine)
    where = engine.url.render_as_string(hide_password=True)
    typer.echo(
        f"{'migrated' if applied else 'up to date'}: {where} at revision {store.current_revision(engine)}"
    )


@command()
def demo(
    examples: Annotated[
        int, typer.Option("--examples", min=10, max=200_000, help="Number of demo answers.")
    ] = 600,
    seed: Annotated[int, typer.Option(help="Generator seed.")] = 0,
    db: DbOption = None,
) -> None:
    """Load the demo workspace: dataset `demo`, rubrics `demo` (6 binary) and `demo-scale`, `reference` labels."""
    from judgekit import imports

    with transaction(db) as s:
        result = imports.load_demo(s, n_examples=examples, seed=seed)
    typer.echo(result.summary() if result else "the demo dataset is already loaded")


@command("import-dataset")
def import_dataset(
    path: Annotated[Path, typer.Argument(help="A .jsonl or .csv file: id and answer required.")],
    name: Annotated[str, typer.Option("--name", help="Dataset name.")],
    db: DbOption = None,
) -> None:
    """Import model outputs (id, question, context, answer; other fields become metadata)."""
    from judgekit import imports

    with transaction(db) as s:
        typer.echo(imports.import_dataset(s, path, name).summary())


@command("import-rubric")
def import_rubric(
    path: Annotated[Path, typer.Argument(help="A .yaml/.yml or .json rubric.")], db: DbOption = None
) -> None:
    """Import a rubric: binary and 1–5 scale criteria, pass_at, optional ko_rule."""
    from judgekit import imports

    with transaction(db) as s:
        typer.echo(imports.import_rubric(s, path).summary())


@command("import-labels")
def import_labels(
    path: Annotated[
        Path, typer.Argument(help="Long JSONL/CSV (example_id, criterion, value, annotator) or wide CSV.")
    ],
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset the labels belong to.")],
    annotator: Annotated[str | None, typer.Option(help="Annotator for rows that do not name one.")] = None,
    rubric: Annotated[str | None, typer.Option(help="Check criteria against this rubric only.")] = None,
    db: DbOption = None,
) -> None:
    """Import human labels (upserts on example × criterion × annotator)."""
    from judgekit import imports

    with transaction(db) as s:
        typer.echo(imports.import_labels(s, path, dataset, annotator=annotator, rubric=rubric).summary())


@command("import-run")
def import_run(
    path: Annotated[
        Path, typer.Argument(help="JSONL/CSV of example_id, criterion, verdict[, rationale, p_pass].")
    ],
    dataset: Annotated[str, typer.Option("--dataset")],
    rubric: Annotated[str, typer.Option("--rubric")],
    name: Annotated[str, typer.Option("--name", help="Name of the new run.")],
    db: DbOption = None,
) -> None:
    """Import verdicts produced elsewhere as a run (judge `imported`)."""
    from judgekit import imports

    with transaction(db) as s:
        typer.echo(imports.import_run(s, path, dataset=dataset, rubric=rubric, name=name).summary())


@command("export-labels")
def export_labels(
    dataset: Annotated[str, typer.Option("--dataset")],
    out: Annotated[Path, typer.Option("--out", help="Output .jsonl (exact round-trip) or .csv.")],
    db: DbOption = None,
) -> None:
    """Export a dataset's labels (every annotator)."""
    from judgekit import imports

    with transaction(db) as s:
        n = imports.export_labels(s, dataset, out)
    typer.echo(f"exported {n} labels to {out}")


@command("list")
def list_cmd(db: DbOption = None) -> None:
    """List datasets, rubrics and runs."""
    with transaction(db) as s:
        for d in store.list_datasets(s):
            typer.echo(f"dataset  {d['name']:<24} {d['examples']} examples")
        for r in store.list_rubrics(s):
            ko = f"  K.O.: {r['ko_rule']}" if r["ko_rule"] else ""
            typer.echo(f"rubric   {r['name']:<24} {', '.join(r['criteria'])}{ko}")
        for r in store.list_runs(s):
            typer.echo(
                f"run {r['id']:<4} {r['name']:<24} {r['status']:<9} {r['harness']:<28} {r['judge']}  "
                f"{r['scored']}/{r['verdicts']} scored"
            )


# --------------------------------------------------------------------------- judging


class _ProgressLine:
    """A one-line progress bar on stderr for `run` and `resume`."""

    def __init__(self, total: int) -> None:
        self.total, self.last = total, 0.0

    def __call__(self, p) -> None:
        import time

        now = time.monotonic()
        if now - self.last < 0.2 and p.done_calls < p.total_calls:
            return
        self.last = now
        width = 30
        filled = int(width * p.fraction)
        rate = p.done_calls / p.elapsed_s if p.elapsed_s > 0 else 0.0
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {p.done_calls}/{p.total_calls} calls"
            f"  {rate:5.1f}/s  failed {p.failed_calls}  unscored {p.unscored}  retries {p.retries}  "
        )
        sys.stderr.flush()
        if p.done_calls >= p.total_calls:
            sys.stderr.write("\n")


def _execute(
    db: str | None,
    run_ref: str,
    concurrency: int,
    breaker: int,
    *,
    use_batch: bool = False,
    poll_interval: float = 30.0,
) -> None:
    """Send a run's missing calls live, or through the OpenAI Batch API (also when a batch is under way)."""
    from judgekit import batch, client, runner

    engine = store.engine_for(db)
    try:
        if use_batch or batch.load_state(engine, run_ref) is not None:
            summary = batch.run_batch_sync(
                engine,
                run_ref,
                interval_s=poll_interval,
                progress=lambda st: typer.echo(
                    f"batch {st.batch_id}: {st.status} {st.completed + st.failed}/{st.request_count}",
                    err=True,
                ),
            )
        else:
            pending = runner.count_pending(engine, run_ref)
            summary = runner.run_sync(
                engine,
                run_ref,
                concurrency=concurrency,
                breaker=breaker,
                progress=_ProgressLine(pending) if pending else None,
            )
    except (batch.BatchError, client.JudgeConfigError) as e:
        raise UsageError(str(e)) from None
    _print_summary(summary)
    if summary.status not in ("done",):
        raise typer.Exit(1)


def _print_summary(summary) -> None:
    t = summary.totals
    lines = [
        f"run {summary.name} (#{summary.run_id}): {summary.status}"
        + (f" — {summary.message}" if summary.message else ""),
        f"  this session: {summary.calls_sent} calls sent, {summary.failed_calls} failed at the endpoint, "
        f"{summary.unscored} verdicts unscored",
        f"  run totals:   {t['calls']} calls, {t['retries']} retries, {t['failed_calls']} failed, "
        f"{t['unscored']} unscored verdicts",
        f"  tokens:       {t['prompt_tokens']} prompt ({t['cached_tokens']} cached), {t['completion_tokens']} "
        f"completion",
        f"  latency:      p50 {t['latency_p50']} s, p95 {t['latency_p95']} s",
    ]
    typer.echo("\n".join(lines))


@command()
def run(
    dataset: Annotated[str, typer.Option("--dataset", help="Dataset to judge.")],
    rubric: Annotated[str, typer.Option("--rubric", help="Rubric whose criteria the judge applies.")],
    base_url: Annotated[
        str, typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8765/v1")
    ],
    model: Annotated[str, typer.Option("--model", help="Model name at that endpoint.")],
    harness: Annotated[str, typer.Option("--harness", help="single | split | grouped:a+b|c+d")] = "single",
    order: Annotated[
        str, typer.Option(help="verdict_first | reasoning_first | verdict_only")
    ] = "verdict_first",
    shuffle: Annotated[bool, typer.Option("--shuffle", help="Per-example seeded criterion order.")] = False,
    independence_note: Annotated[
        bool, typer.Option("--independence-note", help="Add seed 003's 'evaluate independently' sentence.")
    ] = False,
    structured: Annotated[str, typer.Option(help="auto | json_schema | json_object | prompt")] = "auto",
    logprobs: Annotated[
        bool, typer.Option("--logprobs", help="Record P(pass) from token log-probabilities.")
    ] = False,
    prompt_variant: Annotated[
        str, typer.Option("--prompt-variant", help="Named prompt template.")
    ] = "default",
    layout: Annotated[
        str, typer.Option(help="shared_prefix (prefix-cache friendly) | criterion_first")
    ] = "shared_prefix",
    prompt_template: Annotated[
        str | None,
        typer.Option(
            "--prompt-template",
            metavar="FILE",
            help="Your judge prompt: a Jinja2 file with {{ question }}, {{ context }}, {{ answer }} and "
            "{{ criteria }} (judgekit's criteria block and reply format, last). `builtin` = judgekit's own "
            "layout even when the rubric has a prompt_template.",
        ),
    ] = None,
    few_shot: Annotated[
        int, typer.Option("--few-shot", min=0, max=20, help="Show K human-labelled examples per criterion.")
    ] = 0,
    few_shot_from: Annotated[
        str, typer.Option("--few-shot-from", help="human (the consensus) | annotator:NAME")
    ] = "human",
    api_key_env: Annotated[
        str | None, typer.Option("--api-key-env", help="NAME of the environment variable holding the key.")
    ] = None,
    judge_kind: Annotated[
        str, typer.Option("--judge-kind", help="auto | openai | simulated | local")
    ] = "auto",
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="Calls in flight at once.")] = 8,
    limit: Annotated[int | None, typer.Option(min=1, help="Judge only the first N examples.")] = None,
    sample: Annotated[
        int | None, typer.Option(min=1, help="Judge a seeded random sample of N examples.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for --sample and --shuffle.")] = 0,
    name: Annotated[str | None, typer.Option("--name", help="Run name (default: derived, unique).")] = None,
    timeout: Annotated[float, typer.Option(help="Per-call timeout in seconds.")] = 60.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Runaway guard per call.")] = 1024,
    suppress_thinking: Annotated[
        bool, typer.Option("--suppress-thinking", help="Ask reasoning models not to think aloud.")
    ] = False,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.0,
    breaker: Annotated[int, typer.Option(help="Stop after N consecutive failed calls (0 = never).")] = 10,
    use_batch: Annotated[
        bool,
        typer.Option(
            "--batch", help="Send through the OpenAI Batch API (large runs, half price; resumable)."
        ),
    ] = False,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", help="Seconds between batch polls.")
    ] = 30.0,
    db: DbOption = None,
) -> None:
    """Judge a dataset with one harness; every call and verdict is stored as it finishes."""

    from judgekit import prompt_templates, prompts, runner
    from judgekit.harness import parse_harness

    template, template_name = "", ""
    if prompt_template == prompt_templates.BUILTIN:
        template_name = prompt_templates.BUILTIN
    elif prompt_template:
        template, template_name = prompt_templates.load_template_file(prompt_template)
    spec = parse_harness(
        harness,
        order=order,
        shuffle=shuffle,
        independence_note=independence_note,
        structured=structured,
        logprobs=logprobs,
        prompt_variant=prompt_variant,
        layout=layout,
        seed=seed,
        prompt_template=template,
        prompt_template_name=template_name,
        few_shot=few_shot,
        few_shot_from=few_shot_from,
    )
    if judge_kind not in ("auto", "openai", "simulated", "local"):
        raise UsageError(f"--judge-kind must be auto, openai, simulated or local, not {judge_kind!r}")
    kind = runner.detect_judge_kind(base_url) if judge_kind == "auto" else judge_kind
    judge = runner.JudgeSpec(
        base_url=base_url,
        model=model,
        kind=kind,
        api_key_env=api_key_env,
        timeout_s=timeout,
        max_tokens=max_tokens,
        suppress_thinking=suppress_thinking,
        temperature=temperature,
    )
    with transaction(db) as s:
        new = runner.create_run(
            s,
            dataset=dataset,
            rubric=rubric,
            harness=spec,
            judge=judge,
            limit=limit,
            sample=sample,
            seed=seed,
            name=name,
        )
        run_name = new.name
        prompt_label = prompts.prompt_label(new.harness)
    typer.echo(
        f"run {run_name}: {spec.label} on {dataset} × {rubric} with {model}, prompt {prompt_label}"
        + (" (simulated judge)" if kind == "simulated" else ""),
        err=True,
    )
    _execute(db, run_name, concurrency, breaker, use_batch=use_batch, poll_interval=poll_interval)


@command()
def resume(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="Run name or id.")],
    concurrency: Annotated[int, typer.Option(min=1, max=256)] = 8,
    breaker: Annotated[int, typer.Option(help="Stop after N consecutive failed calls (0 = never).")] = 10,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", help="Seconds between batch polls.")
    ] = 30.0,
    db: DbOption = None,
) -> None:
    """Send only the calls of a run that have no verdict yet (after a crash, cancel or failure); a run
    sent through the Batch API continues its batch."""
    _execute(db, run_ref, concurrency, breaker, poll_interval=poll_interval)


@command("sim-judge")
def sim_judge(
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8765,
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    conditioning: Annotated[
        float, typer.Option(help="G: pull of each field toward fields already emitted.")
    ] = 1.5,
    accuracy: Annotated[float, typer.Option(help="Per-criterion accuracy against the planted truth.")] = 0.9,
    seed: Annotated[int, typer.Option()] = 0,
    latency_ms: Annotated[float, typer.Option("--latency-ms", help="Added latency per reply.")] = 0.0,
    db: DbOption = None,
) -> None:
    """Serve the SIMULATED judge (known, tunable conditioning) over an OpenAI-compatible API; truth from --db."""
    from judgekit import config, simjudge

    store.engine_for(db)
    params = simjudge.SimParams(
        accuracy=accuracy, conditioning=conditioning, seed=seed, latency_ms=latency_ms
    )
    simjudge.serve_forever(config.db_url(db), params, host, port)


@command("local-judge")
def local_judge(
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8766,
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    model_path: Annotated[
        Path | None, typer.Option("--model-path", help="A GGUF file (default: SmolLM2-135M).")
    ] = None,
    db: DbOption = None,
) -> None:
    """Serve the bundled local judge (llama.cpp + SmolLM2-135M): real mechanics, weak judging."""
    from judgekit import localjudge

    localjudge.serve_forever(model_path, host, port)


@command("app")
def app_cmd(
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8501,
    host: Annotated[str, typer.Option(help="Address to bind (127.0.0.1 = this machine only).")] = "127.0.0.1",
    db: DbOption = None,
) -> None:
    """Start the dashboard (Streamlit) on http://HOST:PORT."""
    import os

    from judgekit import config

    env = dict(os.environ)
    if db:
        env["JUDGEKIT_DB_URL"] = db
    store.engine_for(db)  # migrate before the first page renders
    store.dispose_engines()
    cmd = config.app_command(host, port)
    # become the server (exec, not a child): a signal to this process then reaches Streamlit itself,
    # and no orphaned server is left behind when `judgekit app` is stopped
    os.execve(cmd[0], cmd, env)


from judgekit.cli_report import export_report_cmd, report_app  # noqa: E402

app.add_typer(report_app, name="report")
app.command("export-report")(export_report_cmd)

from judgekit.cli_label import label_set_app  # noqa: E402

app.add_typer(label_set_app, name="label-set")

from judgekit.cli_scale import critique_cmd  # noqa: E402

app.command("critique")(critique_cmd)

from judgekit.cli_check import check_cmd  # noqa: E402

app.command("check")(check_cmd)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
