"""complete_batch_iter_async: outcomes as rows finish, contexts read as workers free up,
nothing kept, closing cancels (issue 22)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import Any

import struckdown as sd
from scripted import Call, Script

TEMPLATE = "Say row {{ n }} [[a]]"


def row(call: Call) -> int:
    return int(call.last_user.split()[-1])


def test_outcomes_come_as_rows_finish_and_contexts_are_read_as_workers_free_up() -> None:
    finished: defaultdict[int, asyncio.Event] = defaultdict(asyncio.Event)
    pulled: list[int] = []  # contexts the batch had taken when each row's request started
    started: dict[int, int] = {}

    async def after_the_next_row(call: Call) -> None:
        started[row(call)] = len(pulled)
        if row(call) in (0, 2):  # rows 0 and 2 wait for the row after them
            await finished[row(call) + 1].wait()

    def answer(call: Call) -> Any:
        if row(call) == 4:
            raise RuntimeError("provider exploded")
        return f"answer {row(call)}"

    def contexts() -> Iterator[dict[str, int]]:
        for n in range(6):
            pulled.append(n)
            yield {"n": n}

    script = Script(answer, gate=after_the_next_row)

    async def main() -> list[tuple[int, Any]]:
        seen = []
        async for index, outcome in sd.complete_batch_iter_async(TEMPLATE, contexts(), model=script.model(), concurrency=2):
            finished[index].set()
            seen.append((index, outcome))
        return seen

    seen = asyncio.run(main())
    order = [index for index, _ in seen]
    assert order[:4] == [1, 0, 3, 2] and sorted(order[4:]) == [4, 5]  # finishing order
    assert [o["a"] for i, o in seen if i != 4] == ["answer 1", "answer 0", "answer 3", "answer 2", "answer 5"]
    assert isinstance(dict(seen)[4], RuntimeError)  # a failed row is its exception; the others go on
    assert all(started[n] <= n + 2 for n in range(6))  # never read ahead of the two workers


def test_no_outcome_is_kept_once_the_consumer_lets_it_go() -> None:
    n = 12
    alive: list[weakref.ref[Any]] = []
    kept_at_the_end: list[int] = []

    async def main() -> None:
        async for index, outcome in sd.complete_batch_iter_async(
            TEMPLATE, ({"n": i} for i in range(n)), model=Script(lambda c: "ok").model(), concurrency=3
        ):
            alive.append(weakref.ref(outcome.results["a"]))  # (a Result has __slots__ and no weak references)
            del outcome
            if len(alive) == n:  # the batch is still open: nothing of it may hold the earlier rows
                gc.collect()
                kept_at_the_end.extend(i for i, ref in enumerate(alive[:-1]) if ref() is not None)

    asyncio.run(main())
    assert len(alive) == n and kept_at_the_end == []


def test_an_async_iterable_of_contexts_is_read_by_one_worker_at_a_time() -> None:
    async def contexts() -> AsyncIterator[dict[str, int]]:
        for n in range(7):
            await asyncio.sleep(0)  # another worker asks meanwhile: it must wait its turn
            yield {"n": n}

    async def main() -> list[tuple[int, str]]:
        return [
            (index, outcome["a"])
            async for index, outcome in sd.complete_batch_iter_async(
                TEMPLATE, contexts(), model=Script(lambda c: f"answer {row(c)}").model(), concurrency=3
            )
        ]

    assert sorted(asyncio.run(main())) == [(i, f"answer {i}") for i in range(7)]
    results = asyncio.run(
        sd.complete_batch_async(TEMPLATE, contexts(), model=Script(lambda c: f"answer {row(c)}").model())
    )
    assert [r["a"] for r in results] == [f"answer {i}" for i in range(7)]  # the list form takes one too


def test_leaving_early_cancels_the_rows_in_flight() -> None:
    release = asyncio.Event()
    cancelled: list[int] = []

    async def only_row_zero(call: Call) -> None:
        if row(call) != 0:
            try:
                await release.wait()  # never released
            except asyncio.CancelledError:
                cancelled.append(row(call))
                raise

    script = Script(lambda c: "ok", gate=only_row_zero)

    async def main() -> list[int]:
        got = []
        batch = sd.complete_batch_iter_async(TEMPLATE, [{"n": i} for i in range(10)], model=script.model(), concurrency=3)
        async for index, _ in batch:
            got.append(index)
            break
        await batch.aclose()
        return got

    assert asyncio.run(main()) == [0]
    started = {row(c) for c in script.calls}
    assert {1, 2} <= set(cancelled) and set(cancelled) == started - {0}  # every row in flight was cancelled
    assert started <= {0, 1, 2, 3}  # and none started after that
