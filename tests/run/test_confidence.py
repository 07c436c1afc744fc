"""SPEC §27: the confidence of a typed answer (from the response's token logprobs, or the
share of N asks that agree) and the escalation of a less confident answer to a larger model.

The logprobs come from a scripted OpenAI-compatible server on 127.0.0.1, in the shape
OpenAI and llama.cpp send them; the votes from FunctionModel scripts.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from pydantic_ai.usage import UsageLimits

import struckdown as sd
from logprob_server import LogprobServer, answer_tokens
from scripted import Script
from struckdown.incremental import ApprovalDecided, ApprovalRequested, SlotCompleted
from struckdown.models import openai_compatible

PICK = "Sky colour? [[pick:c|red, blue, confidence=logprobs]]"


def completed(template: str, **options: Any) -> SlotCompleted:
    async def collect() -> list[Any]:
        return [e async for e in sd.complete_incremental_async(template, **options) if isinstance(e, SlotCompleted)]

    (event,) = asyncio.run(collect())
    return event


def test_the_confidence_is_the_probability_of_the_answer_tokens() -> None:
    # "blue" in two tokens, 0.9 and 0.8: the answer's probability is their product
    server = LogprobServer({"small": [answer_tokens("blue", 0.9, 0.8)]})
    with server.serving() as url:
        event = completed(PICK, model=openai_compatible("small", url, None))
    assert event.result.output == "blue"
    assert event.confidence == pytest.approx(0.72) and event.result.confidence == pytest.approx(0.72)
    assert event.result.to_dict()["confidence"] == pytest.approx(0.72)
    assert event.result.escalated_to is None
    (body,) = server.bodies
    # the answer comes as JSON content (its tokens carry logprobs), not as a tool call
    assert body["logprobs"] is True and body["top_logprobs"] == 1
    assert "tools" not in body and body["response_format"]["type"] == "json_schema"


def test_the_structure_around_the_answer_does_not_count() -> None:
    tokens = [('{"', 0.5), ("response", 0.5), ('":', 0.5), (' "', 1.0), ("red", 0.6), ('"}', 0.5)]
    server = LogprobServer({"small": [tokens]})
    with server.serving() as url:
        result = sd.complete(PICK, model=openai_compatible("small", url, None))
    # ' "' opens the value and '"}' closes it: both are part of the answer's tokens
    assert result["c"] == "red" and result.results["c"].confidence == pytest.approx(0.3)


def test_a_bool_and_an_int_answer_have_their_probability() -> None:
    server = LogprobServer({"small": [answer_tokens(True, 0.95), answer_tokens(42, 0.5, 0.5)]})
    with server.serving() as url:
        result = sd.complete(
            "Is it? [[bool:ok|confidence=logprobs]] How many? [[int:n|confidence=logprobs]]",
            model=openai_compatible("small", url, None),
        )
    assert result["ok"] is True and result.results["ok"].confidence == pytest.approx(0.95)
    assert result["n"] == 42 and result.results["n"].confidence == pytest.approx(0.25)


def test_a_model_without_logprobs_is_an_error_naming_it() -> None:
    server = LogprobServer({"plain": [answer_tokens("red", 0.9)]}, without_logprobs=frozenset({"plain"}))
    with server.serving() as url:
        with pytest.raises(sd.ConfigurationError, match=r"model openai:plain@http://127\.0\.0\.1:\d+/v1 returned none"):
            sd.complete(PICK, model=openai_compatible("plain", url, None))
    assert len(server.bodies) == 1  # at the first answer
    script = Script(lambda call: '{"response": "red"}')
    with pytest.raises(sd.ConfigurationError, match="confidence=logprobs needs token logprobs, but model scripted returned none"):
        sd.complete(PICK, model=script.model())


def test_a_vote_reports_the_share_that_agree_and_bills_every_ask() -> None:
    answers = iter(["red", "blue", "red", "red", "blue"])
    script = Script(lambda call: next(answers))
    result = sd.complete(
        "Sky colour? [[pick:c|red, blue, confidence=vote:5, temperature=0.7]]", model=script.model()
    )
    assert result["c"] == "red" and result.results["c"].confidence == pytest.approx(0.6)
    assert result.results["c"].usage.requests == 5 and result.usage.requests == 5
    assert len(script.calls) == 5
    assert [c.info.model_settings["temperature"] for c in script.calls] == [0.7] * 5  # type: ignore[index]
    assert all(c.turns == script.calls[0].turns for c in script.calls)  # the same request each time


def test_a_tie_goes_to_the_first_answer() -> None:
    answers = iter([3, 4])
    result = sd.complete("How many? [[int:s|confidence=vote:2]]", model=Script(lambda call: next(answers)).model())
    assert result["s"] == 3 and result.results["s"].confidence == 0.5


def test_every_vote_counts_in_the_run_budget() -> None:
    script = Script(lambda call: "red")
    with pytest.raises(sd.StruckdownError, match="request"):
        sd.complete(PICK.replace("logprobs", "vote:3"), model=script.model(), run_limits=UsageLimits(request_limit=2))
    assert len(script.calls) == 2


def test_a_less_confident_answer_escalates_to_the_named_model(monkeypatch: pytest.MonkeyPatch) -> None:
    server = LogprobServer({"small": [answer_tokens("red", 0.55)], "big": [answer_tokens("blue", 1.0)]})
    template = "Sky colour? [[pick:c|red, blue, confidence=logprobs, min_confidence=0.8, escalate=big]]"
    with server.serving() as url:
        monkeypatch.setenv("LLM_API_BASE", url)
        event = completed(template, model=openai_compatible("small", url, None))
    result = event.result
    assert result.output == "blue" and result.escalated_to == "big"
    assert result.confidence == pytest.approx(0.55)  # the confidence that made it escalate
    assert result.fallback_used is None
    assert result.usage.requests == 2  # both answers are billed
    small, big = server.bodies
    assert small["model"] == "small" and small["logprobs"] is True
    assert big["model"] == "big" and "logprobs" not in big  # the larger model's answer is taken as it is
    assert big["messages"][-1] == small["messages"][-1] == {"role": "user", "content": "Sky colour?"}


def test_a_confident_answer_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    server = LogprobServer({"small": [answer_tokens("red", 0.9)], "big": []})
    template = "Sky colour? [[pick:c|red, blue, confidence=logprobs, min_confidence=0.8, escalate=big]]"
    with server.serving() as url:
        monkeypatch.setenv("LLM_API_BASE", url)
        result = sd.complete(template, model=openai_compatible("small", url, None))
    assert result["c"] == "red" and result.results["c"].escalated_to is None
    assert [b["model"] for b in server.bodies] == ["small"]


def test_a_split_vote_escalates() -> None:
    small = Script(lambda call: "red" if len(small.calls) != 2 else "blue")
    big = Script(lambda call: "blue")
    env = sd.Environment(fallback=big.model("big"))
    template = "Sky? [[pick:c|red, blue, confidence=vote:3, min_confidence=0.9, escalate=test]]"
    result = env.complete(template, model=small.model("small"))
    # 2 of 3 agree (0.67 < 0.9): asked again on the `test` model
    assert result.results["c"].confidence == pytest.approx(2 / 3)
    assert result.results["c"].escalated_to == "test" and result.results["c"].usage.requests == 4
    assert big.calls == []  # the escalation is not the fallback


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("[[c|confidence=logprobs]]", "unknown option 'confidence' for a respond slot"),
        ("[[pick:c|a, b, confidence=vote:1]]", "bad value for confidence: expected logprobs or vote:N"),
        ("[[pick:c|a, b, confidence=maybe]]", "bad value for confidence"),
        ("[[pick:c|a, b, confidence=logprobs, min_confidence=0.8]]", "min_confidence= needs escalate="),
        ("[[pick:c|a, b, confidence=logprobs, escalate=big]]", "escalate= needs min_confidence="),
        ("[[pick:c|a, b, min_confidence=0.8, escalate=big]]", "min_confidence= needs confidence="),
        ("[[pick:c|a, b, confidence=logprobs, min_confidence=2, escalate=big]]", "between 0 and 1"),
    ],
)
def test_confidence_options_are_checked_before_any_call(template: str, message: str) -> None:
    script = Script(lambda call: "a")
    with pytest.raises(sd.TemplateSyntaxError, match=message):
        sd.complete(template, model=script.model())
    assert script.calls == []


def test_answer_probability_of_a_split_value() -> None:
    from struckdown.run.confidence import answer_probability

    tokens = [{"token": '{"response":"', "logprob": 0.0}, {"token": "bl", "logprob": math.log(0.5)},
              {"token": 'ue"', "logprob": math.log(0.5)}, {"token": "}", "logprob": math.log(0.1)}]
    assert answer_probability(tokens) == pytest.approx(0.25 * 1.0)  # '{"response":"' opens the value
    assert answer_probability([{"token": "no json", "logprob": 0.0}]) is None


# -- escalate=approve: a person picks the answer (the approval machinery, SPEC §12) -----------
APPROVE = "Sky? [[pick:c|red, blue, confidence=vote:3, temperature=1, min_confidence=0.9, escalate=approve]] Then [[d]]"
ASKED = {"answer": "red", "confidence": pytest.approx(2 / 3), "choices": ["red", "blue"]}


def split_vote() -> Script:
    answers = iter(["red", "blue", "red"])
    return Script(lambda call: next(answers) if call.schema else f"after {call.turns[-2][1]}")


async def _events(run: Any) -> list[Any]:
    return [event async for event in run]


def test_escalate_approve_asks_the_person_who_picks_the_answer() -> None:
    script = split_vote()
    asked: list[sd.ApprovalRequest] = []
    events = asyncio.run(_events(sd.complete_incremental_async(
        APPROVE, model=script.model(), approve=lambda request: asked.append(request) or "blue"
    )))
    result = events[-1].result
    approvals = [e for e in events if isinstance(e, (ApprovalRequested, ApprovalDecided))]
    assert approvals == [ApprovalRequested("c", "c.1", "@answer", ASKED), ApprovalDecided("c", "c.1", True, "blue")]
    (request,) = asked
    assert (request.id, request.slot, request.tool_name, request.arguments) == ("c.1", "c", "@answer", ASKED)
    assert result["c"] == "blue" and result.results["c"].confidence == pytest.approx(2 / 3)
    assert result.results["c"].usage.requests == 3 and len(script.calls) == 4
    assert script.calls[-1].turns == [("user", "Sky?"), ("assistant", "blue"), ("user", "Then")]  # [[d]] reads it


def test_escalate_approve_keeps_the_answer_on_true_and_names_the_choices_on_a_bad_one() -> None:
    assert sd.complete(APPROVE, model=split_vote().model(), approve=lambda request: True)["c"] == "red"
    with pytest.raises(sd.TemplateRuntimeError, match="the answer 'green' does not fit the slot; give one of red, blue"):
        sd.complete(APPROVE, model=split_vote().model(), approve=lambda request: "green")


def test_escalate_approve_pauses_and_resumes_with_the_chosen_answer() -> None:
    import json

    script = split_vote()
    with pytest.raises(sd.Paused) as caught:
        sd.complete(APPROVE, model=script.model())
    (request,) = caught.value.requests
    assert (request.id, request.tool_name, request.arguments) == ("c.1", "@answer", ASKED)
    assert len(script.calls) == 3 and "c" not in caught.value.results
    state = json.loads(json.dumps(caught.value.state))  # survives a trip through JSON
    after = Script(lambda call: f"after {call.turns[-2][1]}")
    result = sd.resume(state, {"c.1": "blue"}, model=after.model())
    events = asyncio.run(_events(sd.resume_incremental_async(state, {"c.1": "blue"}, model=Script(lambda c: "x").model())))
    assert [e for e in events if isinstance(e, ApprovalDecided)] == [ApprovalDecided("c", "c.1", True, "blue")]
    assert result["c"] == "blue" and result.results["c"].confidence == pytest.approx(2 / 3)
    assert result.results["c"].usage.requests == 3  # the three asks before the pause
    assert len(after.calls) == 1  # only [[d]]: the decided slot is not asked again
    assert after.calls[0].turns == [("user", "Sky?"), ("assistant", "blue"), ("user", "Then")]
    with pytest.raises(ValueError, match="no decision for 'c.1'"):
        sd.resume(state, {}, model=after.model())


def test_measured_answers_are_not_served_from_the_response_cache() -> None:
    from memory_cache import MemoryCache

    cache = MemoryCache()
    script = Script(lambda call: "red" if call.last_user == "Sky?" else 3)
    template = "Sky? [[pick:c|red, blue, confidence=vote:2]] Count [[int:n]]"
    for _ in range(2):
        result = sd.complete(template, model=script.model(), cache=cache)
        assert result.results["c"].confidence == 1.0
    # the vote asks twice each run; [[n]] is asked once and then served from the cache
    assert [c.last_user for c in script.calls] == ["Sky?", "Sky?", "Count", "Sky?", "Sky?"]


def test_a_model_that_takes_a_json_schema_gets_it_as_response_format() -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    server = LogprobServer({"gpt-4o": [answer_tokens("blue", 0.5, 0.5)]})
    with server.serving() as url:
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=url, api_key="test-key"))
        result = sd.complete(PICK, model=model)
    assert result["c"] == "blue" and result.results["c"].confidence == pytest.approx(0.25)
    (body,) = server.bodies
    assert body["response_format"]["type"] == "json_schema" and "tools" not in body
    assert body["response_format"]["json_schema"]["schema"]["properties"]["response"]["anyOf"][0]["enum"] == ["red", "blue"]


TEST_MODEL_REFUSED = (
    "slot 'c': confidence=logprobs needs token logprobs, and the test model (a dry run) gives none; for a dry run "
    "use confidence=vote:N, or run on a model that returns logprobs (docs/confidence.md)"
)


@pytest.mark.parametrize("slot_model", [False, True])
def test_logprobs_on_the_test_model_is_refused_before_any_request(slot_model: bool) -> None:
    """Issue 48 item 7: the dry run made three requests, then failed on the form of the answer.
    The run's model, or the slot's own `model=test` (the run's another, never asked)."""
    script = Script(lambda call: "hi")
    template = "Hi [[a]]\n\n" + PICK.replace("]]", ", model=test]]") if slot_model else PICK
    model: Any = script.model() if slot_model else "test"

    async def run() -> list[Any]:
        return [event async for event in sd.complete_incremental_async(template, model=model)]

    (event,) = asyncio.run(run())  # no request, no slot: the error alone
    assert (event.type, str(event.error)) == ("processing_error", TEST_MODEL_REFUSED)
    with pytest.raises(sd.ConfigurationError) as refused:
        sd.complete(template, model=model)
    assert str(refused.value) == TEST_MODEL_REFUSED
    assert script.calls == []


def test_the_test_model_still_votes() -> None:
    event = completed(PICK.replace("logprobs", "vote:2"), model="test")
    assert (event.result.output, event.confidence) == ("red", 1.0)
