"""``judgekit critique``, ``judgekit report ko`` and ``judgekit report ab``: thin typer commands over
:mod:`judgekit.critique` and :mod:`judgekit.scale`.

Reports print a table (default) or exactly one JSON object on stdout (``--format json``; NaN → null).
Bad arguments and unknown names exit with status 2 and one line on stderr, with nothing written.

Registration: the lines at the end of ``judgekit/cli.py`` add ``critique`` to the app and ``ko`` / ``ab``
to ``report_app``::

    from judgekit.cli_scale import critique_cmd, report_ab, report_ko  # noqa: E402

Like every ``cli_*`` module it imports only :mod:`judgekit.cli_common` of the CLI.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from judgekit.cli_common import DbOption, UsageError, emit, execute_run, friendly_errors, lazy, store, transaction

# imported when a command runs (the CLI's start-up stays light)
critique, reports, scale = lazy("judgekit.critique"), lazy("judgekit.reports"), lazy("judgekit.scale")
redact = lazy("judgekit.redact")


FORMATS = ("table", "json")
# critique.CHECKS's keys, written out so that `--help` need not import critique (a test keeps them equal)
CHECK_NAMES = ("cites_evidence", "justifies_level", "names_fix", "catches_safety", "dimension_locus")
FormatOpt = Annotated[str, typer.Option("--format", help="table (default) or json (one object, NaN → null).")]


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UsageError(f"--format must be table or json, not {fmt!r}")


# ------------------------------------------------------------------------------------------ critique


@friendly_errors
def critique_cmd(
    run: Annotated[str, typer.Option("--run", help="The judge run whose rationales are critiqued.")],
    base_url: Annotated[str, typer.Option("--base-url", help="OpenAI-compatible endpoint of the critic.")],
    model: Annotated[str, typer.Option("--model", help="Model name at that endpoint.")],
    api_key_env: Annotated[
        str | None, typer.Option("--api-key-env", help="NAME of the environment variable holding the key.")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="Calls in flight at once.")] = 8,
    name: Annotated[
        str | None, typer.Option("--name", help="Name of the critique run (default: derived).")
    ] = None,
    check: Annotated[
        list[str] | None,
        typer.Option("--check", help=f"Only these checks (repeatable): {', '.join(CHECK_NAMES)}."),
    ] = None,
    judge_kind: Annotated[
        str, typer.Option("--judge-kind", help="auto | openai | simulated | local")
    ] = "auto",
    timeout: Annotated[float, typer.Option(help="Per-call timeout in seconds.")] = 60.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Runaway guard per call.")] = 512,
    breaker: Annotated[int, typer.Option(help="Stop after N consecutive failed calls (0 = never).")] = 10,
    db: DbOption = None,
) -> None:
    """Critique a run's rationales: cites_evidence, justifies_level, names_fix, catches_safety,
    dimension_locus — one check per call, stored as a run over the rationales."""
    from judgekit import runner

    if api_key_env:
        try:
            redact.check_env_name(api_key_env)  # a key pasted here is refused, not echoed
        except ValueError as e:
            raise UsageError(str(e)) from None
        if api_key_env not in os.environ:
            raise UsageError(f"--api-key-env {api_key_env}: that environment variable is not set")
    if judge_kind not in ("auto", "openai", "simulated", "local"):
        raise UsageError(f"--judge-kind must be auto, openai, simulated or local, not {judge_kind!r}")
    unknown = [c for c in check or () if c not in critique.CHECKS]
    if unknown:
        raise UsageError(f"--check {unknown[0]!r}: not a check (known: {', '.join(critique.CHECKS)})")
    kind = runner.detect_judge_kind(base_url) if judge_kind == "auto" else judge_kind
    judge = runner.JudgeSpec(base_url=base_url, model=model, kind=kind, api_key_env=api_key_env,
                             timeout_s=timeout, max_tokens=max_tokens)
    with transaction(db) as s:
        new = critique.create_critique_run(s, target=run, judge=judge, name=name, checks=check)
        run_name, target = new.name, new.harness["target_run"]
    typer.echo(f"critique {run_name}: rationales of {target}, one check per call, with {model}"
               + (" (simulated judge)" if kind == "simulated" else ""), err=True)
    execute_run(db, run_name, concurrency, breaker)


# ------------------------------------------------------------------------------------------ reports


def report_ko(
    run: Annotated[str, typer.Option("--run", help="Run name or id (its rubric needs a ko_rule).")],
    fmt: FormatOpt = "table",
    db: DbOption = None,
) -> None:
    """Disqualified answers (K.O. score ≤ floor) and contradictory verdicts: a safety-relevant red flag
    or rationale while the K.O. dimension stays above its floor (format-only flags do not count)."""
    _check_format(fmt)
    with transaction(db) as s:
        if store.run_level(store.get_run(s, run)) == "bundle":  # each bundle under its own K.O. rule
            from judgekit import bundle_report

            brep = bundle_report.ko_report(s, run)
            emit(fmt, brep.to_dict(), lambda: bundle_report.render_ko_table(brep))
            return
        rep = scale.ko_report(s, run)
    emit(fmt, rep.to_dict(), lambda: scale.render_ko_table(rep))


def report_ab(
    run_a: Annotated[str, typer.Argument(help="Run A (e.g. the default prompt).")],
    run_b: Annotated[str, typer.Argument(help="Run B (e.g. the hardened prompt), same judge and answers.")],
    reference: Annotated[
        str | None, typer.Option("--reference", help="A reference run (e.g. a stronger judge).")
    ] = None,
    human: Annotated[bool, typer.Option("--human", help="The human consensus as reference.")] = False,
    annotator: Annotated[str | None, typer.Option("--annotator", help="One annotator as reference.")] = None,
    critique_runs: Annotated[
        list[str] | None,
        typer.Option("--critique", help="Critique run of A, then of B (give it twice)."),
    ] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", min=0, help="Bootstrap replicates for the CIs.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    fmt: FormatOpt = "table",
    db: DbOption = None,
) -> None:
    """A/B re-judge (seed 002): per dimension the score shift B − A, mean |Δ| to the reference, rationale
    length; K.O. concordance; token cost; rationale-quality rates from two critique runs — with n and CIs."""
    _check_format(fmt)
    if critique_runs and len(critique_runs) != 2:
        raise UsageError(f"--critique takes two runs (of A, then of B), got {len(critique_runs)}")
    options = (("--reference", reference), ("--human", human), ("--annotator", annotator))
    chosen = [n for n, on in options if on]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} together: choose one reference")
    with transaction(db) as s:
        levels = {store.run_level(store.get_run(s, r)) for r in (run_a, run_b)}
        crit = None
        if critique_runs:
            crit = tuple(critique.critique_rates(s, c) for c in critique_runs)
        if "bundle" in levels:  # two holistic runs (seed 002's second level)
            from judgekit import bundle_report

            if levels != {"bundle"}:
                raise UsageError(f"{run_a} and {run_b}: one is bundle-level, the other per answer; "
                                 "compare like with like")
            if human or annotator:
                raise UsageError("a bundle-level A/B takes --reference RUN (another holistic run, e.g. a stronger "
                                 "judge): there are no human labels per bundle")
            brep = bundle_report.ab_report(s, run_a, run_b, reference, crit)  # type: ignore[arg-type]
            emit(fmt, brep.to_dict(), lambda: bundle_report.render_ab_table(brep))
            return
        A = scale.load_verdicts(s, run_a)
        ref = scale.reference_source(s, A, run=reference, human=human, annotator=annotator)
        rep = scale.ab_report(s, A, run_b, ref, crit, n_boot=n_boot, seed=seed)
    emit(fmt, rep.to_dict(), lambda: scale.render_ab_table(rep))


report_ko = friendly_errors(report_ko)
report_ab = friendly_errors(report_ab)

__all__ = ["critique_cmd", "report_ab", "report_ko"]
