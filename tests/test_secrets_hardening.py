"""Secrets, second round: a provider's masked echo of the key (``canaryKE****8wT4``) reaches no row, output or
export; a key pasted as the *name* of its variable is never repeated; credentials in a base URL are refused
(and an old row holding some is shown redacted); untrusted text in the Markdown export cannot become a link
or an image.

Real parts: the CLI, the scripted OpenAI-compatible server over HTTP, the real SQLite file; the Markdown
export is rendered by a real CommonMark renderer (markdown-it-py) to check what a viewer would show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import imports, runner, store
from judgekit.harness import parse_harness
from tests.scripted_server import ScriptedServer, status

CANARY = "canaryKEY7f3a9c0d2e4b6a8c1f3e5d7b9a0c8wT4"
MASKED = "canaryKE****8wT4"


@pytest.fixture
def demo(engine):
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=20)
    return engine


def fragments_in(text: str) -> list[str]:
    """Pieces of the canary key present in ``text`` (its masked echo's visible ends included)."""
    return [f for f in (CANARY, MASKED, "canaryKE", "8wT4", CANARY[8:20]) if f in text]


def test_a_masked_key_echoed_by_a_401_is_in_no_row_output_or_export(cli, demo, db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("JK_CANARY_KEY", CANARY)
    message = f"Incorrect API key provided: {MASKED}. You can find your API key at https://platform.example/keys."
    with ScriptedServer(default=status(401, message=message)) as srv:
        run = cli("run", "--dataset", "demo", "--rubric", "demo", "--harness", "single", "--base-url", srv.base_url,
                  "--model", "gpt-4o-mini", "--api-key-env", "JK_CANARY_KEY", "--limit", "3", "--name", "keyed",
                  "--judge-kind", "openai", "--concurrency", "1", "--breaker", "2")
        resume = cli("resume", "keyed", "--breaker", "2")
        sent = [r.headers.get("authorization") for r in srv.requests]
    assert sent and all(h == f"Bearer {CANARY}" for h in sent)  # the key was used …
    outputs = [run.stdout + run.stderr, resume.stdout + resume.stderr]
    assert "HTTP 401" in outputs[0]  # … the error is shown …
    for args in (["export-report", "--out", str(tmp_path / "r.html"), "--run", "keyed", "--no-human"],
                 ["export-report", "--out", str(tmp_path / "r.md"), "--run", "keyed", "--no-human"],
                 ["report", "runs", "--format", "json"], ["list"]):
        result = cli(*args)
        outputs.append(result.stdout + result.stderr)
    for text in outputs:  # … but no fragment of the key anywhere
        assert fragments_in(text) == [], text
    with Session(demo) as s:
        errors = s.scalars(select(store.Call.error)).all()
        messages = s.scalars(select(store.Run.message)).all()
    assert errors and all("HTTP 401" in e for e in errors)
    for text in [*errors, *messages]:
        assert fragments_in(text or "") == []
    for path in [tmp_path / "r.html", tmp_path / "r.md",
                 *Path(db_url.removeprefix("sqlite:///")).parent.glob("judgekit.sqlite*")]:
        data = path.read_bytes()
        assert b"canaryKE" not in data and b"8wT4" not in data, path


@pytest.mark.parametrize("pasted", ["sk-proj-Zx81Lq0PaV7mWn3Rt5Yb", "AbCdEfGh1234567890XyZwQ9",
                                    "Bearer abc.def.ghi", "my key=123",
                                    "a3f9c2e17b4d4e0c9a8b7c6d5e4f3a2b",  # a 32-hex key (Azure's shape)
                                    "AKIAIOSFODNN7EXAMPLE",  # an AWS access key id
                                    "QWERTY7UIOP4ASDF9GHJKL"])  # upper case and digits, no separator
def test_a_key_passed_as_the_variable_name_is_never_echoed(cli, demo, pasted):
    result = cli("run", "--dataset", "demo", "--rubric", "demo", "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m", "--api-key-env", pasted, "--judge-kind", "openai")
    assert result.exit_code == 2
    assert "NAME of an environment variable" in result.stderr
    assert pasted not in result.stderr + result.stdout
    assert all(part not in result.stderr for part in pasted.split() if len(part) > 3)
    with Session(demo) as s:
        assert store.row_counts(s)["judges"] == 0  # nothing stored
    with pytest.raises(ValueError) as err, Session(demo) as s:  # the Run page's path: create_run
        runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness("single"),
                          judge=runner.JudgeSpec(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=pasted))
    assert pasted not in str(err.value)


@pytest.mark.parametrize("url", ["https://ann:s3cretPassw0rd@127.0.0.1:9/v1",
                                 "https://127.0.0.1:9/v1?api-key=s3cretPassw0rd",
                                 "https://127.0.0.1:9/v1?pwd=s3cretPassw0rd",
                                 "https://127.0.0.1:9/v1?x=1;api_key=s3cretPassw0rd",
                                 "https://127.0.0.1:9/v1?apikeys3cretPassw0rd",
                                 "https://127.0.0.1:9/v1#token=s3cretPassw0rd"])
def test_credentials_in_a_base_url_are_refused_with_a_pointer_to_env_vars(cli, demo, url):
    result = cli("run", "--dataset", "demo", "--rubric", "demo", "--base-url", url, "--model", "m",
                 "--judge-kind", "openai")
    assert result.exit_code == 2
    assert "environment variable" in result.stderr and "--api-key-env" in result.stderr
    assert "s3cretPassw0rd" not in result.stderr + result.stdout
    with Session(demo) as s:
        assert store.row_counts(s)["judges"] == 0


@pytest.mark.parametrize("url", ["https:/ann:s3cretPassw0rd@127.0.0.1:9/v1", "ann:s3cretPassw0rd@127.0.0.1:9/v1",
                                 "ftp://127.0.0.1:9/v1"])
def test_a_base_url_that_is_not_http_with_a_host_is_refused_without_echoing_it(cli, demo, url):
    result = cli("run", "--dataset", "demo", "--rubric", "demo", "--base-url", url, "--model", "m",
                 "--judge-kind", "openai")
    assert result.exit_code == 2 and "not an http(s) address with a host" in result.stderr
    assert "s3cretPassw0rd" not in result.stderr + result.stdout
    with Session(demo) as s:
        assert store.row_counts(s)["judges"] == 0


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "AZURE_OPENAI_KEY_2", "JK_TEST_KEY", "HF_TOKEN",
                                  "OPENAI_API_KEY_20250101"])
def test_ordinary_variable_names_are_not_taken_for_keys(name):
    from judgekit import redact

    assert redact.check_env_name(name) == name


def test_a_judge_stored_with_credentials_before_is_shown_redacted(cli, demo, tmp_path):
    with Session(demo) as s, s.begin():  # a row written by an older version
        judge = store.get_or_create_judge(s, kind="openai", name="old", base_url="https://ann:s3cretPassw0rd@h/v1",
                                          model="gpt-4o-mini")
        ds, rubric = store.get_dataset(s, "demo"), store.get_rubric_row(s, "demo")
        store.create_run(s, name="old-run", dataset=ds, rubric=rubric, judge=judge, harness={"kind": "single"},
                         example_ids=list(store.example_ids(s, ds.id).values())[:2])
    shown = cli("list").stdout + cli("report", "runs", "--format", "json").stdout
    assert cli("export-report", "--out", str(tmp_path / "r.html"), "--run", "old-run", "--no-human").exit_code == 0
    shown += (tmp_path / "r.html").read_text()
    assert "gpt-4o-mini @ https://***@h/v1" in shown
    assert "s3cretPassw0rd" not in shown


def test_markdown_export_turns_no_untrusted_text_into_a_link_or_an_image(cli, demo, tmp_path):
    import cmarkgfm  # GitHub's renderer: it also links bare addresses, _https://… and e-mail addresses
    from markdown_it import MarkdownIt

    name = ("[click me](https://evil.example/phish) ![p](https://evil.example/pixel.png) <b>x</b> www.evil.example"
            " _https://evil.example/x ann@evil.example _www.evil.example")
    lines = [{"example_id": f"q-{i:04d}", "criterion": "answers_question", "verdict": i % 2 == 0,
              "rationale": "[r](javascript:alert(1))"} for i in range(1, 11)]
    lines += [{"example_id": f"q-{i:04d}", "criterion": "cites_source", "verdict": i % 3 == 0}
              for i in range(1, 11)]
    (tmp_path / "run.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert cli("import-run", tmp_path / "run.jsonl", "--dataset", "demo", "--rubric", "demo",
               "--name", name).exit_code == 0
    result = cli("export-report", "--out", str(tmp_path / "r.md"), "--run", name, "--no-human")
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "r.md").read_text()
    for html in (MarkdownIt("commonmark").enable("table").render(text), cmarkgfm.github_flavored_markdown_to_html(text)):
        assert "<a " not in html and "<img" not in html and "<b>" not in html, html
        assert "click me" in html and "ann@\u200bevil.example" in html  # the text is all there, inert
