"""Confidence of a typed answer and escalation when it is low (SPEC §27).

`confidence=logprobs` reads the answer's probability from the response's token logprobs:
the answer is asked for as JSON in the response's content (not in tool-call arguments,
whose tokens carry no logprobs), and the probability is the product of the probabilities
of the tokens that spell its value. `confidence=vote:N` asks N times and reports the share
of answers that agree with the most common one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError, TemplateRuntimeError

#: Model settings that ask an OpenAI-compatible endpoint for the content's token logprobs.
LOGPROB_SETTINGS: Mapping[str, Any] = {"openai_logprobs": True, "openai_top_logprobs": 1}


@dataclass(frozen=True)
class ConfidenceMethod:
    kind: str  # "logprobs" or "vote"
    votes: int = 1

    @property
    def logprobs(self) -> bool:
        return self.kind == "logprobs"


def method_of(control: Mapping[str, Any]) -> ConfidenceMethod | None:
    asked = control.get("confidence")
    if asked is None:
        return None
    if asked == "logprobs":
        return ConfidenceMethod("logprobs")
    return ConfidenceMethod("vote", int(str(asked).partition(":")[2]))


def check_logprob_models(run: Any) -> None:
    """Before any request: `confidence=logprobs` on the test model (`--model test`, a dry run)
    is refused, naming both. Its answers carry no token logprobs, so such a slot could never
    be answered (it made three requests, then failed on the form of its answer)."""
    from pydantic_ai.models.test import TestModel

    from ..syntax.nodes import JinjaValue

    for plan in run.program.plans.values():
        if plan.control.get("confidence") != "logprobs":
            continue
        name = plan.settings.get("model")
        if isinstance(name, JinjaValue):
            continue  # known when the slot runs
        model = run.model_for(name if isinstance(name, str) else None)
        if isinstance(model, TestModel):  # (a wrapper answers for itself: sd explain --cache's recorder)
            raise ConfigurationError(
                f"slot {plan.slot.key!r}: confidence=logprobs needs token logprobs, and the test model (a dry run) gives "
                "none; for a dry run use confidence=vote:N, or run on a model that returns logprobs (docs/confidence.md)"
            )


# -- logprobs --------------------------------------------------------------------------
def response_logprobs(response: Any) -> list[Mapping[str, Any]] | None:
    """The content tokens' logprobs of one ModelResponse, as pydantic-ai's OpenAI models keep
    them: the chat model in `provider_details['logprobs']`, the Responses model on each
    TextPart. None when the response carries none."""
    details = getattr(response, "provider_details", None) or {}
    tokens = details.get("logprobs")
    if isinstance(tokens, list) and tokens:
        return tokens
    found: list[Mapping[str, Any]] = []
    for part in getattr(response, "parts", ()):
        part_tokens = (getattr(part, "provider_details", None) or {}).get("logprobs")
        if isinstance(part_tokens, list):
            found += part_tokens
    return found or None


def answer_probability(tokens: Sequence[Mapping[str, Any]]) -> float | None:
    """The probability of the answer's value in a JSON content `{"response": VALUE}`: the
    product of the probabilities of every token that spells part of VALUE (a multi-token
    answer multiplies its tokens; the closing quote of a string belongs to it). None when the
    tokens spell no such object."""
    text = "".join(str(t.get("token", "")) for t in tokens)
    key = text.find('"response"')
    if key < 0:
        return None
    colon = text.find(":", key + len('"response"'))
    if colon < 0:
        return None
    start = colon + 1
    while start < len(text) and text[start] in " \t\r\n":
        start += 1
    try:
        _, end = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return None
    total, offset = 0.0, 0
    for token in tokens:
        piece = str(token.get("token", ""))
        if offset < end and offset + len(piece) > start:
            total += float(token["logprob"])
        offset += len(piece)
    return min(1.0, math.exp(total))


def logprob_confidence(messages: Sequence[Any], slot: str, model_label: str) -> float:
    """The answer's probability from the last response of a run, or a ConfigurationError naming the
    model when it returned no logprobs (never a silent 1.0)."""
    from pydantic_ai.messages import ModelResponse

    response = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
    tokens = response_logprobs(response) if response is not None else None
    if not tokens:
        raise ConfigurationError(
            f"slot {slot!r}: confidence=logprobs needs token logprobs, but model {model_label} returned none; "
            "use a model that returns them (OpenAI chat models, a llama.cpp server) or confidence=vote:N"
        )
    probability = answer_probability(tokens)
    if probability is None:
        raise TemplateRuntimeError(
            f"slot {slot!r}: confidence=logprobs could not find the answer in the tokens of model {model_label}'s "
            "response (expected JSON content {\"response\": …})"
        )
    return probability


# -- votes -------------------------------------------------------------------------------
def vote_share(values: Sequence[Any]) -> tuple[int, float]:
    """(index of the first answer of the most common value, the share that agree with it)."""
    keys = [json.dumps(v, sort_keys=True, default=str) for v in values]
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    best = max(counts.values())
    winner = next(i for i, key in enumerate(keys) if counts[key] == best)
    return winner, best / len(values)


async def vote(
    first: Any, votes: int, ask: Callable[[], Awaitable[Any]], to_value: Callable[[Any], Any]
) -> tuple[Any, float, Any]:
    """(the run whose answer most agree with, the share that agree, the last run): `first`
    and votes - 1 more asks of the same request."""
    runs = [first]
    for _ in range(votes - 1):
        runs.append(await ask())
    winner, share = vote_share([to_value(run.output) for run in runs])
    return runs[winner], share, runs[-1]


# -- how the answer is asked for ---------------------------------------------------------
def native_json(model: Any) -> bool:
    """Whether the model takes a JSON schema for its content (OpenAI, llama.cpp: the tokens
    are constrained to the schema); otherwise the schema goes in the prompt."""
    profile = getattr(model, "profile", None)
    if isinstance(profile, Mapping):  # pydantic-ai's profiles are TypedDicts
        return bool(profile.get("supports_json_schema_output"))
    return bool(getattr(profile, "supports_json_schema_output", False))


def content_output(output_type: Any, native: bool) -> Any:
    """The answer as JSON in the response's content, whose tokens carry logprobs."""
    from pydantic_ai.output import NativeOutput, PromptedOutput

    return NativeOutput(output_type) if native else PromptedOutput(output_type)


def with_logprobs(settings: Any) -> Any:
    """The attempt's settings asking for the content tokens' logprobs."""
    if callable(settings):
        return lambda ctx: {**settings(ctx), **LOGPROB_SETTINGS}
    return {**settings, **LOGPROB_SETTINGS}


def escalation(control: Mapping[str, Any], measured: float) -> str | None:
    """The model a less confident answer escalates to, or None (confident enough, or no
    escalation asked for)."""
    floor = control.get("min_confidence")
    target = control.get("escalate")
    if floor is None or target is None or measured >= float(floor):
        return None
    return str(target)


def asks_a_person(program: Any) -> list[str]:
    """The slots with `escalate=approve` (SPEC §27: a less confident answer goes to a person)."""
    found = []
    for plan in program.plans.values():
        target = plan.control.get("escalate")
        if isinstance(target, str) and target.strip() == "approve":
            found.append(plan.key)
    return found


def check_votes(program: Any, ceiling: Any) -> None:
    """Before any model call: `confidence=vote:N` asks N times, each a request of the slot, so
    N may not exceed the slot's request limit (the caller's `limits=`, default 20, lowered by
    `max_iter=`). Without this a template could make any number of requests from one slot
    (issue 47: `vote:5000` made 5,000 on the host's keys). A positioned TemplateSyntaxError."""
    from ..limits import clamp_limits
    from ..syntax.nodes import JinjaValue
    from ..syntax.source import SourceMap

    for plan in program.plans.values():
        asked = plan.control.get("confidence")
        if not isinstance(asked, str) or not asked.startswith("vote:") or isinstance(asked, JinjaValue):
            continue
        votes = int(asked.partition(":")[2])
        limit = clamp_limits(ceiling, plan.control.get("max_iter"), None, plan.key, warn=False).request_limit
        if limit is None or votes <= limit:
            continue
        option = next(o for o in plan.slot.options if o.key == "confidence")
        pos = option.value_pos or option.pos
        template = program.template
        raise SourceMap(template.source, template.filename).for_file(pos.filename).error(
            f"slot {plan.key!r}: confidence={asked} asks {votes:,} times, more than the slot's request limit of {limit}",
            pos.line, pos.column, "lower N, or raise the caller's limits= (UsageLimits(request_limit=…))",
        )
