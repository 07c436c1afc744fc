"""The response cache never fails a run and never makes the answer path wait.

A write lock held by another connection (another process, in real life) is held
for as long as each test needs; the runs must finish while it is still held.
A bad stored value is a miss, and text that JSON or UTF-8 cannot carry as it is
(lone surrogates, values that are not JSON) never fails a slot.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from struckdown import complete
from struckdown.cache import ResponseCache

HANG_S = 20  # a hang detector only (the old busy timeout made each miss wait 30 s); never decides an order


class CountingModel:
    """A FunctionModel that answers `reply` and counts its calls."""

    def __init__(self, reply: str = "fresh answer") -> None:
        self.calls = 0
        self.reply = reply

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.calls += 1
            return ModelResponse(parts=[TextPart(self.reply)])

        self.model = FunctionModel(respond)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ResponseCache]:
    cache = ResponseCache(tmp_path / "cache")
    yield cache
    cache.close()


def held_write_lock(cache: ResponseCache) -> sqlite3.Connection:
    """Another connection takes the store's write lock (BEGIN IMMEDIATE) and keeps it."""
    cache.put("warm-up", {"raw": "x"})  # the file and its schema exist
    other = sqlite3.connect(cache.path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    return other


def in_thread(work: Any) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def test_a_miss_does_not_wait_on_a_held_write_lock(store: ResponseCache) -> None:
    counting = CountingModel()
    other = held_write_lock(store)
    try:
        thread, outcome = in_thread(
            lambda: [complete("Say hi [[a]]", {}, model=counting.model, cache=store)["a"] for _ in range(2)]
        )
        thread.join(HANG_S)
        finished_while_locked = not thread.is_alive()
    finally:
        other.execute("ROLLBACK")
        other.close()
        thread.join(HANG_S)
    assert finished_while_locked, "the run waited on the cache's write lock"
    assert outcome == {"value": ["fresh answer", "fresh answer"]}
    assert counting.calls == 1  # the second run read the first one's queued write
    assert store.flush(HANG_S)
    assert ResponseCache(store.directory).stats()["entries"] == 2  # warm-up + the answer, once the lock was free


def test_a_hit_whose_access_time_is_old_does_not_wait_on_a_held_write_lock(store: ResponseCache) -> None:
    counting = CountingModel()
    assert complete("Say hi [[a]]", {}, model=counting.model, cache=store)["a"] == "fresh answer"
    assert store.flush(HANG_S)
    with sqlite3.connect(store.path) as aging:
        aging.execute("UPDATE responses SET accessed = 0")  # due for an access-time refresh
    other = held_write_lock(store)
    try:
        thread, outcome = in_thread(lambda: complete("Say hi [[a]]", {}, model=counting.model, cache=store)["a"])
        thread.join(HANG_S)
        finished_while_locked = not thread.is_alive()
    finally:
        other.execute("ROLLBACK")
        other.close()
        thread.join(HANG_S)
    assert finished_while_locked, "the hit waited to refresh its access time"
    assert outcome == {"value": "fresh answer"} and counting.calls == 1


@pytest.mark.parametrize("stored", ["[1, 2]", '"text"', "null", "42", "{not json", ""])
def test_a_stored_value_that_is_not_an_object_is_a_miss(store: ResponseCache, stored: str) -> None:
    counting = CountingModel()
    assert complete("Say hi [[a]]", {}, model=counting.model, cache=store)["a"] == "fresh answer"
    assert store.flush(HANG_S)
    with sqlite3.connect(store.path) as spoil:
        spoil.execute("UPDATE responses SET value = ?", (stored,))
    assert complete("Say hi [[a]]", {}, model=counting.model, cache=store)["a"] == "fresh answer"
    assert counting.calls == 2
    assert store.stats()["errors"] >= 1


def test_an_answer_with_a_lone_surrogate_is_cached_and_served(store: ResponseCache) -> None:
    counting = CountingModel("half \ud800 pair")
    first = complete("Say hi [[a]]", {}, model=counting.model, cache=store)["a"]
    assert store.flush(HANG_S)
    again = ResponseCache(store.directory)  # from disk, not from this object's queue
    second = complete("Say hi [[a]]", {}, model=counting.model, cache=again)["a"]
    again.close()
    assert first == second == "half \ud800 pair"
    assert counting.calls == 1


def test_a_context_value_with_a_lone_surrogate_gets_a_key(store: ResponseCache) -> None:
    counting = CountingModel()
    for _ in range(2):
        assert complete("About {{ x }} [[a]]", {"x": "\udfff"}, model=counting.model, cache=store)["a"] == "fresh answer"
    assert counting.calls == 1


def test_a_value_that_is_not_json_is_not_stored_and_does_not_raise(store: ResponseCache) -> None:
    store.put("k", {"raw": object()})

    async def queued() -> None:
        await store.aput("q", {"raw": {1, 2}})

    anyio.run(queued)
    assert store.get("k") is None and store.get("q") is None
    assert store.stats()["errors"] == 2


def test_close_writes_what_is_queued(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path / "cache")

    async def queued() -> None:
        await store.aput("k", {"raw": "v"})

    anyio.run(queued)
    store.close()
    assert ResponseCache(tmp_path / "cache").get("k") == {"raw": "v"}


@pytest.mark.process  # the point: what a finished sd process left on disk
def test_a_cli_run_writes_its_answer_before_the_process_exits(tmp_path: Path) -> None:
    """The queued write of a short-lived `sd run` lands at exit: the next process gets a hit."""
    import json
    import os
    import subprocess
    import sys

    template = tmp_path / "t.sd"
    template.write_text("Say hi [[a]]\n", encoding="utf-8")
    env = {**os.environ, "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache")}

    def sd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "struckdown.cli", *args], capture_output=True, text=True, env=env, timeout=HANG_S
        )

    first = sd("run", str(template), "--model", "test", "--json")
    assert first.returncode == 0, first.stderr
    stats = sd("cache", "stats", "--json")
    assert json.loads(stats.stdout)["entries"] == 1


@pytest.mark.parametrize("depth", [100_000])
def test_a_deeply_nested_stored_value_is_a_miss_not_a_recursion_error(store: ResponseCache, depth: int) -> None:
    counting = CountingModel()
    assert complete("Say hi [[a]]", {}, model=counting.model, cache=store)["a"] == "fresh answer"
    assert store.flush(HANG_S)
    nested = '{"response":' + "[" * depth + "]" * depth + "}"
    with sqlite3.connect(store.path) as spoil:
        spoil.execute("UPDATE responses SET value = ?", (nested,))
    assert complete("Say hi [[a]]", {}, model=counting.model, cache=store)["a"] == "fresh answer"
    assert counting.calls == 2
    assert store.stats()["errors"] == 1
