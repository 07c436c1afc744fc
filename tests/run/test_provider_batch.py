"""Provider batch APIs (SPEC §21): `complete_batch(…, provider_batch=…)` on pydantic-ai's
in-memory batch API (FunctionModel), counting the batches created and the requests in each."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import anyio
import pytest
from pydantic_ai.capabilities import BatchModelRequests
from pydantic_ai.messages import ModelResponse

import struckdown as sd
from batch_models import BatchScript
from memory_cache import MemoryCache
from scripted import Call, Tools
from struckdown import BatchCounts, ProviderBatch

THREE = "First {{ n }} [[a]]\nSecond {{ n }} [[b]]\nThird {{ n }} [[c]]"
TRIP = {"triggered": True, "reason": "flagged"}
PASS = {"triggered": False, "reason": "fine"}


def done(call: Call) -> str:
    return f"{call.last_user} done"


def batching(max_requests: int, max_wait: float | None = None) -> ProviderBatch:
    from datetime import timedelta

    wait = None if max_wait is None else timedelta(seconds=max_wait)
    return ProviderBatch(BatchModelRequests(max_requests=max_requests, max_wait=wait))


def test_rows_times_slots_make_slots_times_rows_over_batch_size_batches() -> None:
    script = BatchScript(done)
    seen: list[tuple[int, int]] = []
    pb = batching(20)
    pb.on_progress = lambda counts: seen.append((counts.submitted, counts.done))
    rows = [{"n": i} for i in range(40)]  # bench/provider_batch.py runs it at scale
    results = sd.complete_batch(THREE, rows, model=script.model(), concurrency=40, provider_batch=pb)

    assert script.sizes == [20] * 6  # 40 rows x 3 slots, 20 a batch: 6 batches, not 120 requests
    assert script.outside == []  # no request went around the batch API
    for number, batch in enumerate(script.batches):  # rows advance slot by slot together
        word = ("First", "Second", "Third")[number // 2]
        assert all(call.last_user.startswith(f"{word} ") for call in batch)
    asked = Counter(call.last_user for call in script.calls)
    assert set(asked.values()) == {1} and len(asked) == 120  # each row's slot asked exactly once
    for i, result in enumerate(results):
        assert isinstance(result, sd.Result)
        assert (result["a"], result["b"], result["c"]) == (f"First {i} done", f"Second {i} done", f"Third {i} done")
        assert result.usage.requests == 3
    assert pb.counts == BatchCounts(submitted=6, done=6, requests=120, answered=120, rows_done=40)
    assert pb.counts.pending == 0 and pb.counts.requests_per_batch == 20
    assert seen[:2] == [(1, 0), (2, 0)] and seen[-1] == (6, 6)


def test_a_part_batch_goes_as_soon_as_every_row_waits_for_it() -> None:
    # max_wait=None: only a full batch or every row waiting submits, so 12 rows cannot hang
    script = BatchScript(done)
    results = sd.complete_batch(
        "First {{ n }} [[a]]\nSecond {{ n }} [[b]]", [{"n": i} for i in range(12)],
        model=script.model(), concurrency=12, provider_batch=batching(100),
    )  # fmt: skip
    assert script.sizes == [12, 12]
    assert [r["b"] for r in results] == [f"Second {i} done" for i in range(12)]  # type: ignore[index]


def test_a_guard_still_halts_the_right_rows() -> None:
    def answer(call: Call) -> Any:
        if call.schema and "triggered" in str(call.schema):
            return TRIP if "bad" in call.last_user else PASS
        return f"reply to {call.last_user}"

    script = BatchScript(answer)
    rows = [{"msg": f"m{i} bad" if i % 4 == 0 else f"m{i}"} for i in range(12)]
    results = sd.complete_batch(
        "Judge: {{ msg }}\n[[halt:bad]]\nReply to {{ msg }} [[reply]]", rows,
        model=script.model(), concurrency=12, provider_batch=batching(100), on_halt="return",
    )  # fmt: skip
    assert script.sizes == [24]  # each row's guard and its speculative reply share one batch
    for i, result in enumerate(results):
        assert isinstance(result, sd.Result)
        if i % 4 == 0:
            assert result.halted is not None and result.halted.slot == "bad" and "reply" not in result
        else:
            assert result.halted is None and result["reply"] == f"reply to Reply to m{i}"


def test_each_tool_round_is_a_batch_round() -> None:
    calls: list[str] = []

    def lookup(city: str) -> str:
        calls.append(city)
        return f"sunny in {city}"

    def answer(call: Call) -> Any:
        returns = [text for role, text in call.turns if role == "return"]
        if not returns:
            return Tools([("lookup", {"city": call.last_user.split()[-1].rstrip("?")})])
        return f"it is {returns[-1]}"

    script = BatchScript(answer)
    rows = [{"city": f"c{i}"} for i in range(10)]
    results = sd.complete_batch(
        "Weather in {{ city }}? [[w|use_tools=true]]", rows,
        model=script.model(), tools=[lookup], concurrency=10, provider_batch=batching(100),
    )  # fmt: skip
    assert script.sizes == [10, 10]  # the tool call round, then the answer round
    assert sorted(calls) == sorted(f"c{i}" for i in range(10))
    assert [r["w"] for r in results] == [f"it is sunny in c{i}" for i in range(10)]  # type: ignore[index]


def test_the_request_cap_is_not_held_while_a_request_waits_for_its_batch() -> None:
    # 3 requests in flight at most: were a place held for the whole wait, a batch could never
    # hold more than 3 requests (and with max_wait=None, none would be sent)
    script = BatchScript(done)
    sd.complete_batch(
        "First {{ n }} [[a]]", [{"n": i} for i in range(12)],
        model=script.model(), concurrency=12, max_requests=3, provider_batch=batching(100),
    )  # fmt: skip
    assert script.sizes == [12]


def test_an_interrupted_job_resumes_without_submitting_a_request_again() -> None:
    template = "First {{ n }} [[a]]\nSecond {{ n }} [[b]]"
    rows = [{"n": i} for i in range(12)]
    script = BatchScript(done)
    model = script.model()
    journal: dict[int, dict[str, Any]] = {}

    async def killed_after_the_first_batch() -> None:
        with anyio.CancelScope() as scope:
            script.after_create = lambda n: scope.cancel() if n == 1 else None  # the kill switch
            first = batching(6)
            first.on_record = journal.update
            await sd.complete_batch_async(template, rows, model=model, concurrency=12, provider_batch=first)
        assert scope.cancelled_caught

    asyncio.run(killed_after_the_first_batch())
    script.after_create = None
    submitted_before = {call.last_user for batch in script.batches for call in batch}
    batches_before = list(script.batch_ids)
    assert submitted_before and all(p.startswith("First ") for p in submitted_before)
    recorded = sum(len(entries) for entries in journal.values())
    assert recorded == len(submitted_before)  # every submitted request is in its row's journal entry

    resumed = batching(6)
    resumed.records = dict(journal)
    results = sd.complete_batch(template, rows, model=model, concurrency=12, provider_batch=resumed)

    submitted_after = [call.last_user for batch in script.batches[len(batches_before):] for call in batch]
    assert not submitted_before & set(submitted_after)  # no new batch for a request already submitted
    assert set(batches_before) <= set(script.checked)  # the resumed job waited for the earlier batches
    asked = Counter(call.last_user for call in script.calls)
    assert set(asked.values()) == {1} and len(asked) == 24  # every row answered exactly once
    assert script.outside == []
    assert [(r["a"], r["b"]) for r in results] == [  # type: ignore[index]
        (f"First {i} done", f"Second {i} done") for i in range(12)
    ]
    assert resumed.counts.continued == recorded and resumed.counts.resumed == len(batches_before)
    assert resumed.counts.submitted == len(script.batches) - len(batches_before)


def test_a_batch_still_running_is_checked_again_until_it_ends() -> None:
    from datetime import timedelta

    script = BatchScript(done, running_checks=2)  # "in progress" when created and at two checks
    tiny = timedelta(microseconds=1)  # pydantic-ai's wait between checks
    pb = ProviderBatch(BatchModelRequests(max_requests=10, max_wait=None, poll_interval=tiny, max_poll_interval=tiny))
    results = sd.complete_batch(
        "First {{ n }} [[a]]\nSecond {{ n }} [[b]]", [{"n": i} for i in range(4)],
        model=script.model(), concurrency=4, provider_batch=pb,
    )  # fmt: skip
    assert script.sizes == [4, 4]
    assert Counter(script.checked) == {batch_id: 3 for batch_id in script.batch_ids}  # shared by the rows
    assert [r["b"] for r in results] == [f"Second {i} done" for i in range(4)]  # type: ignore[index]
    assert pb.counts.done == 2 and pb.counts.answered == 8


def test_a_cached_answer_never_enters_a_batch() -> None:
    script, cache = BatchScript(done), MemoryCache()
    model, rows = script.model(), [{"n": i} for i in range(3)]
    first = sd.complete_batch("Q {{ n }} [[a]]", rows, model=model, cache=cache, concurrency=3, provider_batch=True)
    assert script.sizes == [3] and len(cache.items) == 3  # batched answers are stored like any other
    again = batching(10)
    second = sd.complete_batch("Q {{ n }} [[a]]", rows, model=model, cache=cache, concurrency=3, provider_batch=again)
    assert script.sizes == [3] and again.counts.submitted == 0  # served from the cache: no batch at all
    assert [r["a"] for r in second] == [r["a"] for r in first] == [f"Q {i} done" for i in range(3)]  # type: ignore[index]
    assert all(r.results["a"].cached for r in second)  # type: ignore[union-attr]


def test_a_model_without_a_batch_api_is_one_configuration_error() -> None:
    script = BatchScript(done)

    class NoBatches(type(script.model())):  # type: ignore[misc]
        @property
        def batch_max_requests(self) -> int | None:
            return None

    with pytest.raises(sd.ConfigurationError, match="batch API"):
        sd.complete_batch("Q [[a]]", [{}, {}], model=NoBatches(script), concurrency=2, provider_batch=True)
    assert script.calls == []


def test_provider_batch_arguments() -> None:
    with pytest.raises(TypeError, match="provider_batch must be"):
        sd.complete_batch("Q [[a]]", [{}], model=BatchScript(done).model(), provider_batch="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="executor"):
        sd.complete_batch("Q [[a]]", [{}], model=BatchScript(done).model(), provider_batch=True, executor=object())  # type: ignore[arg-type]
    with pytest.warns(UserWarning, match="concurrency=1000"):
        sd.complete_batch("Q [[a]]", [{}] * 9, model=BatchScript(done).model(), provider_batch=True)


def test_batched_answers_are_priced_at_batch_prices() -> None:
    script = BatchScript(done, name="gpt-4o-mini", system="openai")
    pb = batching(10)
    results = sd.complete_batch("Q {{ n }} [[a]]", [{"n": i} for i in range(4)], model=script.model(),
                                concurrency=4, provider_batch=pb)  # fmt: skip
    assert pb.counts.cost is not None and pb.counts.list_cost is not None
    assert pb.counts.cost == pytest.approx(pb.counts.list_cost / 2)  # gpt-4o-mini's batch price
    final = results[0].results["a"].messages[-1]  # type: ignore[union-attr]
    assert isinstance(final, ModelResponse) and final.provider_details is not None
    assert final.provider_details["processing"] == "batch"  # what genai-prices keys batch prices on


def test_a_status_check_is_not_a_model_request() -> None:
    """Issue 39 N8: each check on a running batch counted as a request of the slot (in
    `usage.requests` and against `request_limit`); only the submitted request counts, and
    its price is its answer's tokens at the given price."""
    from datetime import timedelta

    from pydantic_ai.usage import UsageLimits

    script = BatchScript(done, running_checks=4)  # "in progress" when created and at four checks
    tiny = timedelta(microseconds=1)
    pb = ProviderBatch(BatchModelRequests(max_requests=10, max_wait=None, poll_interval=tiny, max_poll_interval=tiny))
    results = sd.complete_batch(
        "First {{ n }} [[a]]\nSecond {{ n }} [[b]]", [{"n": i} for i in range(3)], model=script.model(),
        concurrency=3, provider_batch=pb, run_limits=UsageLimits(request_limit=2), limits=UsageLimits(request_limit=1),
        prices={"scripted": {"input": 1.0, "output": 2.0}},
    )  # fmt: skip
    assert Counter(script.checked) == {batch_id: 5 for batch_id in script.batch_ids}  # the checks did happen
    for i, result in enumerate(results):
        assert isinstance(result, sd.Result), result
        assert (result["a"], result["b"]) == (f"First {i} done", f"Second {i} done")
        assert result.usage.requests == 2 and [s.usage.requests for s in result.results.values()] == [1, 1]
        for slot in result.results.values():
            usage = slot.usage
            assert usage.cost == pytest.approx((usage.input_tokens * 1.0 + usage.output_tokens * 2.0) / 1e6)
    assert pb.counts.requests == 6 and pb.counts.answered == 6
