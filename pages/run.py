"""Run: pick dataset, rubric, judge and harness variants; test the endpoint; see the cost before starting;
watch runs live. The form keeps its values when you leave the page."""

import pandas as pd
import streamlit as st

from judgekit import (
    actions,
    auth,
    critique,
    endpoint_check,
    harness,
    jobs,
    prompt_templates,
    prompts,
    reports,
    runner,
    signin,
    store,
    ui,
)
from judgekit.client import JudgeConfig
from judgekit.localjudge import LOCAL_JUDGE_NOTE, LOCAL_MODEL_NAME
from judgekit.webapp import db_url, empty_state, keep, local_judge_base_url, session, sim_judge_base_url

TEMPLATE_BUILTIN, TEMPLATE_RUBRIC, TEMPLATE_OWN = "judgekit's prompt", "the rubric's template", "my template"
EXAMPLE_TEMPLATE = """{% set system %}You review answers of a customer-support assistant.{% endset %}
The customer asked:
{{ question }}

What the assistant had retrieved:
{{ context }}

The assistant answered:
{{ answer }}

{{ criteria }}
"""


def prompt_options(rubric_name: str) -> dict[str, tuple[str, str]]:
    """The prompt choices for this rubric → (template text, template name) as the harness takes them."""
    with session() as s:
        own = store.load_rubric(s, rubric_name).prompt_template
    if own:
        return {TEMPLATE_RUBRIC: (own, f"rubric {rubric_name}"), TEMPLATE_BUILTIN: ("", prompt_templates.BUILTIN),
                TEMPLATE_OWN: ("", "")}
    return {TEMPLATE_BUILTIN: ("", ""), TEMPLATE_OWN: ("", "")}


who = signin.page(
    "Run",
    "Run several harnesses over the same sampled examples, then compare them on Associations, Examples "
    "and Compare.",
)

with session() as s:
    datasets = store.list_datasets(s)
    rubrics = [r for r in store.list_rubrics(s) if not critique.is_critique_rubric(r["name"])]
    used = [r["rubric"] for r in store.list_runs(s)]
if not datasets or not rubrics:
    empty_state(
        "Nothing to judge yet: load the demo on the Workspace page, or upload a dataset and a rubric "
        "on the Data page."
    )
    st.stop()

left, right = st.columns(2)
with left:
    dataset = ui.pick("Dataset", [d["name"] for d in datasets], key="run_dataset", param="dataset")
with right:
    names = [r["name"] for r in rubrics]
    keep("run_rubric", next((u for u in reversed(used) if u in names), names[0]))  # the rubric last run
    rubric = ui.pick("Rubric", names, key="run_rubric")
n_examples = next(d["examples"] for d in datasets if d["name"] == dataset)
with session() as s:
    planted = reports.REFERENCE_ANNOTATOR in store.annotators_for_dataset(s, store.get_dataset(s, dataset).id)
NO_TRUTH = (
    f"Dataset {ui.md(dataset)} has no planted truth (labels of annotator `reference`): the simulated judge "
    "draws its verdicts around that truth, so on these answers they are noise. Use it on the demo, or "
    "judge your answers with a real endpoint."
)

st.subheader("Judge")
keep("run_judge_kind", "Simulated judge")
judge_kind = st.radio(
    "Judge",
    ["Simulated judge", "Bundled local judge", "OpenAI-compatible endpoint"],
    key="run_judge_kind",
    horizontal=True,
    label_visibility="collapsed",
)
api_key_env = None
if judge_kind == "Simulated judge":
    st.caption(
        "**Simulated** — an OpenAI-compatible server in this app whose verdicts follow a stated model "
        "(planted truth, 90% accuracy, a shared impression, and conditioning between fields of one "
        "reply). Use it to check that the pipeline recovers a known effect; it says nothing about "
        "a real judge."
    )
    if not planted:
        st.warning(NO_TRUTH, icon=":material/warning:")
    kind, model, base_url = "simulated", "judgekit-sim", None
elif judge_kind == "Bundled local judge":
    st.caption(LOCAL_JUDGE_NOTE)
    kind, model = "local", LOCAL_MODEL_NAME
    keep("run_local_url", "http://127.0.0.1:8766/v1")
    base_url = st.text_input("Local judge URL (`make demo` starts one on port 8766)", key="run_local_url")
    keep("run_local_start", False)
    if st.checkbox("Start a local judge inside this app instead", key="run_local_start"):
        keep("run_local_model", "")
        gguf = st.text_input("Model file (GGUF; empty: the bundled SmolLM2-135M)", key="run_local_model")
        try:
            with st.spinner("Starting llama.cpp…"):
                base_url, model = local_judge_base_url(gguf)
        except Exception as exc:  # one readable line, not a traceback; the server's log below it
            why = getattr(exc, "summary", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
            st.error(ui.md(f"The local judge did not start: {why}"), icon=":material/error:")
            if "\n" in str(exc):
                with st.expander("The server's last log lines"):
                    st.code(str(exc), language=None)
            st.stop()
        st.caption(ui.md(f"Serving at {base_url}"))
else:
    kind = "openai"
    base_url, model, api_key_env = ui.endpoint_inputs("run")

if kind != "simulated":
    if st.button("Test this endpoint", key="run_test_endpoint", icon=":material/network_check:",
                 help="Lists the models, finds the structured-output mode and makes one tiny judge call."):
        with st.spinner("Testing the endpoint…"):
            st.session_state["run_checked"] = (
                (base_url, model, api_key_env),
                endpoint_check.check_endpoint(JudgeConfig(
                    base_url=base_url, model=model, api_key_env=api_key_env or None,
                    timeout_s=60.0 if kind == "local" else 20.0, max_retries=0, max_tokens=200,
                )),
            )
    checked = st.session_state.get("run_checked")
    if checked and checked[0] == (base_url, model, api_key_env):
        ui.show_endpoint_check(checked[1])
        if checked[1].simulated:
            kind = "simulated"
            st.info("This endpoint is judgekit's simulated judge: its runs are marked *simulated*.",
                    icon=":material/info:")
            if not planted:
                st.warning(NO_TRUTH, icon=":material/warning:")

st.subheader("Harness variants")
keep("run_variants", ["single", "split"])
variants = st.multiselect("Variants (each becomes one run over the same examples)", list(harness.PRESETS),
                          key="run_variants")
keep("run_grouped", "")
grouped = st.text_input(
    "Grouped variant (optional), e.g. grouped:answers_question+cites_source|grounded+concise", key="run_grouped"
)
with st.expander("Options for every variant"):
    o1, o2, o3 = st.columns(3)
    keep("run_order", harness.ORDERS[0])
    order = o1.selectbox("Field order", harness.ORDERS, key="run_order")
    keep("run_structured", harness.STRUCTURED_MODES[0])
    structured = o2.selectbox("Structured output", harness.STRUCTURED_MODES, key="run_structured")
    keep("run_prompt_variant", next(iter(prompts.VARIANTS)))
    variant = o3.selectbox(
        "Prompt variant",
        list(prompts.VARIANTS),
        key="run_prompt_variant",
        format_func=lambda v: f"{v} — {prompts.VARIANTS[v].description}",
    )
    keep("run_logprobs", False)
    logprobs = st.checkbox("Record P(pass) from log-probabilities", key="run_logprobs")
    r1, r2, r3 = st.columns(3)
    keep("run_temperature", 0.0)
    temperature = r1.number_input("Temperature", min_value=0.0, max_value=2.0, step=0.1, key="run_temperature")
    keep("run_repeats", 1)
    repeats = r2.number_input(
        "Repeats of each variant", min_value=1, max_value=10, key="run_repeats",
        help="Runs each variant this many times over the same examples; their agreement with each other "
        "is the judge's noise floor (Compare, Agreement).",
    )
    keep("run_use_cache", True)
    use_cache = r3.checkbox(
        "Answer from the response cache", key="run_use_cache",
        help="At temperature 0 a request answered before (same endpoint, model and prompt) is not sent "
        "again and costs nothing. Repeats never read the cache.",
    )
    template_options = prompt_options(rubric)

st.subheader("Prompt")
template_choice = ui.pick(
    "Judge prompt",
    list(template_options),
    key="run_prompt_template_choice",
    widget=st.radio,
    horizontal=True,
    help="Your own prompt is a Jinja2 template (sandboxed) with {{ question }}, {{ context }}, {{ answer }} and "
    "{{ criteria }}; judgekit keeps the call structure, the criteria block and reply format, the output schema "
    "and the parser. The template is stored on each run.",
)
template_text, template_name = template_options[template_choice]
if template_choice == TEMPLATE_OWN:
    keep("run_prompt_template", EXAMPLE_TEMPLATE)
    template_text = st.text_area("Template (Jinja2; {{ criteria }} last, after the answer)", height=220,
                                 key="run_prompt_template")
    template_name = "page template"
if template_text:
    try:
        compiled = prompt_templates.compile_template(template_text, template_name or "template")
    except ValueError as e:
        st.error(ui.md(str(e)), icon=":material/error:")
        st.stop()
    st.caption(ui.md(f"Valid: {compiled.label}" + (", with its own system persona." if compiled.has_system else ".")))
f1, f2 = st.columns(2)
keep("run_few_shot", 0)
few_shot = f1.number_input(
    "Few-shot: labelled examples per criterion (0 = none)", min_value=0, max_value=20, key="run_few_shot",
    help="K examples per criterion from the human column, never the example being judged; seeded by Seed below.",
)
with session() as s:
    ds_row = store.get_dataset(s, dataset)
    shot_sources = ["human"] + [f"annotator:{a}" for a in store.annotators_for_dataset(s, ds_row.id)]
with f2:
    few_shot_from = ui.pick("Few-shot labels from", shot_sources, key="run_few_shot_from",
                            format_func=lambda v: "human consensus" if v == "human" else v, disabled=few_shot == 0)

s1, s2, s3, s4 = st.columns(4)
keep("run_sample", min(200, n_examples))
if st.session_state["run_sample"] > n_examples:  # another dataset was chosen
    st.session_state["run_sample"] = n_examples
sample = s1.number_input("Examples (seeded sample)", min_value=1, max_value=n_examples, key="run_sample")
keep("run_seed", 1)
seed = s2.number_input("Seed", min_value=0, key="run_seed")
keep("run_concurrency", 1 if kind == "local" else 8)
concurrency = s3.number_input("Concurrency", min_value=1, max_value=64, key="run_concurrency")
keep("run_name", "")
prefix = s4.text_input("Name (optional)", key="run_name", placeholder=dataset,
                       help="Runs are named NAME-VARIANT, e.g. NAME-single and NAME-split.").strip()

options = {
    "order": order,
    "structured": structured,
    "prompt_variant": variant,
    "logprobs": logprobs,
    "seed": int(seed),
    "prompt_template": template_text if template_choice == TEMPLATE_OWN else "",
    "prompt_template_name": template_name if template_choice != TEMPLATE_RUBRIC else "",
    "few_shot": int(few_shot),
    "few_shot_from": few_shot_from,
}
try:
    specs = [harness.preset(v, **options) for v in variants]
    if grouped.strip():
        specs.append(harness.parse_harness(grouped.strip(), **options))
    with session() as s:
        estimates = [
            runner.estimate(
                s,
                dataset=dataset,
                rubric=rubric,
                harness=h,
                n_examples=int(sample),
                model=model,
                kind=kind,
                concurrency=int(concurrency),
            )
            for h in specs
        ]
except (ValueError, store.NotFound) as e:
    st.error(ui.md(str(e)))
    st.stop()

if specs:
    table = pd.DataFrame(
        [
            {
                "variant": h.label
                + (" + note" if h.independence_note else "")
                + (" (shuffled)" if h.shuffle else ""),
                "prompt": prompts.prompt_label(h),
                **e.to_dict(),
            }
            for h, e in zip(specs, estimates, strict=True)
        ]
    )
    if repeats > 1:
        table.insert(1, "repeats", int(repeats))
        for col in ("calls", "prompt_tokens", "cacheable_prompt_tokens", "completion_tokens", "usd", "seconds"):
            table[col] = table[col].map(lambda v: None if v is None else v * int(repeats))
    table["usd"] = table["usd"].map(lambda u: "unknown model" if u is None else f"${u:,.4f}")
    table["seconds"] = table["seconds"].map(lambda x: f"≈ {x:,.0f} s")
    st.caption(
        "Estimate before starting (≈ 4 characters a token; cacheable = prompt tokens a prefix cache can "
        "reuse with the shared-prefix layout):"
    )
    count = st.column_config.NumberColumn(format="localized")
    counted = ("examples", "calls", "prompt_tokens", "cacheable_prompt_tokens", "completion_tokens")
    st.dataframe(table.rename(columns={"seconds": "time", "usd": "cost (USD)"}), hide_index=True,
                 key="run_estimate", column_config=dict.fromkeys(counted, count))

with session() as s:
    planned = runner.comparison_names(dataset, specs, prefix or None, repeat=int(repeats))
    taken = store.existing_run_names(s, planned)
again = True
if taken:
    st.warning(
        ui.md(
            f"Runs named {', '.join(taken)} already exist: starting again makes new copies "
            f"({taken[0]}-2 …). Resume the existing ones below, or give this comparison a name."
        ),
        icon=":material/content_copy:",
    )
    again = st.checkbox("Start new copies anyway", key="run_again")

allowed = signin.may_run(who, kind, base_url, api_key_env, "Starting runs on this judge")
if st.button("Start", type="primary", key="run_start", disabled=not specs or not again or not allowed):
    if kind == "openai" and base_url:  # judgekit's simulated judge says so in its model list
        kind = runner.detect_judge_kind(base_url)
    judge = runner.JudgeSpec(
        base_url=base_url or sim_judge_base_url(),
        model=model,
        kind=kind,
        api_key_env=api_key_env or None,
        timeout_s=300.0 if kind == "local" else 60.0,
        max_tokens=400 if kind == "local" else 1024,
        temperature=float(temperature),
    )
    try:
        with session() as s:
            names = actions.create_comparison(
                who,
                s,
                dataset=dataset,
                rubric=rubric,
                harnesses=specs,
                judge=judge,
                sample=int(sample),
                seed=int(seed),
                prefix=prefix or None,
                repeat=int(repeats),
                use_cache=bool(use_cache),
            )
        actions.start_runs(who, db_url(), names, concurrency=int(concurrency), sequential=kind == "local")
    except (ValueError, store.NotFound, auth.Forbidden) as e:
        st.error(ui.md(str(e)))
    else:
        st.session_state.pop("run_again", None)
        each = "each " if len(names) > 1 else ""
        st.success(ui.md(f"Started {', '.join(names)} — {int(sample)} examples {each}(seed {int(seed)})."))


@st.fragment(run_every=1.0)
def live_runs() -> None:
    me = signin.identity()
    with session() as s:
        runs = [r for r in store.list_runs(s) if r["status"] != "imported"]
        progress = {r["name"]: jobs.stored_progress(s, store.get_run(s, r["name"])) for r in runs[-12:]}
        allowed = {name: me.can(a) for name, a in actions.run_needs(s, list(progress)).items()}
    if not runs:
        return
    st.subheader("Runs")
    for r in reversed(runs[-12:]):
        job = jobs.get(db_url(), r["name"])
        p = progress[r["name"]]
        status = "running" if job is not None and job.alive else r["status"]
        label = (
            f"{r['name']} — {r['harness']} — {r['judge']} — {status}: {p.verdicts:,}/{p.expected:,} verdicts, "
            f"{p.calls:,} calls" + (f", {p.failed_calls:,} failed" if p.failed_calls else "")
        )
        cols = st.columns([6, 1])
        cols[0].progress(p.fraction, text=ui.md(label))  # names and messages are untrusted text
        may = allowed.get(r["name"], False)  # cancel and resume need the role starting this judge does
        if may and job is not None and job.alive:
            if cols[1].button("Cancel", key=f"run_cancel_{r['name']}"):
                actions.cancel_run(me, db_url(), r["name"])
        elif may and p.verdicts < p.expected and cols[1].button("Resume", key=f"run_resume_{r['name']}",
                                                                 type="primary"):
            actions.start_runs(me, db_url(), [r["name"]], concurrency=int(concurrency))
        if job is not None and job.error:
            st.error(ui.md(f"{r['name']}: {ui.page_message(job.error)}"), icon=":material/error:")
        elif r["message"] and (r["status"] == "failed" or p.verdicts < p.expected):
            st.error(ui.md(f"{r['name']} stopped: {ui.page_message(r['message'])}"), icon=":material/error:")
        elif r["message"]:
            st.caption(ui.md(f"{r['name']}: {r['message']}"))


live_runs()
