"""Issue 24 item 13: a long conversation costs struckdown the same per slot at any
length. Each slot's request is the history so far plus one question; struckdown builds
two turns per slot once and hands pydantic-ai the same message objects on every later
request (never a copy or a rebuilt history), so its own work is linear in the slots.
What remains quadratic is inherent to sending the whole history with every request
(pydantic-ai prepares it per request, a provider reads it): bench case l compares the
whole run with bare pydantic-ai at two lengths (docs/performance.md)."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import struckdown as sd

SLOTS = 60


def test_each_request_reuses_every_earlier_turn_and_adds_exactly_two() -> None:
    seen: list[list[Any]] = []

    def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart(f"answer {len(seen) - 1}")])

    template = "\n".join(f"Question {i}? [[a{i}]]" for i in range(SLOTS))
    result = sd.complete(template, {}, model=FunctionModel(answer), cache=False)

    assert [result[f"a{i}"] for i in range(SLOTS)] == [f"answer {i}" for i in range(SLOTS)]
    assert [len(messages) for messages in seen] == [2 * k + 1 for k in range(SLOTS)]
    for k in range(1, SLOTS):
        earlier, now = seen[k - 1], seen[k]
        assert all(a is b for a, b in zip(earlier[:-1], now))  # the same objects, not rebuilt
    last = seen[-1]  # [question 0, answer 0, …, question 59]
    for j in range(SLOTS):
        question = last[2 * j]
        assert isinstance(question, ModelRequest) and isinstance(question.parts[0], UserPromptPart)
        assert question.parts[0].content == f"Question {j}?"
        if j < SLOTS - 1:
            reply = last[2 * j + 1]
            assert isinstance(reply, ModelResponse) and reply.parts == [TextPart(f"answer {j}")]
