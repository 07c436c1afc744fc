"""Response cache: key normalisation, the SQLite store, eviction and concurrency.

pydantic-ai is imported inside the tests that need it: the concurrency test's
spawned processes import this module, and should start fast.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from struckdown import cache as cache_module
from struckdown.cache import ResponseCache, cache_key, normalise_messages, resolve_cache

KEY_ARGS: dict[str, Any] = {
    "endpoint": "http://127.0.0.1:8765/v1",
    "model": "openai:qwen@http://127.0.0.1:8765/v1",
    "messages": [],
    "instructions": "Be brief.",
    "output_schema": {"type": "object", "properties": {"response": {"type": "integer"}}},
    "settings": {"temperature": 0.0},
    "version": "0.1.0",
}


def conversation(tool_call_id: str = "call_1") -> list[Any]:
    """A fresh conversation (new timestamps, run ids) with a tool round trip."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        RequestUsage,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    return [
        ModelRequest(parts=[UserPromptPart("What is 2+2?")], run_id=f"run-{tool_call_id}"),
        ModelResponse(
            parts=[ToolCallPart("add", {"a": 2, "b": 2}, tool_call_id=tool_call_id)],
            usage=RequestUsage(input_tokens=len(tool_call_id)),
            provider_response_id=f"resp-{tool_call_id}",
        ),
        ModelRequest(parts=[ToolReturnPart("add", 4, tool_call_id=tool_call_id)]),
        ModelResponse(parts=[TextPart("4")]),
    ]


def key(**changes: Any) -> str:
    return cache_key(**{**KEY_ARGS, "messages": conversation(), **changes})


# -- keys -----------------------------------------------------------------------


def test_identical_conversations_built_at_different_times_hash_equal() -> None:
    first, second = conversation("call_1"), conversation("call_2")
    assert first[0].timestamp != second[0].timestamp or first[0].run_id != second[0].run_id
    assert key(messages=first) == key(messages=second)


def test_identical_agent_runs_hash_equal() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    agent = Agent(TestModel(), instructions="Be brief.")
    one, two = agent.run_sync("hi").all_messages(), agent.run_sync("hi").all_messages()
    assert key(messages=one) == key(messages=two)
    assert key(messages=one) != key(messages=agent.run_sync("hello").all_messages())


def test_history_restored_from_a_cached_value_hashes_like_the_live_one(tmp_path: Path) -> None:
    """A hit on slot 1 must still let slot 2 hit: the replayed history keys the same."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, UserPromptPart
    from pydantic_ai.models.test import TestModel

    run = Agent(TestModel(), instructions="Be brief.").run_sync("one")
    store = ResponseCache(tmp_path)
    messages = ModelMessagesTypeAdapter.dump_python(run.new_messages(), mode="json")
    store.put("slot1", {"output": run.output, "messages": messages})
    stored = store.get("slot1")
    assert stored is not None
    replayed = ModelMessagesTypeAdapter.validate_python(stored["messages"])
    second = ModelRequest(parts=[UserPromptPart("two")])
    assert key(messages=[*replayed, second]) == key(messages=[*run.all_messages(), second])


@pytest.mark.parametrize(
    "change",
    [
        {"endpoint": "http://127.0.0.1:8766/v1"},
        {"model": "openai:llama@http://127.0.0.1:8765/v1"},
        {"instructions": "Be verbose."},
        {"instructions": None},
        {"output_schema": {"type": "object", "properties": {"response": {"type": "string"}}}},
        {"output_schema": "str"},
        {"settings": {"temperature": 0.7}},
        {"settings": {"temperature": 0.0, "max_tokens": 10}},
        {"version": "0.2.0"},
    ],
)
def test_key_changes_with_everything_that_decides_the_answer(change: dict[str, Any]) -> None:
    assert key(**change) != key()


def test_key_changes_when_a_message_changes() -> None:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    changed = conversation()
    changed[0] = ModelRequest(parts=[UserPromptPart("What is 2+3?")])
    assert key(messages=changed) != key()
    assert key(messages=conversation()[:2]) != key()


def test_transport_settings_do_not_change_the_key() -> None:
    assert key(settings={"temperature": 0.0, "timeout": 5, "max_retries": 0}) == key()


def test_key_accepts_already_dumped_messages() -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    dumped = ModelMessagesTypeAdapter.dump_python(conversation(), mode="json")
    assert key(messages=dumped) == key()
    assert "timestamp" not in str(normalise_messages(dumped))



def test_a_tools_arguments_and_answers_keep_their_id_and_timestamp_keys() -> None:
    """Only messages and parts lose their volatile fields: `{"id": 2}` and `{"id": 3}` as a
    tool's arguments are different requests and must not share a cached answer."""
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    def asked(args: dict[str, Any]) -> str:
        return key(messages=[*conversation()[:1], ModelResponse(parts=[ToolCallPart("lookup", args, tool_call_id="c")])])

    assert asked({"id": 2}) != asked({"id": 3})
    assert asked({"timestamp": "2026-01-01"}) != asked({"timestamp": "2026-01-02"})
    assert asked({"id": 2}) == asked({"id": 2})


def test_volatile_fields_are_read_off_pydantic_ais_message_types() -> None:
    """Every time, duration or usage field of a message or part is dropped, including those
    added after struckdown named its own list (2.78's `request_timestamp`, `duration`)."""
    import dataclasses
    import datetime

    from pydantic_ai import messages as pm

    from struckdown.cache import volatile_fields

    timed = {
        field.name
        for cls in vars(pm).values() if isinstance(cls, type) and dataclasses.is_dataclass(cls)
        for field in dataclasses.fields(cls)
        if any(t.__name__ in str(field.type) for t in (datetime.datetime, datetime.timedelta))
    }
    assert {"timestamp"} <= timed <= volatile_fields()
    assert {"content", "args", "tool_name", "parts", "instructions", "model_name"}.isdisjoint(volatile_fields())


def _messages_of_every_kind() -> list[list[Any]]:
    """Conversations of plain parts (read field by field) and of parts pydantic must dump."""
    import datetime

    from pydantic_ai.messages import (
        BinaryContent, ImageUrl, ModelRequest, ModelResponse, SystemPromptPart, TextPart, ThinkingPart, ToolCallPart,
        ToolReturnPart, UserPromptPart,
    )
    from pydantic_ai.usage import RequestUsage

    when = datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)
    return [
        [ModelRequest(parts=[SystemPromptPart("sys", dynamic_ref="f"), UserPromptPart("hi")], instructions="be nice")],
        [ModelRequest(parts=[UserPromptPart(["a", "b"])], metadata={"k": 1})],
        [ModelResponse(parts=[TextPart("ok", id="t1"), ThinkingPart("hmm", signature="s"),
                              ToolCallPart("f", {"a": 1, "id": 2, "nested": {"x": [1.5, None, True]}}, tool_call_id="c"),
                              ToolCallPart("g", '{"a": 1}')],
                       usage=RequestUsage(input_tokens=3), model_name="m", provider_name="p", finish_reason="stop",
                       timestamp=when)],
        # pydantic decides these: the adapter is used
        conversation(),  # a tool's return (its content has a serializer of its own)
        [ModelRequest(parts=[UserPromptPart(["look", ImageUrl("https://example.com/a.png")])])],
        [ModelRequest(parts=[UserPromptPart([BinaryContent(b"abc", media_type="text/plain")])])],
        [ModelRequest(parts=[ToolReturnPart("f", {"r": 1}, tool_call_id="c")])],
        [ModelResponse(parts=[ToolCallPart("f", {"when": when, "n": float("inf")})])],
    ]


PLAIN = 3  # the first three conversations are read field by field


@pytest.mark.parametrize("index", range(8))
def test_messages_of_plain_parts_normalise_as_pydantic_dumps_them(index: int) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    from struckdown import cache

    messages = _messages_of_every_kind()[index]
    by_pydantic = [cache._strip(m) for m in ModelMessagesTypeAdapter.dump_python(messages, mode="json")]
    assert normalise_messages(messages) == by_pydantic
    try:
        fieldwise = [cache._fieldwise(m) for m in messages]
    except cache._NotFieldwise:
        assert index >= PLAIN, "a plain conversation was left to pydantic"
    else:
        assert index < PLAIN, "a conversation pydantic must dump was read field by field"
        assert fieldwise == by_pydantic


# -- the store ------------------------------------------------------------------


def test_nothing_is_opened_until_first_use(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path / "c")
    assert not (tmp_path / "c").exists()
    assert store.stats()["entries"] == 0
    assert not (tmp_path / "c").exists()
    assert store.clear() == 0


def test_put_get_round_trip_and_stats(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path)
    value = {"output": {"n": 4, "items": [1, "two", None]}, "text": "4", "usage": {"input_tokens": 3}}
    assert store.get("k") is None
    store.put("k", value)
    assert store.get("k") == value
    store.put("k", {"output": 5})
    assert store.get("k") == {"output": 5}
    stats = store.stats()
    assert stats["entries"] == 1 and stats["bytes"] > 0
    assert stats["hits"] == 2 and stats["misses"] == 1 and stats["errors"] == 0
    assert stats["path"] == str(tmp_path / "responses.sqlite3")
    assert ResponseCache(tmp_path).get("k") == {"output": 5}  # another connection sees it


def test_async_get_and_put(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path)

    async def main() -> Any:
        await store.aput("a", {"output": "x"})
        return await store.aget("a"), await store.aget("missing")

    assert anyio.run(main) == ({"output": "x"}, None)


def test_clear_removes_everything_and_reports_how_much(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path)
    for i in range(5):
        store.put(f"k{i}", {"output": i})
    assert store.clear() == 5
    assert store.stats()["entries"] == 0 and store.get("k1") is None


def test_eviction_keeps_the_store_under_its_cap_dropping_oldest(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path, max_bytes=4_000)
    for i in range(100):
        store.put(f"k{i:03}", {"output": "x" * 150, "i": i})
    stats = store.stats()
    assert 0 < stats["bytes"] <= 4_000
    assert store.get("k000") is None
    assert store.get("k099") is not None


def test_recently_read_entries_survive_eviction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "_TOUCH_AFTER_S", -1.0)
    store = ResponseCache(tmp_path, max_bytes=4_000)
    store.put("keep", {"output": "x" * 150})
    for i in range(100):
        assert store.get("keep") is not None
        store.put(f"k{i:03}", {"output": "x" * 150})
    assert store.get("keep") is not None
    assert store.get("k000") is None


def test_values_larger_than_the_cap_are_not_stored(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path, max_bytes=100)
    store.put("big", {"output": "x" * 500})
    assert store.get("big") is None


def test_a_broken_cache_is_a_miss_not_a_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = ResponseCache(blocker / "cache")
    store.put("k", {"output": 1})
    assert store.get("k") is None
    assert store.stats()["errors"] == 2


def test_max_mb_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_CACHE_MAX_MB", "2")
    assert ResponseCache(tmp_path).max_bytes == 2 * 1024 * 1024
    monkeypatch.delenv("STRUCKDOWN_CACHE_MAX_MB")
    assert ResponseCache(tmp_path).max_bytes == 500 * 1024 * 1024


# -- concurrency ------------------------------------------------------------------


def _hammer(store: ResponseCache, prefix: str, errors: list[BaseException]) -> None:
    try:
        for i in range(50):
            store.put(f"{prefix}-{i}", {"output": i, "who": prefix})
            assert store.get(f"{prefix}-{i}") == {"output": i, "who": prefix}
            store.get(f"shared-{i % 5}")
            store.put(f"shared-{i % 5}", {"output": prefix})
    except BaseException as exc:  # collected and asserted in the main thread
        errors.append(exc)


def _process_writer(directory: str, prefix: str) -> None:
    store = ResponseCache(directory)
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_hammer, args=(store, f"{prefix}{t}", errors)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors or store.stats()["errors"]:
        raise SystemExit(f"{len(errors)} errors, first: {errors[:1]!r}, stats: {store.stats()}")


@pytest.mark.process  # the point: real processes writing one store
def test_threads_and_processes_share_one_store(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    processes = [ctx.Process(target=_process_writer, args=(str(tmp_path), f"p{n}-")) for n in range(2)]
    for process in processes:
        process.start()

    shared = ResponseCache(tmp_path)
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_hammer, args=(shared, f"t{n}", errors)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for process in processes:
        process.join(timeout=60)

    assert errors == []
    assert [p.exitcode for p in processes] == [0, 0]
    assert shared.stats()["errors"] == 0
    reader = ResponseCache(tmp_path)
    for prefix in [f"t{n}" for n in range(8)] + [f"p{n}-{t}" for n in range(2) for t in range(4)]:
        for i in range(50):
            assert reader.get(f"{prefix}-{i}") == {"output": i, "who": prefix}
    assert reader.stats()["entries"] == (8 + 8) * 50 + 5


# -- resolve_cache ----------------------------------------------------------------


def test_resolve_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from struckdown.errors import ConfigurationError

    stores: dict[Path, ResponseCache] = {}  # an Environment's

    assert resolve_cache(None, stores) is None and resolve_cache(False, stores) is None
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "default"))
    default = resolve_cache(True, stores)
    assert isinstance(default, ResponseCache)
    assert default.path == tmp_path / "default" / "responses.sqlite3"
    assert resolve_cache(True, stores) is default
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "other"))
    assert resolve_cache(True, stores) is not default
    assert resolve_cache(str(tmp_path / "default"), stores) is default
    mine = ResponseCache(tmp_path)
    assert resolve_cache(mine, stores) is mine

    class Memory:
        async def aget(self, key: str) -> dict[str, Any] | None:
            return None

        async def aput(self, key: str, value: dict[str, Any]) -> None:
            pass

    memory = Memory()
    assert resolve_cache(memory, stores) is memory
    with pytest.raises(ConfigurationError, match="aget"):
        resolve_cache(42, stores)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path)
    store.put("parent", {"output": 1})
    pid = os.fork()
    if pid == 0:  # child: reuse the inherited object, and never return into pytest
        ok = False
        try:
            store.put("child", {"output": 2})
            ok = store.get("parent") == {"output": 1} and store.stats()["errors"] == 0
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.get("child") == {"output": 2}


def _stored_responses() -> list[dict[str, Any]]:
    import datetime

    from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart, ThinkingPart, ToolCallPart
    from pydantic_ai.usage import RequestUsage

    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=datetime.timezone.utc)
    responses = [
        ModelResponse(parts=[TextPart("ok")]),
        ModelResponse(parts=[TextPart("ok", id="t1", provider_details={"a": [1]}), ThinkingPart("hmm", signature="s"),
                             ToolCallPart("f", {"a": 1, "b": [1.5, None]}, tool_call_id="c"), ToolCallPart("g", '{"a": 1}')],
                      usage=RequestUsage(input_tokens=3), model_name="m", provider_name="p", finish_reason="stop",
                      timestamp=when, provider_response_id="r", metadata={"x": 1}, provider_details={"k": "v"}),
    ]
    return [ModelMessagesTypeAdapter.dump_python([r], mode="json")[0] for r in responses]


@pytest.mark.parametrize("index", range(2))
def test_a_stored_answer_of_plain_parts_is_read_as_pydantic_reads_it(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from struckdown.run.wrappers import cached

    stored = {"response": _stored_responses()[index]}
    assert cached._plain_response(stored["response"]) is not None  # read without the adapter
    ours = cached._response_of(stored)
    monkeypatch.setattr(cached, "_plain_response", lambda data: None)
    assert ours == cached._response_of(stored)


def test_a_stored_answer_of_other_parts_is_left_to_pydantic() -> None:
    from struckdown.run.wrappers import cached

    plain = _stored_responses()[1]
    for changed in (
        {**plain, "parts": [*plain["parts"], {"part_kind": "file", "content": {}}]},  # a part kind it does not read
        {**plain, "parts": [{**plain["parts"][0], "citations": [{"url": "u"}]}]},  # a field of its own shape
        {**plain, "new_field": 1},  # a field of another pydantic-ai version
        {**plain, "failed_attempts": [{"error": "x"}]},
        {**plain, "timestamp": "2026-01-02T03:04:05"},  # no time zone: pydantic decides
        {**plain, "model_name": 5},
    ):
        assert cached._plain_response(changed) is None, changed
