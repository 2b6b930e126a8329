""""Test this endpoint": what a run would meet, found out with one tiny judge call before the run starts.

Where this sits in the flow: beside the runner, on the one client seam (:func:`judgekit.client.make_client`,
:func:`judgekit.client.complete`) and the same prompt builder and parser a run uses. Three steps:

1. **models** — ``GET /models``: is the model listed? (Some servers list nothing, or serve any name;
   an empty list is reported, not failed.) The list also tells judgekit's simulated judge apart.
2. **structured output** — the ``auto`` ladder (json_schema → json_object with a schema → prompt-only
   JSON) on one tiny one-criterion judge call; the mode that worked is reported and remembered for the
   endpoint, as a run would.
3. **one tiny call** — the reply parsed like any verdict: scored, or *unscored* with the parser's reason.

Every failure is one readable line; the API key never appears in it (the client scrubs error text).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import openai

from judgekit import client as client_mod
from judgekit.harness import Harness
from judgekit.parse import parse_reply
from judgekit.prompts import ExampleText, build_messages, response_schema
from judgekit.rubric import Criterion

__all__ = ["EndpointCheck", "Step", "check_endpoint"]

PROBE_CRITERION = Criterion("answers_question", "Does the answer address the user's actual question?")
PROBE_EXAMPLE = ExampleText(question="How many days are in a week?", context="A week has seven days.",
                            answer="A week has seven days.")
SIMULATED_OWNER = "simulated"  # what judgekit's simulated judge says in GET /models


@dataclass(frozen=True)
class Step:
    """One step of the check: its name, whether it passed, and what was found (one line)."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class EndpointCheck:
    """The three steps, the structured-output mode found (``None`` if no call succeeded), and whether the
    endpoint is judgekit's simulated judge."""

    steps: list[Step] = field(default_factory=list)
    mode: str | None = None
    simulated: bool = False

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps)


async def _check(judge: client_mod.JudgeConfig) -> EndpointCheck:
    try:
        http = client_mod.make_client(judge)
    except client_mod.JudgeConfigError as exc:
        return EndpointCheck([Step("models", False, str(exc))])
    steps: list[Step] = []
    simulated = False
    try:
        page = await asyncio.wait_for(http.models.list(), timeout=judge.timeout_s)
        listed = [(m.id, str(getattr(m, "owned_by", "") or "")) for m in page.data]
        simulated = any(SIMULATED_OWNER in owner for _, owner in listed)
        names = [m for m, _ in listed]
        if not names:
            steps.append(Step("models", True, "the endpoint lists no models (many local servers serve any name)"))
        elif judge.model in names:
            steps.append(Step("models", True, f"{judge.model} is listed ({len(names)} model{'s' * (len(names) > 1)})"))
        else:
            shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
            steps.append(Step("models", False, f"{judge.model} is not among the listed models: {shown}"))
    except openai.APIStatusError as exc:
        if exc.status_code in (401, 403):
            steps.append(Step("models", False, f"the endpoint refused the key (HTTP {exc.status_code})"))
            return EndpointCheck(steps)
        steps.append(Step("models", True, f"no model list (HTTP {exc.status_code}); going on with the call"))
    except (openai.APITimeoutError, TimeoutError):
        steps.append(Step("models", False, f"no answer from {judge.base_url} within {judge.timeout_s:g} s"))
        return EndpointCheck(steps)
    except openai.APIConnectionError:
        steps.append(Step("models", False, f"could not connect to {judge.base_url} (is the server running?)"))
        return EndpointCheck(steps)

    harness = Harness(kind="split", order="verdict_first")
    criteria = [PROBE_CRITERION]
    messages = build_messages(PROBE_EXAMPLE, criteria, harness)
    result = await client_mod.complete(http, judge, messages, schema=response_schema(criteria, harness.order),
                                       structured="auto")
    if not result.ok:
        steps.append(Step("structured output", False, f"no mode worked: {result.error}"))
        steps.append(Step("one tiny call", False, result.error or "the call failed"))
        return EndpointCheck(steps, None, simulated)
    probes = result.attempts - result.retries - 1
    tried = f" ({probes} richer mode{'s' if probes != 1 else ''} refused first)" if probes > 0 else ""
    steps.append(Step("structured output", True, f"{result.structured_mode}{tried}"))
    parsed = parse_reply(result.text, criteria)[PROBE_CRITERION.key]
    tokens = f"{result.prompt_tokens or 0} + {result.completion_tokens or 0} tokens"
    if parsed.value is None:
        steps.append(Step("one tiny call", False, f"the reply was not a verdict ({parsed.error}); {tokens}"))
    else:
        verdict = "pass" if parsed.value else "fail"
        steps.append(Step("one tiny call", True, f"a verdict ({verdict}) in {result.latency_s:.1f} s; {tokens}"))
    return EndpointCheck(steps, result.structured_mode, simulated)


def check_endpoint(judge: client_mod.JudgeConfig) -> EndpointCheck:
    """Run the check (see the module docstring) and return its steps; never raises for endpoint faults."""
    return asyncio.run(_check(judge))
