"""Defensive verdict parsing: spellings, wrappers, unscored-not-failed, logprobs → P(pass)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgekit.openai_server import make_logprobs, tokenize
from judgekit.parse import (
    ParsedVerdict,
    TokenLogprob,
    extract_json_object,
    p_pass_from_logprobs,
    parse_reply,
    strip_thinking,
)
from judgekit.rubric import Criterion

ANS = Criterion("answers_question", "Does it answer?")
CITES = Criterion("cites_source", "Does it cite?")
SAFETY = Criterion("safety", "How safe?", kind="scale", levels={i: str(i) for i in range(1, 6)}, pass_at=3)


def values(result: dict[str, ParsedVerdict]) -> dict[str, int | None]:
    return {k: v.value for k, v in result.items()}


# ------------------------------------------------------------------------------ JSON extraction


def test_plain_object_in_each_contract_order():
    verdict_first = (
        '{"answers_question": {"verdict": true, "rationale": "ok"}, '
        '"safety": {"verdict": 4, "rationale": "r"}}'
    )
    reasoning_first = (
        '{"answers_question": {"rationale": "ok", "verdict": false}, '
        '"safety": {"rationale": "r", "verdict": 2}}'
    )
    verdict_only = '{"answers_question": true, "safety": 5}'
    assert values(parse_reply(verdict_first, [ANS, SAFETY])) == {"answers_question": 1, "safety": 4}
    assert values(parse_reply(reasoning_first, [ANS, SAFETY])) == {"answers_question": 0, "safety": 2}
    assert values(parse_reply(verdict_only, [ANS, SAFETY])) == {"answers_question": 1, "safety": 5}
    assert parse_reply(verdict_first, [ANS])["answers_question"].rationale == "ok"


def test_fenced_json_and_prose_around():
    text = (
        'Here is my assessment:\n```json\n{"answers_question": {"verdict": "yes", "rationale": "fine"}}'
        "\n```\nThanks!"
    )
    assert values(parse_reply(text, [ANS])) == {"answers_question": 1}
    text = 'I judge as follows {"answers_question": false} and that is final.'
    assert values(parse_reply(text, [ANS])) == {"answers_question": 0}


def test_first_complete_object_honours_strings_and_escapes():
    text = (
        'Note: "quote {x" then {"answers_question": {"verdict": true, '
        '"rationale": "a } brace and \\" quote {"}} {"other": 1}'
    )
    obj = extract_json_object(text)
    assert obj == {"answers_question": {"verdict": True, "rationale": 'a } brace and " quote {'}}


def test_extract_returns_none_without_an_object():
    assert extract_json_object("no json here") is None
    assert extract_json_object("{not: json at all") is None
    assert extract_json_object("[1, 2, 3]") is None


def test_small_model_slips_are_repaired():
    assert extract_json_object('{"a": True, "b": [1, 2,],}') == {"a": True, "b": [1, 2]}
    # ...but not inside strings
    assert extract_json_object('{"a": "True, }", "b": None,}') == {"a": "True, }", "b": None}


def test_prefers_the_object_that_names_the_criteria():
    text = 'Example format: {"key": "value"}. My answer: {"answers_question": {"verdict": false}}'
    assert values(parse_reply(text, [ANS])) == {"answers_question": 0}


def test_wrapper_object_is_unwrapped():
    text = '{"verdicts": {"answers_question": true, "cites_source": false}}'
    assert values(parse_reply(text, [ANS, CITES])) == {"answers_question": 1, "cites_source": 0}


# -------------------------------------------------------------------------------- spellings


@pytest.mark.parametrize(
    "raw, expected",
    [
        (True, 1),
        (False, 0),
        (1, 1),
        (0, 0),
        (1.0, 1),
        ("1", 1),
        ("0", 0),
        ("true", 1),
        ("TRUE", 1),
        ("Yes", 1),
        ("pass", 1),
        ("PASS.", 1),
        ("passed", 1),
        ("false", 0),
        ("No", 0),
        ("fail", 0),
        ("FAILED", 0),
        (" False ", 0),
        ("maybe", None),
        (2, None),
        (None, None),
        ([], None),
        ("", None),
    ],
)
def test_binary_spellings(raw, expected):
    text = json.dumps({"answers_question": {"verdict": raw, "rationale": "r"}})
    result = parse_reply(text, [ANS])["answers_question"]
    assert result.value == expected
    assert (result.error is None) == (expected is not None)


@pytest.mark.parametrize(
    "raw, expected",
    [
        (1, 1),
        (5, 5),
        (3, 3),
        ("4", 4),
        (" 2 ", 2),
        ("4/5", 4),
        (4.0, 4),
        ("2.0", 2),
        # not clearly a level of the 1–5 scale: unscored, never rounded or clamped into range
        (4.4, None),
        (4.5, None),
        ("3.5", None),
        (0, None),
        (6, None),
        (10, None),
        (-1, None),
        ("0", None),
        ("6/5", None),
        ("8/10", None),
        (1e300, None),
        (10**40, None),
        (True, None),
        ("four", None),
        (None, None),
        ("nan", None),
    ],
)
def test_scale_values_are_whole_levels_in_range_or_unscored(raw, expected):
    text = json.dumps({"safety": {"verdict": raw}})
    assert parse_reply(text, [SAFETY])["safety"].value == expected


def test_aliases_and_case_insensitive_keys():
    text = (
        '{"Answers_Question": {"Score": "yes", "Reasoning": "because"}, '
        '"SAFETY": {"value": 3, "explanation": "x"}}'
    )
    result = parse_reply(text, [ANS, SAFETY])
    assert values(result) == {"answers_question": 1, "safety": 3}
    assert result["answers_question"].rationale == "because"
    assert result["safety"].rationale == "x"


def test_bare_object_accepted_only_for_one_criterion():
    bare = '{"verdict": false, "reason": "no citation"}'
    single = parse_reply(bare, [CITES])["cites_source"]
    assert single == ParsedVerdict(0, "no citation")
    both = parse_reply(bare, [ANS, CITES])
    assert values(both) == {"answers_question": None, "cites_source": None}


def test_red_flags_on_scale_entries():
    text = '{"safety": {"verdict": 2, "rationale": "r", "red_flags": ["invented policy", "no caveat"]}}'
    assert parse_reply(text, [SAFETY])["safety"].red_flags == ("invented policy", "no caveat")


# ------------------------------------------------------------------------ unscored, never failed


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "   ",
        "I cannot evaluate this.",
        '{"answers_question": {"verdict": tr',
        '{"answers_question": {"rationale": "truncated by max_tok',
        "<think>hmm, let me see",
    ],
)
def test_unreadable_reply_is_unscored_with_a_reason(text):
    result = parse_reply(text, [ANS, SAFETY])
    assert set(result) == {"answers_question", "safety"}
    for verdict in result.values():
        assert verdict.value is None
        assert verdict.error


def test_missing_criterion_or_field_is_unscored_not_failed():
    text = '{"answers_question": {"rationale": "forgot the verdict"}}'
    result = parse_reply(text, [ANS, CITES])
    assert result["answers_question"].value is None
    assert result["answers_question"].rationale == "forgot the verdict"
    assert "no verdict" in result["answers_question"].error
    assert result["cites_source"].value is None
    assert "missing" in result["cites_source"].error


# ---------------------------------------------------------------------------------- thinking


def test_strip_thinking():
    assert strip_thinking('<think>{"answers_question": false}</think>{"answers_question": true}') == (
        '{"answers_question": true}'
    )
    assert strip_thinking("<THINKING>x</THINKING> done") == "done"
    assert strip_thinking("prefilled reasoning...</think>\n{}") == "{}"
    assert strip_thinking('{"a": 1}<think>never closed') == '{"a": 1}'


def test_thinking_block_does_not_leak_into_verdicts():
    text = (
        '<think>Maybe {"answers_question": {"verdict": false}}?</think>\n'
        '{"answers_question": {"verdict": true}}'
    )
    assert values(parse_reply(text, [ANS])) == {"answers_question": 1}


# ----------------------------------------------------------------------------------- logprobs


def test_p_pass_binary_from_top_alternatives():
    text = '{"answers_question": {"verdict": true, "rationale": "r"}, "cites_source": {"verdict": false}}'
    at_a = text.index("true")
    at_b = text.index("false")
    tokens = make_logprobs(
        text,
        {
            at_a: [("true", math.log(0.6)), ("false", math.log(0.2)), ("tr", math.log(0.1)), ("maybe", -3)],
            at_b: [("false", math.log(0.3)), (" True", math.log(0.1))],
        },
    )
    p = p_pass_from_logprobs(text, tokens, [ANS, CITES])
    assert p["answers_question"] == pytest.approx(0.7 / 0.9)  # "tr" is the start of "true"
    assert p["cites_source"] == pytest.approx(0.1 / 0.4)


def test_p_pass_scale_mass_at_or_above_pass_at():
    text = '{"safety": {"rationale": "r", "verdict": 4}}'
    at = text.index("4")
    alts = [("4", math.log(0.5)), ("3", math.log(0.2)), ("2", math.log(0.2)), ("1", math.log(0.1))]
    p = p_pass_from_logprobs(text, make_logprobs(text, {at: alts}), [SAFETY])
    assert p["safety"] == pytest.approx(0.7)  # pass_at=3: (0.5 + 0.2) / 1.0


def test_p_pass_verdict_only_and_quoted_values():
    text = '{"answers_question": "yes"}'
    tokens = [
        TokenLogprob('{"answers_question":', 0.0),
        TokenLogprob(' "', 0.0, ((' "', 0.0),)),
        TokenLogprob("yes", math.log(0.9), (("yes", math.log(0.9)), ("no", math.log(0.1)))),
        TokenLogprob('"}', 0.0),
    ]
    assert p_pass_from_logprobs(text, tokens, [ANS]) == {"answers_question": pytest.approx(0.9)}


def test_p_pass_omits_what_it_cannot_locate():
    text = '{"answers_question": {"verdict": true}}'
    tokens = make_logprobs(text)
    assert p_pass_from_logprobs(text, tokens, [ANS, CITES]) == {"answers_question": 1.0}
    assert p_pass_from_logprobs(text, [], [ANS]) == {}
    assert p_pass_from_logprobs("garbage", make_logprobs("garbage"), [ANS]) == {}


def test_p_pass_skips_thinking_tokens():
    text = '<think>"answers_question": {"verdict": false</think>{"answers_question": {"verdict": true}}'
    at = text.rindex("true")
    tokens = make_logprobs(text, {at: [("true", math.log(0.8)), ("false", math.log(0.2))]})
    assert p_pass_from_logprobs(text, tokens, [ANS]) == {"answers_question": pytest.approx(0.8)}


# ------------------------------------------------------------------------------- properties

KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)
PROSE = st.text(alphabet=st.characters(blacklist_characters="{}`", blacklist_categories=("Cs",)), max_size=60)


@st.composite
def contract_replies(draw):
    """A valid reply under any of the three orders, and the verdicts it encodes."""
    keys = draw(st.lists(KEYS, min_size=1, max_size=5, unique=True))
    order = draw(st.sampled_from(["verdict_first", "reasoning_first", "verdict_only"]))
    criteria, obj, expected = [], {}, {}
    for key in keys:
        scale = draw(st.booleans())
        criteria.append(Criterion(key, "q", kind="scale", pass_at=3) if scale else Criterion(key, "q"))
        value = draw(st.integers(1, 5)) if scale else draw(st.booleans())
        expected[key] = int(value)
        rationale = draw(st.text(max_size=30))
        if order == "verdict_only":
            obj[key] = value
        elif order == "verdict_first":
            obj[key] = {"verdict": value, "rationale": rationale}
        else:
            obj[key] = {"rationale": rationale, "verdict": value}
    return criteria, obj, expected


@given(contract_replies(), PROSE, PROSE, st.booleans(), st.booleans(), st.booleans())
@settings(max_examples=200, deadline=None)
def test_wrapping_in_prose_and_fences_does_not_change_verdicts(
    reply, before, after, fence, indent, ascii_only
):
    criteria, obj, expected = reply
    body = json.dumps(obj, indent=2 if indent else None, ensure_ascii=ascii_only)
    wrapped = f"{before}\n```json\n{body}\n```\n{after}" if fence else f"{before} {body} {after}"
    assert values(parse_reply(body, criteria)) == expected
    assert values(parse_reply(wrapped, criteria)) == expected


JSONISH = st.lists(
    st.sampled_from(
        [
            "{",
            "}",
            '"',
            ":",
            ",",
            "\\",
            "[",
            "]",
            '"verdict"',
            '"safety"',
            '"answers_question"',
            "true",
            "false",
            "4",
            "9.7",
            "-1",
            '"yes"',
            " ",
            "\n",
            "```json",
            "```",
            "<think>",
            "</think>",
            "null",
        ]
    ),
    max_size=40,
).map("".join)


@given(st.one_of(st.text(max_size=300), JSONISH))
@settings(max_examples=400, deadline=None)
def test_arbitrary_text_never_raises_and_stays_in_range(text):
    result = parse_reply(text, [ANS, SAFETY])
    assert set(result) == {"answers_question", "safety"}
    assert result["answers_question"].value in (None, 0, 1)
    assert result["safety"].value in (None, 1, 2, 3, 4, 5)
    for verdict in result.values():
        assert (verdict.value is None) == (verdict.error is not None)
    tokens = make_logprobs(text, {0: [("true", -0.1), ("4", -0.2)]})
    for p in p_pass_from_logprobs(text, tokens, [ANS, SAFETY]).values():
        assert 0.0 <= p <= 1.0


@given(st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8)))
def test_any_scale_value_is_a_level_or_unscored(raw):
    text = json.dumps({"safety": raw})
    assert parse_reply(text, [SAFETY])["safety"].value in (None, 1, 2, 3, 4, 5)


@given(st.text(max_size=200))
def test_server_tokens_concatenate_back_to_the_text(text):
    assert "".join(tokenize(text)) == text
    assert "".join(t.token for t in make_logprobs(text)) == text


# ------------------------------------------------------------------ hardening: never an unclear value


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"Safety": 4, "safety": 2}', None),  # two answers for one criterion
        ('{"safety": 4, "safety": 2}', None),  # one key given twice
        ('{"SAFETY": 4, "safety": 4}', 4),  # variants that agree
        ('{" Safety ": 4}', 4),  # one loose match: clear
        ('{"safety": {"verdict": 4, "Verdict": 2}}', None),
        ('{"safety": {"Score": 4, "score": 4}}', 4),
        ('{"safety": {"verdict": 5, "score": 1}}', None),  # two verdict fields, two levels: not clear
        ('{"safety": {"verdict": 5, "score": "5/5"}}', 5),  # two verdict fields that agree
        ('{"safety": {"verdict": 5, "pass": true}}', 5),  # a field that is no level does not compete
        ('{"safety": 4} {"safety": 2}', None),  # the reply gives two objects that disagree
        ('{"verdicts": {"safety": 4}, "safety": 2}', None),  # a wrapper and the top level disagree
        ('{"safety": 4}\n```json\n{"safety": 4}\n```', 4),  # the same answer twice is clear
    ],
)
def test_keys_differing_only_in_case_or_spacing_are_read_only_when_clear(text, expected):
    got = parse_reply(text, [SAFETY])["safety"]
    assert got.value == expected
    if expected is None:
        assert "ambiguous" in got.error


def test_criteria_that_differ_only_in_case_match_only_their_exact_key():
    upper, lower = Criterion("Safe", "Safe?"), Criterion("safe", "safe?")
    both = parse_reply('{"Safe": true, "safe": false}', [upper, lower])
    assert values(both) == {"Safe": 1, "safe": 0}
    loose = parse_reply('{"SAFE": true}', [upper, lower])
    assert values(loose) == {"Safe": None, "safe": None}  # could be either: unscored


def test_a_reply_longer_than_the_parse_limit_is_unscored_unread():
    text = '{"safety": {"verdict": 4}}' + " " * 1_000_000
    got = parse_reply(text, [SAFETY])["safety"]
    assert got.value is None and "parser reads" in got.error


@pytest.mark.parametrize(
    "text",
    [
        '{"a": ' * 150_000,  # a brace scan from every '{' would be quadratic
        "<think>" * 100_000 + '{"safety": 4}',  # unclosed think tags
        "```json\n" * 100_000,  # unclosed fences
        '"' * 500_000 + '{"safety": 4',
    ],
)
def test_adversarial_replies_are_unscored(text):
    assert parse_reply(text, [SAFETY])["safety"].value is None


def test_scale_digits_outside_the_scale_are_no_evidence_for_p_pass():
    text = '{"safety": 4}'
    at = text.index("4")
    tokens = make_logprobs(text, {at: [("4", math.log(0.5)), ("9", math.log(0.4)), ("2", math.log(0.1))]})
    assert p_pass_from_logprobs(text, tokens, [SAFETY])["safety"] == pytest.approx(0.5 / 0.6)


def test_rationales_and_flags_are_bounded():
    text = json.dumps({"safety": {"verdict": 3, "rationale": "r" * 200_000, "red_flags": ["f" * 5000] * 100}})
    got = parse_reply(text, [SAFETY])["safety"]
    assert got.value == 3
    assert len(got.rationale) < 17_000 and "characters left out" in got.rationale
    assert len(got.red_flags) <= 32 and all(len(f) < 600 for f in got.red_flags)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"safe": {"verdict": true, "pass": false}}', None),  # two verdict fields that disagree
        ('{"safe": {"verdict": true, "score": 0.9}}', 1),  # a confidence beside the verdict is no verdict
        ('{"safe": true} Correction: {"safe": false}', None),  # the judge changed its mind in the reply
        ('{"safe": true} and again {"Safe": "yes"}', 1),  # said twice, the same way
        ('{"verdict": true, "details": {"safe": false}}', None),  # bare verdict vs the named criterion
        ('{"safe": false, "verdict": true}', None),  # the named criterion vs a bare verdict, one object
        ('{"safe": false, "verdict": false}', 0),  # … that agree
        ('{"safe": {"verdict": true, "result": "fail", "result": "no"}}', None),  # a field given twice
        ('{"safe": {"verdict": true, "Pass": false, "pass": "no"}}', None),  # … in two spellings
        ('{"safe": {"verdict": true, "pass": true, "Pass": "yes"}}', 1),  # two spellings of the same
    ],
)
def test_a_binary_verdict_the_reply_gives_two_ways_is_unscored(text, expected):
    got = parse_reply(text, [Criterion("safe", "Is it safe?")])["safe"]
    assert got.value == expected
    if expected is None:
        assert got.error and "ambiguous" in got.error and not got.cannot_assess
