"""User prompt templates: validation before any call, the shared-prefix layout, what the endpoint receives
(real HTTP, the simulated judge), the rubric-level template, and a Prompt A/B of two templates."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.orm import Session

from judgekit import imports, prompt_templates, prompts, runner, simjudge, store
from judgekit.datasets import InputError
from judgekit.harness import parse_harness
from judgekit.openai_server import ServerThread
from judgekit.rubric import Criterion

TEMPLATE = """{% set system %}You grade a file-sync helpdesk bot.{% endset %}
Customer asked: {{ question }}
Knowledge base: {{ context }}
Bot replied: {{ answer }}

{{ criteria }}
Reply now."""

CRITERIA = (Criterion("answers_question", "Does it answer?"), Criterion("concise", "Is it concise?"))


def compile_error(source: str) -> str:
    with pytest.raises(InputError) as e:
        prompt_templates.compile_template(source, "judge.j2")
    return str(e.value)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ answer }}\n\n{{ rubric_text }}\n{{ criteria }}",
         "judge.j2:3: field 'rubric_text': unknown template field 'rubric_text' (fields: question, context, answer, criteria)"),
        ("Answer: {{ answer }}", "judge.j2: field 'criteria': the template has no criteria block"),
        ("{{ answer }\n{{ criteria }}", "judge.j2:1: template syntax error: unexpected '}'"),
        ("{% for x in answer %}\n{{ criteria }}", "judge.j2:2: template syntax error"),
        ("{{ answer.__class__.__mro__ }}{{ criteria }}", "judge.j2:1: unsafe: attribute '__mro__' is not allowed"),
        ("{{ answer|attr('__class__') }}{{ criteria }}", "judge.j2:1: unsafe: '__class__' names a Python internal"),
        ("{{ cycler.__init__.__globals__ }}{{ answer }}{{ criteria }}", "unsafe: attribute '__globals__'"),
        ("{{ 'x' * 10**8 }}{{ answer }}{{ criteria }}", "unsafe: repeating a value 100000000 times"),
        ("{{ (answer|length) ** 999 }}{{ answer }}{{ criteria }}", "unsafe: exponent 999 is too large"),
        ("{{ 'ab' * 9000000 }}{{ answer }}{{ criteria }}", "unsafe: repeating a value 9000000 times is too large"),
        ("{% include 'other.j2' %}{{ answer }}{{ criteria }}", "cannot load other templates"),
        ("{{ answer }}{{ criteria }}{{ criteria }}", "{{ criteria }} must appear exactly once"),
        ("{{ answer }}{{ criteria | upper }}", "{{ criteria }} must appear exactly once"),
        ("{{ answer }}{% if question %}{{ criteria }}{% endif %}", "outside conditions, loops and blocks"),
        ("{{ question }}\n{{ criteria }}\n{{ answer }}", "judge.j2:3: field 'answer': {{ answer }} comes after {{ criteria }}"),
        ("{{ question }}\n{{ criteria }}", "the template never shows the answer"),
        ("{% set system %}{{ criteria }}{% endset %}{{ answer }}", "{{ criteria }} must appear exactly once"),
        ("   ", "the prompt template is empty"),
    ],
)
def test_bad_templates_are_one_clear_error(source, expected):
    message = compile_error(source)
    assert expected in message
    assert "\n" not in message


def test_render_splits_at_the_criteria_block_and_keeps_the_persona():
    t = prompt_templates.compile_template(TEMPLATE, "judge.j2")
    r = t.render("Where is my file?", "[KB-1] Trash", "Open Trash.")
    assert r.system == "You grade a file-sync helpdesk bot."
    assert r.before == "\nCustomer asked: Where is my file?\nKnowledge base: [KB-1] Trash\nBot replied: Open Trash.\n\n"
    assert r.after == "\nReply now."


@settings(max_examples=60, deadline=None)
@given(answer=st.text(min_size=1, max_size=200))
def test_field_values_are_inserted_verbatim_never_interpreted(answer):
    """An answer containing template syntax (or anything else) reaches the prompt byte for byte."""
    harness = parse_harness("single", prompt_template=TEMPLATE, prompt_template_name="judge.j2")
    text = prompts.ExampleText("q", "c", answer + " {{ criteria }} {% raw %} {{ 7*7 }}")
    user = prompts.build_messages(text, CRITERIA, harness)[1]["content"]
    assert f"Bot replied: {text.answer}\n\n## Criteria\n" in user
    assert user.count("## Criteria\n") == 1 + text.answer.count("## Criteria\n")


def test_split_calls_of_an_example_share_a_byte_identical_prefix_and_end_with_their_criterion():
    harness = parse_harness("split", prompt_template=TEMPLATE, prompt_template_name="judge.j2")
    text = prompts.ExampleText("Where is my file?", "[KB-1] Trash", "Open Trash.", key="q-1")
    shot = prompts.Shot(prompts.ExampleText("Other?", "", "Other answer."), (("answers_question", 1),))
    users = [prompts.build_messages(text, [c], harness, None, [shot] if c.key == "answers_question" else [])[1]
             for c in CRITERIA]
    prefix = "\nCustomer asked: Where is my file?\nKnowledge base: [KB-1] Trash\nBot replied: Open Trash.\n\n"
    assert all(u["content"].startswith(prefix) for u in users)
    assert users[0]["content"][len(prefix):].startswith("## Labelled examples\n")
    assert users[1]["content"][len(prefix):].startswith("## Criteria\n- concise:")
    assert all(u["content"].endswith("Reply now.") for u in users)


def test_template_keeps_judgekit_reply_instructions_in_the_system_message():
    harness = parse_harness("single", order="reasoning_first", independence_note=True, prompt_variant="hardened",
                            prompt_template=TEMPLATE, prompt_template_name="judge.j2")
    system = prompts.build_messages(prompts.ExampleText("q", "c", "a"), CRITERIA, harness)[0]["content"]
    assert system.startswith("You grade a file-sync helpdesk bot.\n\n")
    assert prompts.system_features(system) == ("reasoning_first", "hardened", True)
    assert prompts.BASE_SYSTEM not in system


def test_template_refuses_the_criterion_first_layout():
    with pytest.raises(ValueError, match="keeps the shared-prefix layout"):
        parse_harness("single", layout="criterion_first", prompt_template=TEMPLATE)


# ----------------------------------------------------------------------------- through the CLI


def write(tmp_path, text: str, name: str = "judge.j2"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_cli_refuses_a_bad_template_before_any_call_and_writes_nothing(cli, demo, engine, tmp_path):
    srv = simjudge.start_in_thread(None)
    try:
        bad = write(tmp_path, "Answer: {{ answer }}\n{{ score_guide }}\n{{ criteria }}")
        result = cli("run", "--dataset", "demo", "--rubric", "demo", "--base-url", srv.base_url, "--model",
                     simjudge.SIM_MODEL, "--prompt-template", bad)
        assert result.exit_code == 2
        assert result.stderr.strip() == (
            f"error: {bad}:2: field 'score_guide': unknown template field 'score_guide' "
            "(fields: question, context, answer, criteria)")
        assert srv.stats.requests == 0
    finally:
        srv.stop()
    with Session(engine) as s:
        assert store.row_counts(s)["runs"] == 0


def test_the_endpoint_receives_the_rendered_template_and_the_run_stores_it(cli, demo, engine, db_url, tmp_path):
    path = write(tmp_path, TEMPLATE)
    with ServerThread(simjudge.SimJudge(db_url), record=True, model=simjudge.SIM_MODEL,
                      owned_by=simjudge.SIM_OWNER) as srv:
        result = cli("run", "--dataset", "demo", "--rubric", "demo", "--harness", "split", "--limit", "3",
                     "--base-url", srv.base_url, "--model", simjudge.SIM_MODEL, "--prompt-template", path,
                     "--name", "templated")
        assert result.exit_code == 0, result.stderr
        chats = [r.body for r in srv.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 3 * 6
    with Session(engine) as s:
        run = store.get_run(s, "templated")
        assert run.harness["prompt_template"] == TEMPLATE
        assert run.harness["prompt_template_name"] == "judge.j2"
        rubric = store.load_rubric(s, "demo")
        examples = {e.ext_id: e for e in s.scalars(select(store.Example).where(store.Example.id.in_(
            store.run_example_ids(s, run.id))))}
        scored = s.scalar(select(store.func.count()).select_from(store.Verdict).where(
            store.Verdict.run_id == run.id, store.Verdict.value.is_not(None)))
    assert scored == 3 * 6  # the simulated judge read every templated request
    template = prompt_templates.compile_template(TEMPLATE)
    for body in chats:
        user = body["messages"][1]["content"]
        key = prompts.criteria_keys(user[user.rfind("\n## Criteria\n") + 1:])
        ex = next(e for e in examples.values() if f"Bot replied: {e.answer.strip()}" in user)
        r = template.render(ex.question or "", ex.context or "", ex.answer)
        crit = rubric.subset(list(key))
        assert user == r.before + prompts.criteria_block(crit, "verdict_first", rubric.ko_rule) + r.after
        assert body["messages"][0]["content"].startswith("You grade a file-sync helpdesk bot.\n\n")
        assert body["response_format"]["type"] in ("json_schema", "json_object")


def test_rubric_template_is_validated_on_import_used_by_runs_and_overridable(cli, demo, engine, db_url, tmp_path):
    body = "\n".join("  " + line for line in TEMPLATE.splitlines())
    rubric = write(tmp_path, "name: own\ncriteria:\n  - key: answers_question\n    question: Does it answer?\n"
                   f"prompt_template: |\n{body}\n", "own.yaml")
    broken = write(tmp_path, "name: broken\ncriteria:\n  - key: a\n    question: A?\n"
                   "prompt_template: |\n  {{ answer }}\n  {{ tone }}\n  {{ criteria }}\n", "broken.yaml")
    result = cli("import-rubric", broken)
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: {broken}:1: field 'prompt_template': unknown template field 'tone' "
                                     "(fields: question, context, answer, criteria) (template line 2)")
    assert cli("import-rubric", rubric).exit_code == 0
    srv = simjudge.start_in_thread(db_url)
    try:
        for name, extra in (("from-rubric", []), ("builtin", ["--prompt-template", "builtin"])):
            result = cli("run", "--dataset", "demo", "--rubric", "own", "--limit", "2", "--base-url", srv.base_url,
                         "--model", simjudge.SIM_MODEL, "--name", name, *extra)
            assert result.exit_code == 0, result.stderr
    finally:
        srv.stop()
    with Session(engine) as s:
        assert store.get_run(s, "from-rubric").harness["prompt_template"] == TEMPLATE + "\n"
        assert store.get_run(s, "from-rubric").harness["prompt_template_name"] == "rubric own"
        assert store.get_run(s, "builtin").harness["prompt_template"] == ""
        sent = s.scalars(select(store.Call.request).join(store.Run).where(store.Run.name == "builtin")).first()
        assert sent["messages"][1]["content"].startswith("## Context\n")
        assert store.load_rubric(s, "own").prompt_template == TEMPLATE + "\n"


def test_prompt_ab_of_two_templates_on_the_same_answers(cli, engine, db_url, tmp_path):
    """Two templates, same judge, same sample: `report ab` compares them; the simulated judge ignores the
    wording (stated in its model), so every score shift is exactly zero."""
    with Session(engine) as s, s.begin():
        imports.load_demo(s, n_examples=40)
    a = write(tmp_path, TEMPLATE, "a.j2")
    b = write(tmp_path, "Q: {{ question }}\nA: {{ answer }}\n{{ criteria }}", "b.j2")
    srv = simjudge.start_in_thread(db_url)
    try:
        for name, path in (("tmpl-a", a), ("tmpl-b", b)):
            result = cli("run", "--dataset", "demo", "--rubric", "demo-scale", "--sample", "30", "--seed", "3",
                         "--base-url", srv.base_url, "--model", simjudge.SIM_MODEL, "--prompt-template", path,
                         "--name", name)
            assert result.exit_code == 0, result.stderr
    finally:
        srv.stop()
    result = cli("report", "ab", "tmpl-a", "tmpl-b", "--annotator", "reference", "--n-boot", "200", "--format", "json")
    assert result.exit_code == 0, result.stderr
    rep = json.loads(result.stdout)
    assert rep["n"] == 30
    assert rep["variant"]["a"].startswith("default + template a.j2 (")
    assert rep["variant"]["b"].startswith("default + template b.j2 (")
    assert not any("both runs use prompt variant" in w for w in rep["warnings"])
    assert all(d["shift"]["value"] == 0.0 for d in rep["dimensions"].values())


def test_rerun_keeps_answers_and_judge_and_changes_only_the_prompt(demo, engine, db_url):
    srv = simjudge.start_in_thread(db_url)
    try:
        with Session(engine) as s, s.begin():
            base = runner.create_run(s, dataset="demo", rubric="demo", harness=parse_harness("single"),
                                     judge=runner.JudgeSpec(srv.base_url, simjudge.SIM_MODEL, kind="simulated"),
                                     sample=12, seed=5, name="a")
            b = runner.create_rerun(s, "a", prompt_template=TEMPLATE, prompt_template_name="judge.j2")
            assert b.name == "a-b"
            assert store.run_example_ids(s, b.id) == store.run_example_ids(s, base.id)
            assert b.judge_id == base.judge_id
            assert b.harness == {**base.harness, "prompt_template": TEMPLATE, "prompt_template_name": "judge.j2"}
            with pytest.raises(InputError, match="no criteria block"):
                runner.create_rerun(s, "a", prompt_template="{{ answer }}")
    finally:
        srv.stop()
