"""What a slot run reuses between runs (issue 38, per-slot cost) changes nothing a run sends
or yields: the settings of a static slot, the run settings merged per call, and the model
stack's plain stream context managers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

import struckdown as sd
from struckdown.incremental import ModelResponded, SlotCompleted, TokenDelta
from struckdown.run.ledger import MeteredModel
from struckdown.run.attempts import RetryingModel
from struckdown.run.wrappers.cached import CachedModel
from struckdown.run.wrappers.streams import PLAIN_STREAM
from tests.support.scripted import Script

TEMPLATE = "Say one word. [[a]]\nAnd another. [[b]]"


def _settings(script: Script) -> list[dict[str, Any]]:
    return [dict(call.info.model_settings or {}) for call in script.calls]


def test_a_static_slot_sends_the_same_settings_every_run_and_follows_the_caller() -> None:
    """The attempt settings of a static slot are made once per (slot, model, caller settings):
    a second run sends what the first sent; other caller settings are not served the first's."""
    env = sd.Environment()
    program = env.parse(TEMPLATE)
    script = Script(lambda call: "ok")
    model = script.model()
    env.complete(program, model=model)
    first = _settings(script)
    env.complete(program, model=model)
    assert _settings(script)[2:] == first
    assert first[0]["temperature"] == 0.7 and first[0]["max_retries"] == 0 and first[0]["max_tokens"] == 4096
    env.complete(program, model=model, settings={"temperature": 0.2, "max_tokens": 50})
    assert [s["temperature"] for s in _settings(script)[4:]] == [0.2, 0.2]
    assert [s["max_tokens"] for s in _settings(script)[4:]] == [50, 50]
    env.complete(program, model=model)  # back to no caller settings: the type's default again
    assert _settings(script)[6:] == first


def test_a_reloaded_type_sends_its_new_settings(tmp_path: Any) -> None:
    """A custom type's settings (a 0.x YAML type's `llm_config:`) are part of what the kept
    settings depend on: the type loaded again with others is sent with those."""
    env = sd.Environment()
    path = tmp_path / "terse.yaml"

    def load(temperature: float) -> None:
        path.write_text(
            f"name: terse\nllm_config:\n  temperature: {temperature}\nfields:\n  word: {{type: str}}\n", encoding="utf-8"
        )
        env.types.load_yaml(path)

    load(0.1)
    program = env.parse("Word? [[terse:w]]")
    script = Script(lambda call: {"word": "ok"})
    model = script.model()
    env.complete(program, model=model)
    env.complete(program, model=model)
    load(0.9)
    env.complete(program, model=model)
    assert [s["temperature"] for s in _settings(script)] == [0.1, 0.1, 0.9]


def test_run_settings_hold_the_merged_options_of_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call's settings merge its options over the Environment's over the declaration's
    (nothing is kept from an earlier call): a tool list changed in place, other deps or a
    changed STRUCKDOWN_MAX_RETRIES reach the next call."""
    env = sd.Environment(tool_timeout=5.0, max_tool_result=9)
    model = Script(lambda call: "ok").model()
    first = env.run_settings({"model": model, "max_tool_result": 3}, stream=False)
    assert first.options["model"] is model and first.options["max_tool_result"] == 3  # the call's
    assert first.options["tool_timeout"] == 5.0 and first.options["on_truncate"] == "keep"  # the Environment's, the table's
    assert set(first.options) == set(sd.run_options.OPTIONS)

    def tool(x: int) -> int:
        return x

    tools = [tool]
    with_tools = env.run_settings({"model": model, "tools": tools}, stream=False)
    tools.append(tool)  # changed in place: the next call sees it
    assert len(env.run_settings({"model": model, "tools": tools}, stream=False).options["tools"]) == 2
    assert with_tools.options["tools"] is tools
    deps = object()
    assert env.run_settings({"model": model, "deps": deps}, stream=False).options["deps"] is deps
    again = env.run_settings({"model": model}, stream=False)
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "7")
    changed = env.run_settings({"model": model}, stream=False)
    assert changed.resilience is not None and again.resilience is not None
    assert changed.resilience.retries == 7 and again.resilience.retries == 3


def test_the_wrappers_stream_through_their_own_request_stream() -> None:
    """pydantic-ai's per-class stream wrappers are undone for the slot's model wrappers (their
    wrapped model gets its own), and nowhere else."""
    assert MeteredModel.request_stream is PLAIN_STREAM
    assert RetryingModel.request_stream is PLAIN_STREAM
    assert CachedModel.request_stream is PLAIN_STREAM
    assert getattr(FunctionModel.request_stream, "__wrapped__", None) is not None  # a provider keeps pydantic-ai's


def test_a_streamed_slot_meters_and_streams_as_before() -> None:
    """Through the plain context managers: every token, the usage line after the stream, the
    same answer, and a stream that fails once is retried (the meter counts both requests)."""
    failed: list[bool] = []

    async def stream(messages: list[Any], info: AgentInfo) -> Any:
        if not failed:
            failed.append(True)
            yield "par"
            from pydantic_ai.exceptions import ModelHTTPError

            raise ModelHTTPError(503, "scripted", "busy")
        for piece in ("one ", "two"):
            yield piece

    async def whole(messages: list[Any], info: AgentInfo) -> ModelResponse:
        raise AssertionError("the slot streams")

    async def collect() -> list[Any]:
        from struckdown.run.wrappers import retries

        async def instant(seconds: float) -> None:
            return None

        retries.sleep = instant  # type: ignore[assignment]
        try:
            model = FunctionModel(whole, stream_function=stream)
            return [e async for e in sd.complete_incremental_async("Say it. [[a]]", {}, model=model)]
        finally:
            import anyio

            retries.sleep = anyio.sleep

    events = asyncio.run(collect())
    assert [type(e).__name__ for e in events] == [
        "SlotStreamStart", "TokenDelta", "SlotRetracted", "SlotRetry", "SlotStreamStart", "TokenDelta", "TokenDelta",
        "ModelResponded", "ModelResponded", "SlotCompleted", "CheckpointReached", "ProcessingComplete",
    ]
    assert [e.accumulated for e in events if isinstance(e, TokenDelta)] == ["par", "one ", "one two"]
    # each attempt's request is a line of the ledger when its stream closes: the retry's, then the failed one's
    assert [(e.usage.requests, e.usage.output_tokens) for e in events if isinstance(e, ModelResponded)] == [(1, 2), (1, 1)]
    (completed,) = [e for e in events if isinstance(e, SlotCompleted)]
    assert completed.result.output == "one two" and completed.result.usage.requests == 2
