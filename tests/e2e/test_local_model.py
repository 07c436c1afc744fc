"""The real wire path: struckdown → pydantic-ai → llama-server (OpenAI chat completions).

Assert the plumbing, not the model's wisdom: temperature 0, small max_tokens,
one tool per slot, max_iter set.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import struckdown as sd

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"temperature": 0.0, "seed": 7}


def test_free_text_slot(model: Any) -> None:
    result = sd.complete("Say hello to Ada in one short sentence. [[greeting|max_tokens=40]]", model=model, settings=SETTINGS)
    assert isinstance(result["greeting"], str) and result["greeting"].strip()
    assert result.usage.requests == 1
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


def test_typed_slots(model: Any) -> None:
    template = (
        "Which of these is a fruit: apple or hammer? [[pick:fruit|apple, hammer, max_tokens=60]]\n"
        "Is water wet? Answer true or false. [[bool:wet|max_tokens=60]]\n"
        "How many legs does a spider have? [[int:legs|max_tokens=60]]"
    )
    result = sd.complete(template, model=model, settings=SETTINGS)
    assert result["fruit"] in ("apple", "hammer", None)
    assert result["wet"] in (True, False, None)
    assert result["legs"] is None or isinstance(result["legs"], int)
    assert list(result) == ["fruit", "wet", "legs"]


def test_json_slot(model: Any) -> None:
    result = sd.complete(
        'Return a JSON object with keys "name" (a string) and "age" (a number) for a person called Bo aged 30.'
        " [[record:person|max_tokens=80]]",
        model=model,
        settings=SETTINGS,
    )
    person = result["person"]
    assert person is None or isinstance(person, dict)


def test_agent_slot_calls_the_readonly_tool(model: Any) -> None:
    calls: list[str] = []

    @sd.readonly
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return f"It is 21 degrees and sunny in {city}."

    result = sd.complete(
        "What is the weather in Paris? Use the get_weather tool. [[answer|use_tools=true, max_iter=3, max_tokens=80]]",
        model=model,
        tools=[get_weather],
        settings=SETTINGS,
    )
    assert [c.lower() for c in calls] == ["paris"]
    slot = result.results["answer"]
    assert [(c.tool_name, c.arguments["city"].lower(), c.ok) for c in slot.tool_calls] == [("get_weather", "paris", True)]
    assert isinstance(result["answer"], str) and result["answer"].strip()
    assert slot.usage.requests >= 2 and slot.usage.tool_calls == 1


def test_streaming_tokens_arrive(model: Any) -> None:
    async def run() -> list[Any]:
        return [
            e
            async for e in sd.complete_incremental_async(
                "Count from one to five in words. [[count|max_tokens=40]]", model=model, settings=SETTINGS
            )
        ]

    events = asyncio.run(run())
    deltas = [e for e in events if e.type == "token_delta"]
    assert len(deltas) >= 2
    assert events[0].type == "slot_stream_start"
    final = events[-1]
    assert final.type == "processing_complete"
    assert deltas[-1].accumulated == final.result["count"]


def test_cli_run_against_the_local_server(base_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "LLM_API_BASE": base_url, "STRUCKDOWN_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "struckdown.cli", "run", "examples/quickstart.sd",
         "--context", "examples/quickstart.json", "--json", "--no-cache"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    assert list(answers) == ["summary", "positive"]
    assert isinstance(answers["summary"], str) and answers["summary"].strip()


def test_fallback_from_an_unreachable_endpoint_to_the_local_server(model: Any) -> None:
    """SPEC §14: a provider failure that remains after the retries runs the slot on the fallback."""
    import socket

    from struckdown.incremental import SlotFallback, SlotRetry
    from struckdown.models import openai_compatible

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    unreachable = openai_compatible("nobody", f"http://127.0.0.1:{port}/v1", None)
    seen: list[Any] = []
    result = sd.complete(
        "Say hello in one short sentence. [[greeting|max_tokens=30]]",
        model=unreachable,
        fallback=model,
        retries=1,
        retry_base_delay=0.05,
        settings=SETTINGS,
        on_retry=seen.append,
    )
    assert isinstance(result["greeting"], str) and result["greeting"].strip()
    assert result.results["greeting"].fallback_used == model.model_name
    assert [type(e) for e in seen] == [SlotRetry, SlotFallback]
    assert (seen[1].from_model, seen[1].to_model) == ("nobody", model.model_name)
    assert seen[1].reason.startswith("could not reach the model endpoint")


def test_an_answer_cut_at_max_tokens_is_flagged_truncated(model: Any) -> None:
    """SPEC §14 truncation, with the real finish_reason 'length' of the server."""
    result = sd.complete(
        "Write a long story about a dragon. [[story|max_tokens=5]]", model=model, settings=SETTINGS
    )
    slot = result.results["story"]
    assert slot.truncated is True
    assert isinstance(result["story"], str) and result["story"].strip()
    assert 0 < slot.usage.output_tokens <= 5
    import pytest

    with pytest.raises(sd.TruncatedError):
        sd.complete("Write a long story about a dragon. [[story|max_tokens=5, on_truncate=error]]", model=model,
                    settings=SETTINGS)  # fmt: skip


def test_pick_confidence_from_the_servers_logprobs(model: Any) -> None:
    """SPEC §27: llama-server returns the content tokens' logprobs; the slot's confidence is
    the probability of the tokens that spell the answer (checked here from the raw tokens)."""
    import math

    from pydantic_ai.messages import ModelResponse

    result = sd.complete(
        "Which of these is a fruit: apple or hammer? [[pick:fruit|apple, hammer, confidence=logprobs, max_tokens=60]]",
        model=model, settings=SETTINGS,
    )
    slot = result.results["fruit"]
    assert slot.confidence is not None and 0.0 < slot.confidence <= 1.0
    response = [m for m in slot.messages if isinstance(m, ModelResponse)][-1]
    tokens = (response.provider_details or {})["logprobs"]
    text = "".join(t["token"] for t in tokens)
    value = json.dumps(result["fruit"])
    start = text.index(value, text.index('"response"'))
    end, offset, total = start + len(value), 0, 0.0
    for token in tokens:
        if offset < end and offset + len(token["token"]) > start:
            total += token["logprob"]
        offset += len(token["token"])
    assert math.isclose(slot.confidence, math.exp(total), rel_tol=1e-9)
