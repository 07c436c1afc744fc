"""The response cache inside runs: hits make no model call; tool slots never use it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd
from memory_cache import MemoryCache
from scripted import Call, Script, Tools, turns


def run_twice(cache_dir: Path) -> tuple[Script, sd.Result, sd.Result]:
    """A text and an int slot, run fresh and then again from the cache in `cache_dir`."""
    script = Script(lambda c: 3 if c.schema else "hello")
    template = "Greet [[g]] Count [[int:n]]"
    first = sd.complete(template, model=script.model(), cache=str(cache_dir))
    second = sd.complete(template, model=script.model(), cache=str(cache_dir))
    return script, first, second


def test_second_run_is_served_from_the_cache(tmp_path: Path) -> None:
    script, first, second = run_twice(tmp_path)
    assert len(script.calls) == 2
    assert dict(first) == dict(second) == {"g": "hello", "n": 3}
    assert [s.cached for s in second.results.values()] == [True, True]
    assert second.usage.requests == 0


def test_a_changed_context_misses_the_cache(tmp_path: Path) -> None:
    script = Script(lambda c: c.last_user)
    sd.complete("Say {{ x }} [[a]]", {"x": 1}, model=script.model(), cache=str(tmp_path))
    sd.complete("Say {{ x }} [[a]]", {"x": 2}, model=script.model(), cache=str(tmp_path))
    assert len(script.calls) == 2


def test_cached_text_still_streams_and_reports_was_cached(tmp_path: Path) -> None:
    script = Script(lambda c: "hello there")
    sd.complete("Greet [[g]]", model=script.model(), cache=str(tmp_path))

    async def events() -> list[Any]:
        return [e async for e in sd.complete_incremental_async("Greet [[g]]", model=script.model(), cache=str(tmp_path))]

    got = asyncio.run(events())
    assert [(e.type, getattr(e, "delta", None)) for e in got[:2]] == [("slot_stream_start", None), ("token_delta", "hello there")]
    done = next(e for e in got if e.type == "slot_completed")
    assert done.was_cached and done.result.output == "hello there"
    assert len(script.calls) == 1


def test_tool_slots_never_use_the_cache(tmp_path: Path) -> None:
    runs: list[str] = []

    @sd.readonly
    def lookup(q: str) -> str:
        """Look up."""
        runs.append(q)
        return "x"

    def answer(call: Call) -> Any:
        return Tools([("lookup", {"q": "a"})]) if call.turns[-1][0] == "user" else "done"

    script = Script(answer)
    for _ in range(2):
        result = sd.complete("Go [[w|use_tools=true]]", model=script.model(), tools=[lookup], cache=str(tmp_path))
        assert result.results["w"].cached is False
    assert runs == ["a", "a"] and len(script.calls) == 4


def test_a_cached_answer_takes_the_path_of_a_fresh_one(tmp_path: Path) -> None:
    """Same messages (the model's reply included), same output, validated the same way."""
    script, fresh, cached = run_twice(tmp_path)
    assert len(script.calls) == 2
    for key in ("g", "n"):
        assert turns(list(cached.results[key].messages)) == turns(list(fresh.results[key].messages))
        assert cached.results[key].cached and not fresh.results[key].cached
    assert turns(list(cached.results["g"].messages))[-1] == ("assistant", "hello")
    assert (cached.usage.requests, cached.usage.input_tokens, cached.usage.output_tokens) == (0, 0, 0)


@pytest.mark.parametrize("stream", [False, True])
def test_a_cached_answer_belongs_to_the_run_it_is_served_to(tmp_path: Path, stream: bool) -> None:
    """Not to the run that stored it: the hit carries the run and conversation IDs of the
    request before it, streamed or not."""
    script = Script(lambda c: "hello")

    async def run() -> Any:
        done = [e async for e in sd.complete_incremental_async("Greet [[g]]", model=script.model(),
                                                               cache=str(tmp_path), stream=stream)]  # fmt: skip
        return next(e for e in done if e.type == "slot_completed").result

    fresh, cached = asyncio.run(run()), asyncio.run(run())
    assert cached.cached and not fresh.cached and len(script.calls) == 1
    request, response = cached.messages[-2:]
    assert response.provider_details == {"struckdown_cache": "hit"}
    assert (response.run_id, response.conversation_id) == (request.run_id, request.conversation_id)
    assert response.run_id != fresh.messages[-1].run_id


def test_a_cached_answer_that_fails_validation_is_asked_again() -> None:
    cache = MemoryCache()
    script = Script(lambda c: 3)
    sd.complete("Count [[int:n|max=5]]", model=script.model(), cache=cache)
    (key,) = cache.items
    stored = cache.items[key]["response"]
    stored["parts"][0]["args"] = {"response": 99}  # now above max=5
    again = sd.complete("Count [[int:n|max=5]]", model=script.model(), cache=cache)
    assert again["n"] == 3 and len(script.calls) == 2  # the bad hit went back as a retry
    assert "less than or equal to 5" in str(turns(script.calls[1].messages))


def test_an_entry_of_another_shape_is_a_miss() -> None:
    cache = MemoryCache()
    script = Script(lambda c: "fresh")
    sd.complete("Greet [[g]]", model=script.model(), cache=cache)
    (key,) = cache.items
    cache.items[key] = {"raw": "old format"}
    result = sd.complete("Greet [[g]]", model=script.model(), cache=cache)
    assert result["g"] == "fresh" and not result.results["g"].cached and len(script.calls) == 2
