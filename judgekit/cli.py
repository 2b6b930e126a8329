"""The ``judgekit`` command line (typer). Thin: parse arguments, open a session, call the library.

Every command takes ``--db URL`` (default ``JUDGEKIT_DB_URL``, else ``sqlite:///db/judgekit.sqlite``).
A bad file or argument exits with status 2 and one line naming the file, line and field.

Start-up: this module and every ``cli_*`` module import only the standard library, typer and
:mod:`judgekit.cli_common` at their top; library modules are imported inside the commands or named with
``lazy(...)`` — see :mod:`judgekit.cli_common` for the rule and how to add a command.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from judgekit.cli_common import (
    DbOption,
    UsageError,
    execute_run,
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
    holistic_ab: Annotated[
        bool,
        typer.Option("--holistic-ab", help="Also run the holistic A/B (default vs hardened, per bundle of "
                     "model × pack) on the simulated judge, and print it."),
    ] = False,
    db: DbOption = None,
) -> None:
    """Load the demo workspace: dataset `demo`, rubrics `demo` (6 binary) and `demo-scale`, `reference` labels."""
    from judgekit import imports

    with transaction(db) as s:
        result = imports.load_demo(s, n_examples=examples, seed=seed)
    typer.echo(result.summary() if result else "the demo dataset is already loaded")
    if holistic_ab:
        from judgekit import bundle_report, config, critique, demo_session, simjudge

        url = config.db_url(db)
        sim, strong = (simjudge.start_in_thread(url, p) for p in (simjudge.SimParams(), demo_session.STRONG_SIM))
        try:
            names = demo_session.holistic_ab(store.engine_for(db), sim.base_url, strong.base_url)
        finally:
            sim.stop()
            strong.stop()
        with transaction(db) as s:
            crit = tuple(critique.critique_rates(s, names[f"critique-{v}"]) for v in ("default", "hardened"))
            rep = bundle_report.ab_report(s, names["holistic-default"], names["holistic-hardened"],
                                          names["reference"], crit)  # type: ignore[arg-type]
        typer.echo(bundle_report.render_ab_table(rep))


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
        Path,
        typer.Argument(help="JSONL/CSV of example_id, criterion, verdict[, rationale, p_pass]; with --from, "
                       "the tool's file (an autorubric run directory)."),
    ],
    dataset: Annotated[str, typer.Option("--dataset")],
    rubric: Annotated[str, typer.Option("--rubric")],
    name: Annotated[str, typer.Option("--name", help="Name of the new run.")],
    tool: Annotated[
        str | None,
        typer.Option("--from", help="What wrote PATH: promptfoo (eval -o results.json), inspect (eval log, "
                     "JSON), autorubric (run directory or items.jsonl), langfuse (Langfuse score export or "
                     "LangSmith experiment export; JSON/JSONL/CSV). Answers are matched by an explicit "
                     "example_id, the tool's sample id, or the exact answer text."),
    ] = None,
    tool_dataset: Annotated[
        Path | None,
        typer.Option("--tool-dataset", help="autorubric: the dataset file it graded (RubricDataset.to_file)."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Import verdicts produced elsewhere as a run (judge `imported`)."""
    from judgekit import imports

    with transaction(db) as s:
        typer.echo(imports.import_run(s, path, dataset=dataset, rubric=rubric, name=name, tool=tool,
                                      tool_dataset=tool_dataset).summary())


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
        from judgekit import bundles

        for g in bundles.groupings(s):
            typer.echo(f"bundles  {g['dataset']:<24} by {' + '.join(g['fields'])}: {g['bundles']} bundles "
                       f"({g['answers']} answers)")
        for r in store.list_runs(s):
            typer.echo(
                f"run {r['id']:<4} {r['name']:<24} {r['status']:<9} {r['harness']:<28} {r['judge']}  "
                f"{r['scored']}/{r['verdicts']} scored"
            )


# --------------------------------------------------------------------------- judging


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
        bool, typer.Option("--independence-note", help="Tell the judge to evaluate each criterion independently "
                           "(one more paragraph in the system prompt).")
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
            "{{ criteria }} (judgekit's criteria block and reply format, last); with --level bundle "
            "{{ bundle }}, {{ evidence }} and {{ dimensions }}. `builtin` = judgekit's own layout even when the "
            "rubric has a prompt_template.",
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
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature.")] = 0.0,
    repeat: Annotated[
        int,
        typer.Option(min=1, max=50, help="Run the harness N times over the same examples (the judge's noise "
                     "floor: test–retest agreement); runs NAME-r1 … NAME-rN."),
    ] = 1,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Send every call even if the response cache holds its reply.")
    ] = False,
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
    level: Annotated[
        str, typer.Option("--level", help="answer (each answer) | bundle (one holistic call per bundle)")
    ] = "answer",
    from_run: Annotated[
        str | None,
        typer.Option("--from-run", help="--level bundle: the per-answer run whose verdicts are the evidence."),
    ] = None,
    bundle_by: Annotated[
        list[str] | None, typer.Option("--bundle-by", help="--level bundle: metadata field to group by (repeatable).")
    ] = None,
    category_field: Annotated[
        str, typer.Option("--category-field", help="--level bundle: metadata field of an answer's category.")
    ] = "category",
    db: DbOption = None,
) -> None:
    """Judge a dataset with one harness; every call and verdict is stored as it finishes. With
    ``--level bundle``, one holistic call per bundle (or per dimension per bundle under ``split``) from
    the evidence of a per-answer run (``--from-run``, ``--bundle-by``)."""

    from judgekit import prompt_templates, prompts, runner
    from judgekit.harness import parse_harness

    template, template_name = "", ""
    if prompt_template == prompt_templates.BUILTIN:
        template_name = prompt_templates.BUILTIN
    elif prompt_template:
        shape = prompt_templates.BUNDLE if level == "bundle" else prompt_templates.ANSWER
        template, template_name = prompt_templates.load_template_file(prompt_template, shape)
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
        level=level,
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
    if level not in ("answer", "bundle"):
        raise UsageError(f"--level must be answer or bundle, not {level!r}")
    if level == "bundle":
        from judgekit.cli_bundle import create_bundle_run

        run_names = [create_bundle_run(
            db, spec=spec, judge=judge, dataset=dataset, rubric=rubric, from_run=from_run, bundle_by=bundle_by,
            category_field=category_field, name=name,
            answer_only={"--limit": limit, "--sample": sample, "--batch": use_batch,
                         "--few-shot": few_shot, "--repeat": repeat > 1},
        )]
        prompt_label = prompts.prompt_label(spec)
    else:
        if from_run or bundle_by:
            raise UsageError("--from-run and --bundle-by apply to --level bundle")
        if use_batch and repeat > 1:
            raise UsageError("--repeat and --batch together: send repeats live")
        with transaction(db) as s:
            run_names = runner.create_repeats(
                s,
                repeat=repeat,
                dataset=dataset,
                rubric=rubric,
                harness=spec,
                judge=judge,
                limit=limit,
                sample=sample,
                seed=seed,
                name=name,
                use_cache=not no_cache,
            )
            prompt_label = prompts.prompt_label(store.get_run(s, run_names[0]).harness)
    failed = False
    for i, run_name in enumerate(run_names, start=1):
        typer.echo(
            f"run {run_name}: {'bundle:' if level == 'bundle' else ''}{spec.label} on {dataset} × {rubric} "
            f"with {model}, prompt {prompt_label}"
            + (f" at temperature {temperature:g}" if temperature else "")
            + (f" (repeat {i} of {repeat})" if repeat > 1 else "")
            + (" (simulated judge)" if kind == "simulated" else ""),
            err=True,
        )
        try:
            execute_run(db, run_name, concurrency, breaker, use_batch=use_batch, poll_interval=poll_interval)
        except typer.Exit as e:  # report every repeat, then exit non-zero if any did not finish
            if e.exit_code != 1:
                raise
            failed = True
    if failed:
        raise typer.Exit(1)


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
    execute_run(db, run_ref, concurrency, breaker, poll_interval=poll_interval)


@command("sim-judge")
def sim_judge(
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8765,
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    conditioning: Annotated[
        float, typer.Option(help="G: pull of each field toward fields already emitted.")
    ] = 1.5,
    accuracy: Annotated[float, typer.Option(help="Per-criterion accuracy against the planted truth.")] = 0.9,
    criterion_accuracy: Annotated[
        list[str] | None,
        typer.Option("--criterion-accuracy", help="KEY=A: another accuracy for one criterion (repeatable)."),
    ] = None,
    matrix: Annotated[
        str,
        typer.Option(help="Pair-specific conditioning: demo (the demo rubric's stated matrix), uniform (every "
                     "pair pulls with G), or a YAML/JSON file of [a, b, multiplier] rows."),
    ] = "demo",
    seed: Annotated[int, typer.Option()] = 0,
    latency_ms: Annotated[float, typer.Option("--latency-ms", help="Added latency per reply.")] = 0.0,
    db: DbOption = None,
) -> None:
    """Serve the SIMULATED judge (known, tunable conditioning) over an OpenAI-compatible API; truth from --db."""
    from judgekit import config, simjudge

    store.engine_for(db)
    params = simjudge.SimParams(
        accuracy=accuracy, conditioning=conditioning, seed=seed, latency_ms=latency_ms,
        matrix=simjudge.load_matrix(matrix), criterion_accuracy=simjudge.parse_accuracies(criterion_accuracy or []),
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
    auth_choice: Annotated[str, typer.Option(
        "--auth", help="Sign-in: auto (none on loopback; beyond it, every method configured — refused "
        "if none is), token, oidc, or none (loopback only). See the README, Teams.")] = "auto",
    team_file: Annotated[Path | None, typer.Option(
        "--team-file", help="Members, roles, token hashes (default: $JUDGEKIT_TEAM_FILE, else ./team.toml).")] = None,
    secrets: Annotated[Path | None, typer.Option(
        "--secrets", help="Streamlit secrets file with the OIDC [auth] section (default: Streamlit's "
        "~/.streamlit/ and ./.streamlit/secrets.toml).")] = None,
    db: DbOption = None,
) -> None:
    """Start the dashboard (Streamlit) on http://HOST:PORT; beyond loopback, only for signed-in members."""
    import os

    from judgekit import auth, config

    team = config.team_file(team_file).resolve()
    methods = auth.check_server(host, auth_choice, team, [secrets] if secrets else auth.default_secrets_files())
    env = dict(os.environ, JUDGEKIT_AUTH=auth_choice, JUDGEKIT_TEAM_FILE=str(team))
    if db:
        env["JUDGEKIT_DB_URL"] = db
    store.engine_for(db)  # migrate before the first page renders
    store.dispose_engines()
    typer.echo(f"sign-in: {' and '.join(sorted(methods)) if methods else 'none (this machine only)'}", err=True)
    cmd = config.app_command(host, port, secrets_file=secrets)
    # become the server (exec, not a child): a signal to this process then reaches Streamlit itself,
    # and no orphaned server is left behind when `judgekit app` is stopped
    os.execve(cmd[0], cmd, env)


from judgekit.cli_report import export_report_cmd, report_app  # noqa: E402

app.add_typer(report_app, name="report")
app.command("export-report")(export_report_cmd)

from judgekit.cli_label import label_set_app  # noqa: E402

app.add_typer(label_set_app, name="label-set")

from judgekit.cli_scale import critique_cmd, report_ab, report_ko  # noqa: E402

app.command("critique")(critique_cmd)
report_app.command("ko")(report_ko)
report_app.command("ab")(report_ab)

from judgekit.cli_check import check_cmd  # noqa: E402

app.command("check")(check_cmd)

from judgekit.cli_team import team_app  # noqa: E402

app.add_typer(team_app, name="team")

from judgekit.cli_bundle import bundles_cmd  # noqa: E402

app.command("bundles")(bundles_cmd)

from judgekit.cli_noise import health_cmd, plan_groups_cmd  # noqa: E402

app.command("plan-groups")(plan_groups_cmd)
report_app.command("health")(health_cmd)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
