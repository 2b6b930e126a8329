"""Run: pick dataset, rubric, judge and harness variants; see the cost before starting; watch runs live."""

import pandas as pd
import streamlit as st

from judgekit import harness, jobs, prompt_templates, prompts, runner, store, ui
from judgekit.localjudge import LOCAL_JUDGE_NOTE, LOCAL_MODEL_NAME
from judgekit.webapp import db_url, empty_state, local_judge_base_url, session, sim_judge_base_url

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

st.title("Run")
st.caption(
    "Run several harnesses over the same sampled examples, then compare them on Cross-tabs, "
    "Associations and Compare."
)

with session() as s:
    datasets = store.list_datasets(s)
    rubrics = store.list_rubrics(s)
if not datasets or not rubrics:
    empty_state(
        "Nothing to judge yet: load the demo on the Workspace page, or upload a dataset and a rubric "
        "on the Data page."
    )
    st.stop()

left, right = st.columns(2)
dataset = left.selectbox("Dataset", [d["name"] for d in datasets], key="run_dataset")
rubric = right.selectbox("Rubric", [r["name"] for r in rubrics], key="run_rubric")
n_examples = next(d["examples"] for d in datasets if d["name"] == dataset)

st.subheader("Judge")
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
        "(planted truth, 90 % accuracy, a shared impression, and conditioning between fields of one "
        "reply). Use it to check that the pipeline recovers a known effect; it says nothing about "
        "a real judge."
    )
    kind, model, base_url = "simulated", "judgekit-sim", None
elif judge_kind == "Bundled local judge":
    st.caption(LOCAL_JUDGE_NOTE)
    kind, model = "local", LOCAL_MODEL_NAME
    base_url = st.text_input(
        "Local judge URL (`make demo` starts one on port 8766)",
        value="http://127.0.0.1:8766/v1",
        key="run_local_url",
    )
    if st.checkbox("Start a local judge inside this app instead", key="run_local_start"):
        with st.spinner("Starting llama.cpp with SmolLM2-135M…"):
            base_url, model = local_judge_base_url()
        st.caption(f"Serving at {base_url}")
else:
    kind = "openai"
    base_url, model, api_key_env = ui.endpoint_inputs("run")

st.subheader("Harness variants")
variants = st.multiselect(
    "Variants (each becomes one run over the same examples)",
    list(harness.PRESETS),
    default=["single", "split"],
    key="run_variants",
)
grouped = st.text_input(
    "Grouped variant (optional), e.g. grouped:answers_question+cites_source|grounded+concise",
    value="",
    key="run_grouped",
)
with st.expander("Options for every variant"):
    o1, o2, o3 = st.columns(3)
    order = o1.selectbox("Field order", harness.ORDERS, key="run_order")
    structured = o2.selectbox("Structured output", harness.STRUCTURED_MODES, key="run_structured")
    variant = o3.selectbox(
        "Prompt variant",
        list(prompts.VARIANTS),
        key="run_prompt_variant",
        format_func=lambda v: f"{v} — {prompts.VARIANTS[v].description}",
    )
    logprobs = st.checkbox("Record P(pass) from log-probabilities", key="run_logprobs")
    template_options = prompt_options(rubric)

st.subheader("Prompt")
template_choice = st.radio(
    "Judge prompt",
    list(template_options),
    key="run_prompt_template_choice",
    horizontal=True,
    help="Your own prompt is a Jinja2 template (sandboxed) with {{ question }}, {{ context }}, {{ answer }} and "
    "{{ criteria }}; judgekit keeps the call structure, the criteria block and reply format, the output schema "
    "and the parser. The template is stored on each run.",
)
template_text, template_name = template_options[template_choice]
if template_choice == TEMPLATE_OWN:
    template_text = st.text_area(
        "Template (Jinja2; {{ criteria }} last, after the answer)",
        value=EXAMPLE_TEMPLATE,
        height=220,
        key="run_prompt_template",
    )
    template_name = "page template"
if template_text:
    try:
        compiled = prompt_templates.compile_template(template_text, template_name or "template")
    except ValueError as e:
        st.error(str(e), icon=":material/error:")
        st.stop()
    st.caption(f"Valid: {compiled.label}" + (", with its own system persona." if compiled.has_system else "."))
f1, f2 = st.columns(2)
few_shot = f1.number_input(
    "Few-shot: labelled examples per criterion (0 = none)", min_value=0, max_value=20, value=0, key="run_few_shot",
    help="K examples per criterion from the human column, never the example being judged; seeded by Seed below.",
)
with session() as s:
    ds_row = store.get_dataset(s, dataset)
    shot_sources = ["human"] + [f"annotator:{a}" for a in store.annotators_for_dataset(s, ds_row.id)]
few_shot_from = f2.selectbox("Few-shot labels from", shot_sources, key="run_few_shot_from",
                             format_func=lambda v: "human consensus" if v == "human" else v,
                             disabled=few_shot == 0)

s1, s2, s3 = st.columns(3)
sample = s1.number_input(
    "Examples (seeded sample)",
    min_value=1,
    max_value=n_examples,
    value=min(200, n_examples),
    key="run_sample",
)
seed = s2.number_input("Seed", min_value=0, value=1, key="run_seed")
concurrency = s3.number_input(
    "Concurrency", min_value=1, max_value=64, value=1 if kind == "local" else 8, key="run_concurrency"
)

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
    st.error(str(e))
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
    table["usd"] = table["usd"].map(lambda u: "unknown model" if u is None else f"${u:,.4f}")
    table["seconds"] = table["seconds"].round(0)
    st.caption(
        "Estimate before starting (≈ 4 characters a token; cacheable = prompt tokens a prefix cache can "
        "reuse with the shared-prefix layout):"
    )
    st.dataframe(table, hide_index=True, key="run_estimate")

if st.button("Start", type="primary", key="run_start", disabled=not specs):
    judge = runner.JudgeSpec(
        base_url=base_url or sim_judge_base_url(),
        model=model,
        kind=kind,
        api_key_env=api_key_env or None,
        timeout_s=300.0 if kind == "local" else 60.0,
        max_tokens=400 if kind == "local" else 1024,
    )
    try:
        with session() as s:
            names = runner.create_comparison(
                s,
                dataset=dataset,
                rubric=rubric,
                harnesses=specs,
                judge=judge,
                sample=int(sample),
                seed=int(seed),
            )
    except (ValueError, store.NotFound) as e:
        st.error(str(e))
    else:
        jobs.start_many(db_url(), names, concurrency=int(concurrency), sequential=kind == "local")
        st.success(f"Started {', '.join(names)}.")


@st.fragment(run_every=1.0)
def live_runs() -> None:
    with session() as s:
        runs = [r for r in store.list_runs(s) if r["status"] != "imported"]
        progress = {r["name"]: jobs.stored_progress(s, store.get_run(s, r["name"])) for r in runs[-12:]}
    if not runs:
        return
    st.subheader("Runs")
    for r in reversed(runs[-12:]):
        job = jobs.get(db_url(), r["name"])
        p = progress[r["name"]]
        status = "running" if job is not None and job.alive else r["status"]
        label = (
            f"{r['name']} — {r['harness']} — {r['judge']} — {status}: {p.verdicts}/{p.expected} verdicts, "
            f"{p.calls} calls" + (f", {p.failed_calls} failed" if p.failed_calls else "")
        )
        cols = st.columns([6, 1])
        cols[0].progress(p.fraction, text=label)
        if job is not None and job.alive:
            if cols[1].button("Cancel", key=f"run_cancel_{r['name']}"):
                jobs.cancel(db_url(), r["name"])
        elif p.verdicts < p.expected and cols[1].button("Resume", key=f"run_resume_{r['name']}"):
            jobs.start(db_url(), r["name"], concurrency=int(concurrency))
        if job is not None and job.error:
            st.error(f"{r['name']}: {job.error}")
        elif r["message"]:
            st.caption(f"{r['name']}: {r['message']}")


live_runs()
