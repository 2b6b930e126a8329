"""The simulated judge over real HTTP, through the real ``openai`` client.

Two planted datasets share one database: 600 answers judged on six binary criteria (truth phi of
c1/c2 ≈ 0.1) and 300 answers judged on three 1–5 dimensions (``safety`` is the K.O. dimension,
floor 2) plus a binary ``no_fabrication`` label. Prompts come from :mod:`judgekit.prompts` and
:mod:`judgekit.harness`; replies are read with :mod:`judgekit.parse`, as a runner would.
"""

from __future__ import annotations

import json
import math
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import openai
import pytest
from sqlalchemy.orm import Session

from judgekit import harness as hz
from judgekit import prompts, store
from judgekit.openai_server import ServerThread
from judgekit.parse import TokenLogprob, p_pass_from_logprobs, parse_reply
from judgekit.rubric import Criterion, KORule, Rubric
from judgekit.simjudge import (
    FORMAT_FLAGS,
    RATIONALE_RATES,
    RECONCILE_MISS,
    SAFETY_FLAG_RATE,
    SIM_MODEL,
    SIM_OWNER,
    SimJudge,
    SimParams,
    is_safety_flag,
    start_in_thread,
)

N_BINARY = 600
N_SCALE = 300
LEVELS = {1: "harmful or invented", 2: "risky", 3: "acceptable", 4: "careful", 5: "exemplary"}
BINARY = Rubric(
    "sim-binary", tuple(Criterion(f"c{i}", f"Does the answer meet requirement {i}?") for i in range(1, 7))
)
KO = KORule("safety", 2)
SCALE = Rubric(
    "sim-scale",
    (
        Criterion("safety", "How safe and honest is the answer?", "scale", LEVELS, 3),
        Criterion("clarity", "How clear and well structured is the answer?", "scale", LEVELS, 3),
        Criterion("helpfulness", "How helpful is the answer?", "scale", LEVELS, 3),
    ),
    ko_rule=KO,
)
NOUNS = ("router", "invoice", "password", "printer", "account", "backup", "license", "modem", "profile",
         "refund")


def _answer(kind: str, i: int) -> prompts.ExampleText:
    a, b = NOUNS[i % 10], NOUNS[(i // 10) % 10]
    return prompts.ExampleText(
        question=f"How do I sort out the {a} problem in case {kind}-{i}?",
        context=f"Manual section {i}: the {a} is reset from the {b} page. " * 3,
        answer=(f"To fix case {kind}-{i}, open the {b} page and reset the {a} there. "
                f"Wait two minutes, then check that the {a} works again; contact support if it does not."),
    )


# --------------------------------------------------------------------------------- the world


class World:
    """The planted truth, the examples and the database URL they live in."""

    def __init__(self, url: str, engine) -> None:
        self.url = url
        self.engine = engine
        rng = np.random.default_rng(2024)
        n = N_BINARY
        t1 = rng.random(n) < 0.7
        # c2 copies c1 with probability 0.1 and is otherwise independent, so phi(c1, c2) ≈ 0.1.
        t2 = np.where(rng.random(n) < 0.1, t1, rng.random(n) < 0.7)
        self.binary_truth = np.column_stack([t1, t2] + [rng.random(n) < 0.7 for _ in range(4)]).astype(int)
        self.binary_examples = [_answer("b", i) for i in range(n)]
        m = N_SCALE
        self.scale_truth = {
            "safety": rng.choice([1, 2, 3, 4, 5], size=m, p=[0.1, 0.15, 0.2, 0.3, 0.25]),
            "clarity": rng.choice([1, 2, 3, 4, 5], size=m, p=[0.1, 0.2, 0.3, 0.25, 0.15]),
            "helpfulness": rng.choice([1, 2, 3, 4, 5], size=m, p=[0.05, 0.1, 0.25, 0.35, 0.25]),
            "no_fabrication": (rng.random(m) > 0.1).astype(int),
        }
        self.scale_examples = [_answer("s", i) for i in range(m)]
        with Session(engine) as s, s.begin():
            for name, exs, truth in (
                ("binary", self.binary_examples,
                 {r.key: self.binary_truth[:, j] for j, r in enumerate(BINARY.criteria)}),
                ("scale", self.scale_examples, self.scale_truth),
            ):
                rows = [
                    {"id": f"{name}-{i}", "question": e.question, "context": e.context, "answer": e.answer}
                    for i, e in enumerate(exs)
                ]
                ds = store.insert_dataset(s, name, rows)
                ids = store.example_ids(s, ds.id)
                store.upsert_labels(s, [
                    {"example_id": ids[f"{name}-{i}"], "criterion": key, "annotator": "reference",
                     "value": int(col[i])}
                    for key, col in truth.items() for i in range(len(exs))
                ])


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    url = f"sqlite:///{tmp_path_factory.mktemp('simjudge') / 'world.sqlite'}"
    engine = store.make_engine(url)  # not the process-wide cache, which every test's teardown disposes
    store.upgrade(engine)
    yield World(url, engine)
    engine.dispose()


@pytest.fixture(scope="module")
def server(world):
    """The default simulated judge (G = 1.5, a = 0.9, w = 0.5, seed 0) over the world's truth."""
    srv = start_in_thread(world.url, SimParams())
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def runs(world, server) -> dict[str, np.ndarray]:
    """The binary world judged by the default server under single, split and single + placebo."""
    return {
        "single": _verdicts(server, world.binary_examples, BINARY, hz.Harness(kind="single")),
        "split": _verdicts(server, world.binary_examples, BINARY, hz.Harness(kind="split")),
        "note": _verdicts(server, world.binary_examples, BINARY,
                          hz.Harness(kind="single", independence_note=True)),
    }


# ------------------------------------------------------------------------------ the "runner"


def _response_format(schema: dict, mode: str) -> dict | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "verdicts", "schema": schema}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def _call(client: openai.OpenAI, messages: list[dict], schema: dict, *, mode: str = "json_schema",
          logprobs: bool = False):
    kwargs: dict = {"model": SIM_MODEL, "messages": messages, "temperature": 0}
    fmt = _response_format(schema, mode)
    if fmt is not None:
        kwargs["response_format"] = fmt
    if logprobs:
        kwargs.update(logprobs=True, top_logprobs=5)
    return client.chat.completions.create(**kwargs)


def _judge(srv: ServerThread, examples, rubric: Rubric, harness: hz.Harness, *, logprobs: bool = False):
    """Every planned call of ``harness`` over ``examples``: (example index, criteria, messages, response)."""
    client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
    plan = hz.plan_calls(harness, rubric, [(i, f"ex-{i}") for i in range(len(examples))])
    jobs = []
    for call in plan:
        crits = rubric.subset(list(call.criteria))
        messages = prompts.build_messages(examples[call.example_id], crits, harness, rubric.ko_rule)
        jobs.append((call.example_id, crits, messages, prompts.response_schema(crits, harness.order)))
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda j: _call(client, j[2], j[3], logprobs=logprobs), jobs))
    client.close()
    return [(ex, crits, msgs, resp) for (ex, crits, msgs, _), resp in zip(jobs, responses, strict=True)]


def _verdicts(srv, examples, rubric: Rubric, harness: hz.Harness) -> np.ndarray:
    """(examples × criteria) matrix of parsed verdict values; -1 where unscored."""
    out = np.full((len(examples), len(rubric.criteria)), -1)
    for ex, crits, _, resp in _judge(srv, examples, rubric, harness):
        for c, v in parse_reply(resp.choices[0].message.content, crits).items():
            out[ex, rubric.keys.index(c)] = -1 if v.value is None else v.value
    return out


def _entries(srv, world: World, harness: hz.Harness, n: int = N_SCALE) -> list[dict]:
    """The scale world judged with ``harness``: one parsed dict per example (key → ParsedVerdict)."""
    out: list[dict] = [{} for _ in world.scale_examples[:n]]
    for ex, crits, _, resp in _judge(srv, world.scale_examples[:n], SCALE, harness):
        out[ex].update(parse_reply(resp.choices[0].message.content, crits))
    return out


def _phi(m: np.ndarray, i: int = 0, j: int = 1) -> float:
    return float(np.corrcoef(m[:, i], m[:, j])[0, 1])


# ----------------------------------------------------------------------------------- identity


def test_models_entry_names_the_simulation(server):
    client = openai.OpenAI(base_url=server.base_url, api_key="x")
    models = client.models.list().data
    assert [(m.id, m.owned_by) for m in models] == [("judgekit-sim", "judgekit-simulated")]
    assert (SIM_MODEL, SIM_OWNER) == ("judgekit-sim", "judgekit-simulated")


def test_same_seed_same_reply_other_seed_other_verdicts(world, server):
    h = hz.Harness(kind="single")
    examples = world.binary_examples[:40]
    first = [r.choices[0].message.content for *_, r in _judge(server, examples, BINARY, h)]
    again = [r.choices[0].message.content for *_, r in _judge(server, examples, BINARY, h)]
    assert first == again
    twin = start_in_thread(world.url, SimParams(seed=0))
    other = start_in_thread(world.url, SimParams(seed=1))
    try:
        assert [r.choices[0].message.content for *_, r in _judge(twin, examples, BINARY, h)] == first
        a = _verdicts(server, examples, BINARY, h)
        b = _verdicts(other, examples, BINARY, h)
    finally:
        twin.stop()
        other.stop()
    assert (a != b).any()


def test_every_structured_mode_gets_the_same_verdicts(world, server):
    client = openai.OpenAI(base_url=server.base_url, api_key="x")
    crits = list(BINARY.criteria)
    messages = prompts.build_messages(world.binary_examples[7], crits, hz.Harness())
    schema = prompts.response_schema(crits, "verdict_first")
    replies = {mode: _call(client, messages, schema, mode=mode).choices[0].message.content
               for mode in ("json_schema", "json_object", "prompt")}
    assert len(set(replies.values())) == 1
    assert all(v.value is not None for v in parse_reply(replies["prompt"], crits).values())


def test_a_request_not_in_judgekit_layout_gets_an_empty_object(server):
    client = openai.OpenAI(base_url=server.base_url, api_key="x")
    resp = client.chat.completions.create(model=SIM_MODEL, messages=[{"role": "user", "content": "Say hi."}])
    assert json.loads(resp.choices[0].message.content) == {}


# --------------------------------------------------------------------------- the injected effect


def test_conditioning_shows_in_single_calls_not_split_calls(world, runs):
    truth, single, split, note = world.binary_truth, runs["single"], runs["split"], runs["note"]
    assert (single >= 0).all() and (split >= 0).all() and (note >= 0).all()
    phis = {name: round(_phi(m), 3) for name, m in (("truth", truth), ("single", single), ("split", split),
                                                    ("note", note))}
    print("phi(c1, c2):", phis)
    assert abs(phis["truth"] - 0.1) < 0.08
    # The injected effect: conditioning on the already-emitted c1 inflates phi in single calls only.
    assert phis["single"] > phis["split"] + 0.15
    assert phis["single"] > phis["truth"] + 0.15
    # Split calls keep only the shared impression (w = 0.5): close to the truth's association.
    assert abs(phis["split"] - phis["truth"]) < 0.1
    # The placebo sentence scales G by 0.92: phi barely moves (seed 003: 0.62 → 0.57).
    assert phis["split"] + 0.15 < phis["note"] <= phis["single"] + 0.02
    assert phis["note"] > phis["single"] - 0.1


def test_without_conditioning_single_and_split_agree_exactly(world):
    srv = start_in_thread(world.url, SimParams(conditioning=0.0))
    try:
        examples = world.binary_examples[:100]
        single = _verdicts(srv, examples, BINARY, hz.Harness(kind="single"))
        split = _verdicts(srv, examples, BINARY, hz.Harness(kind="split"))
        grouped = _verdicts(srv, examples, BINARY, hz.parse_harness("grouped:c1+c2+c3|c4+c5+c6"))
    finally:
        srv.stop()
    assert (single >= 0).all()
    np.testing.assert_array_equal(single, split)
    np.testing.assert_array_equal(single, grouped)


def test_split_verdicts_agree_with_truth_at_the_stated_accuracy(world, runs):
    params = SimParams()
    # Marginal accuracy over the impression: E_z[sigmoid(logit(a) + w·z)], z ~ N(0, 1) — by quadrature.
    z = np.linspace(-8, 8, 4001)
    density = np.exp(-z**2 / 2) / math.sqrt(2 * math.pi)
    p_correct = 1 / (1 + np.exp(-(params.logit_accuracy + params.impression * z)))
    expected = float(np.trapezoid(density * p_correct, z))
    assert 0.88 < expected < 0.9  # a = 0.9 at z = 0; the impression costs about a point
    observed = float((runs["split"] == world.binary_truth).mean())  # 3,600 verdicts: sd ≈ 0.005
    assert abs(observed - expected) < 0.02, (observed, expected)


def _p_pass(resp, crits) -> dict[str, float]:
    choice = resp.choices[0]
    tokens = [TokenLogprob(t.token, t.logprob, tuple((a.token, a.logprob) for a in t.top_logprobs))
              for t in choice.logprobs.content]
    return p_pass_from_logprobs(choice.message.content, tokens, crits)


def test_logprobs_give_the_models_probability(world, server):
    examples = world.binary_examples[:40]
    judge = SimJudge(world.engine, SimParams())
    single: dict[int, dict[str, float]] = {}
    h = hz.Harness(logprobs=True)
    for ex, crits, messages, resp in _judge(server, examples, BINARY, h, logprobs=True):
        single[ex] = _p_pass(resp, crits)
        assert set(single[ex]) == set(BINARY.keys)
        for d in judge.decide(messages):  # the client's p_pass is the model's P(true), to the digit
            assert single[ex][d.key] == pytest.approx(d.p_true, abs=1e-9)
    split: dict[int, dict[str, float]] = {ex: {} for ex in range(len(examples))}
    for ex, crits, _, resp in _judge(server, examples, BINARY, hz.Harness(kind="split"), logprobs=True):
        split[ex].update(_p_pass(resp, crits))
    a = SimParams().logit_accuracy
    for ex in range(len(examples)):
        # The first field of a single call is unconditioned, like every split call.
        assert single[ex]["c1"] == pytest.approx(split[ex]["c1"], abs=1e-12)
        # Split: logit(p_k) = ±logit(a) + w·z, so logit(p_k) ∓ logit(a) is the same w·z for every k.
        signs = 2 * world.binary_truth[ex] - 1
        logits = [math.log(split[ex][k] / (1 - split[ex][k])) for k in BINARY.keys]
        residual = [lg - s * a for lg, s in zip(logits, signs, strict=True)]
        assert max(residual) - min(residual) < 1e-6
        assert abs(residual[0]) < 0.5 * 4  # that is w·z with w = 0.5, and |z| < 4


# ---------------------------------------------------------------------- scales, rationales, flags


_QUOTED = re.compile(r'"([^"]+)"')


def _properties(text: str, answer: str) -> dict[str, bool]:
    quotes = _QUOTED.findall(text)
    bare = _QUOTED.sub('""', text)
    return {
        "cites_evidence": any(len(q.split()) >= 2 and q in answer for q in quotes),
        "justifies_level": "rather than" in bare,
        "names_fix": "fix:" in bare.lower(),
    }


@pytest.fixture(scope="module")
def scale_runs(world, server) -> dict[str, list[dict]]:
    return {
        variant: _entries(server, world, hz.Harness(kind="single", prompt_variant=variant))
        for variant in ("default", "hardened")
    }


def test_scale_scores_follow_the_truth(world, scale_runs):
    for key in ("safety", "clarity", "helpfulness"):
        scores = np.array([e[key].value for e in scale_runs["default"]])
        assert set(scores) <= {1, 2, 3, 4, 5}
        truth = world.scale_truth[key]
        assert np.corrcoef(scores, truth)[0, 1] > 0.7, key


@pytest.mark.parametrize("variant", ["default", "hardened"])
def test_rationale_properties_follow_the_variant(world, scale_runs, variant):
    counts = {"cites_evidence": [], "justifies_level": [], "names_fix": []}
    sentences = []
    for ex, entry in zip(world.scale_examples, scale_runs[variant], strict=True):
        for key in ("safety", "clarity", "helpfulness"):
            v = entry[key]
            props = _properties(v.rationale, ex.answer)
            counts["cites_evidence"].append(props["cites_evidence"])
            counts["justifies_level"].append(props["justifies_level"])
            if v.value < 5:
                counts["names_fix"].append(props["names_fix"])
            else:
                assert not props["names_fix"]
            sentences.append(len(re.findall(r"[.!?](?:\s|$)", _QUOTED.sub('""', v.rationale))))
    rates = RATIONALE_RATES[variant]
    for prop, seen in counts.items():
        # 900 rationales (names_fix: the ~700 below 5): sd ≤ 0.019, so 0.06 is three sd.
        assert abs(np.mean(seen) - rates[prop]) < 0.06, (variant, prop, np.mean(seen))
    if variant == "default":
        assert set(sentences) == {1}
    else:
        assert set(sentences) <= {3, 4} and len(set(sentences)) == 2


def _ko_contradictions(entries: list[dict]) -> tuple[int, int]:
    flagged = [e["safety"] for e in entries if any(is_safety_flag(f) for f in e["safety"].red_flags)]
    return sum(v.value > KO.floor for v in flagged), len(flagged)


def test_safety_reconciliation_depends_on_the_variant(world, scale_runs):
    problem = (world.scale_truth["safety"] <= KO.floor) | (world.scale_truth["no_fabrication"] == 0)
    flagged = {variant: np.array([any(is_safety_flag(f) for f in e["safety"].red_flags) for e in entries])
               for variant, entries in scale_runs.items()}
    # Flags come only from planted problems, at the stated rate, whatever the variant.
    np.testing.assert_array_equal(flagged["default"], flagged["hardened"])
    assert not flagged["default"][~problem].any()
    assert abs(flagged["default"][problem].mean() - SAFETY_FLAG_RATE) < 0.08
    rates = {}
    for variant, entries in scale_runs.items():
        contradicting, n = _ko_contradictions(entries)
        rates[variant] = contradicting / n
        # ~100 flagged answers: sd ≤ 0.05.
        assert abs(rates[variant] - RECONCILE_MISS[variant]) < 0.15, (variant, rates[variant], n)
    print("contradictory K.O. verdicts:", rates)
    assert rates["default"] > rates["hardened"] + 0.2
    # A planted fabrication (with an otherwise safe answer) is flagged as an invented fact.
    fabricated_only = (world.scale_truth["no_fabrication"] == 0) & (world.scale_truth["safety"] > KO.floor)
    for i in np.flatnonzero(fabricated_only & flagged["default"]):
        assert scale_runs["default"][i]["safety"].red_flags[0].startswith("invented fact: ")


def test_format_flags_never_touch_the_ko_dimension(world):
    srv = start_in_thread(world.url, SimParams(conditioning=0.0))
    try:
        together = _entries(srv, world, hz.Harness(kind="single"), n=150)
        alone = _entries(srv, world, hz.Harness(kind="split"), n=150)
    finally:
        srv.stop()
    format_flagged = 0
    for both, single in zip(together, alone, strict=True):
        assert not any(f in FORMAT_FLAGS for f in both["safety"].red_flags)
        flags = both["clarity"].red_flags
        assert all(f in FORMAT_FLAGS for f in flags)
        if flags:
            format_flagged += 1
            assert both["clarity"].value <= 3  # a format flag lowers its own dimension...
        assert both["safety"].value == single["safety"].value  # ...and never the K.O. one
    assert format_flagged > 10


# ------------------------------------------------------------------------------- usage and cache


def _long_example() -> prompts.ExampleText:
    return prompts.ExampleText("Where is the reset switch?", "The reset switch is on the back. " * 60,
                               "It is on the back panel, next to the power socket.")


@pytest.mark.parametrize("layout", ["shared_prefix", "criterion_first"])
def test_cached_tokens_follow_the_layout(world, layout):
    srv = start_in_thread(world.url, SimParams())
    try:
        h = hz.Harness(kind="split", layout=layout)
        client = openai.OpenAI(base_url=srv.base_url, api_key="x")
        usages = []
        for c in BINARY.criteria:
            messages = prompts.build_messages(_long_example(), [c], h)
            usages.append(_call(client, messages, prompts.response_schema([c], h.order)).usage)
    finally:
        srv.stop()
    system_tokens = len(prompts.system_prompt(h)) // 4
    example_tokens = len(prompts.example_block(_long_example())) // 4
    assert usages[0].prompt_tokens_details.cached_tokens == 0
    for u in usages[1:]:
        cached = u.prompt_tokens_details.cached_tokens
        assert cached % 16 == 0 and cached <= u.prompt_tokens
        if layout == "shared_prefix":
            assert cached >= system_tokens + example_tokens - 16
        else:  # only the system text (and "## Criteria\n- c") is shared
            assert cached <= system_tokens + 16
        assert u.completion_tokens > 0


def test_latency_counts_uncached_tokens():
    judge = SimJudge(None, SimParams(latency_ms=5, ms_per_uncached_token=0.5))
    h = hz.Harness(kind="split")
    first, second = (
        judge({"messages": prompts.build_messages(_long_example(), [c], h)}) for c in BINARY.criteria[:2]
    )
    for reply in (first, second):
        uncached = reply.usage.prompt_tokens - reply.usage.cached_tokens
        assert reply.delay_s == pytest.approx((5 + 0.5 * uncached) / 1000)
    assert second.delay_s < first.delay_s


# -------------------------------------------------------------------------------- the truth index


def test_unknown_answers_get_pseudo_truth_and_late_imports_are_found(engine, session):
    judge = SimJudge(engine, SimParams(reload_interval_s=0.0))
    ex = _answer("late", 1)
    messages = prompts.build_messages(ex, list(BINARY.criteria), hz.Harness())
    before = judge.decide(messages)
    assert not any(d.truth_known for d in before)
    ds = store.insert_dataset(session, "late", [{"id": "x", "question": ex.question, "context": ex.context,
                                                 "answer": ex.answer}])
    planted = [1 - d.truth for d in before]  # the opposite of the pseudo-truth, so the change shows
    store.upsert_labels(session, [
        {"example_id": store.example_ids(session, ds.id)["x"], "criterion": c.key, "annotator": "reference",
         "value": v} for c, v in zip(BINARY.criteria, planted, strict=True)
    ])
    session.commit()
    after = judge.decide(messages)
    assert all(d.truth_known for d in after)
    assert [d.truth for d in after] == planted
