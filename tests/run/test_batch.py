"""complete_batch: input order, per-row failures, bounded concurrency, one parse."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest

import struckdown as sd
from scripted import Call, Script


def test_batch_keeps_input_order_and_records_failed_rows() -> None:
    def answer(call: Call) -> Any:
        if "row 3" in call.last_user:
            raise RuntimeError("provider exploded")
        return call.last_user.upper()

    # gates: each of the first rows answers only once the row after it has finished,
    # so rows 3, 2, 1, 0 finish in that order
    finished: defaultdict[int, asyncio.Event] = defaultdict(asyncio.Event)

    async def after_the_next_row(call: Call) -> None:
        row = int(call.last_user.split()[-1])
        if row < 3:
            await finished[row + 1].wait()

    def record(index: int, outcome: Any) -> None:
        seen.append(index)
        finished[index].set()

    script = Script(answer, gate=after_the_next_row)
    seen: list[int] = []
    results = sd.complete_batch(
        "Say row {{ n }} [[a]]",
        [{"n": i} for i in range(10)],
        model=script.model(),
        concurrency=4,
        on_result=record,
    )
    assert len(results) == 10
    assert isinstance(results[3], RuntimeError) and "provider exploded" in str(results[3])
    for i, outcome in enumerate(results):
        if i != 3:
            assert isinstance(outcome, sd.Result) and outcome["a"] == f"SAY ROW {i}"
    assert sorted(seen) == list(range(10))
    assert seen.index(3) < seen.index(2) < seen.index(1) < seen.index(0)  # finished out of order, returned in order


def test_batch_concurrency_is_bounded_by_the_batch() -> None:
    script = Script(lambda c: "ok", meet=3)  # the first requests wait until three are in flight
    asyncio.run(
        sd.complete_batch_async("Q {{ n }} [[a]]", [{"n": i} for i in range(20)], model=script.model(), concurrency=3)
    )
    assert script.peak == 3
    assert len(script.calls) == 20


def test_batch_with_together_does_not_deadlock() -> None:
    script = Script(lambda c: "ok")
    template = "<together>A {{ n }} [[a]] B {{ n }} [[b]]</together> C [[c]]"
    results = sd.complete_batch(template, [{"n": i} for i in range(6)], model=script.model(), concurrency=1)
    assert [dict(r) for r in results] == [{"a": "ok", "b": "ok", "c": "ok"}] * 6  # type: ignore[arg-type]


def test_batch_rejects_a_broken_template_before_any_row() -> None:
    script = Script(lambda c: "ok")
    with pytest.raises(sd.TemplateSyntaxError):
        sd.complete_batch("[[a|nope=1]]", [{}, {}], model=script.model())
    assert script.calls == []


def test_batch_rows_do_not_share_state() -> None:
    script = Script(lambda c: c.last_user)
    results = sd.complete_batch("{{ n }} [[a]] then {{ a }} [[b]]", [{"n": 1}, {"n": 2}], model=script.model())
    assert [r["b"] for r in results] == ["then 1", "then 2"]  # type: ignore[index]


def test_results_and_errors_survive_pickling() -> None:
    import pickle

    script = Script(lambda c: {"triggered": True, "reason": "r"} if c.schema else "x")
    result = sd.complete("A [[a]] G [[halt:g]]", model=script.model(), on_halt="return")
    copy = pickle.loads(pickle.dumps(result))
    assert dict(copy) == dict(result) and list(copy) == ["a", "g"]
    assert isinstance(copy.halted, sd.Halted) and copy.halted.reason == "r"
    for error in (sd.Halted("g", "why", result), sd.ToolLimitExceeded("w", "too many"), sd.SlotError("s", "bad")):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)


def test_errors_pickle_by_their_constructor_data_alone() -> None:
    """No hand-written __reduce__: every error passes all its data to Exception.__init__."""
    import pickle

    errors: list[BaseException] = [
        sd.TemplateSyntaxError("bad", 2, 3, "[[x", "close it", "t.sd"),
        sd.SlotError("s", "bad"),
        sd.ToolLimitExceeded("w", "too many"),
        sd.RateLimitError("openai:gpt", "slow down", 429),
        sd.Halted("g", "why"),
    ]
    for error in errors:
        assert "__reduce__" not in vars(type(error))
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error) and copy.args == error.args
    syntax = pickle.loads(pickle.dumps(errors[0]))
    assert (syntax.line, syntax.column, syntax.hint, syntax.filename) == (2, 3, "close it", "t.sd")


def test_halted_and_its_result_form_no_reference_cycle() -> None:
    script = Script(lambda call: {"triggered": True, "reason": "no"} if call.schema else "x")
    result = sd.complete("Judge this [[halt:g]] then [[a]]", model=script.model(), on_halt="return")
    halted = result.halted
    assert halted is not None and halted.results is not None and halted.results.halted is halted
    assert not any(isinstance(value, sd.Result) for value in vars(halted).values())
    assert halted.results["g"] == {"triggered": True, "reason": "no"}


def _peak_requests(max_requests: int | None, *, batch: bool) -> int:
    """Ten independent segments (three rows of them in a batch); each request yields a
    few times, so every segment reaches its request while the first are in flight."""

    async def let_the_others_in(call: Call) -> None:
        for _ in range(5):
            await asyncio.sleep(0)  # a yield to the other tasks, not a wait on the clock

    script = Script(lambda c: "ok", gate=let_the_others_in)
    template = "<checkpoint>".join(f"Q{i} [[s{i}]]" for i in range(10))
    limit = {} if max_requests is None else {"max_requests": max_requests}
    if batch:
        results = sd.complete_batch(template, [{}, {}, {}], model=script.model(), concurrency=3, **limit)
        assert all(isinstance(r, sd.Result) for r in results)
    else:
        sd.complete(template, model=script.model(), **limit)
    return script.peak


def test_max_requests_bounds_the_requests_of_independent_segments() -> None:
    assert _peak_requests(None, batch=False) == 10  # the test can see the overlap
    assert _peak_requests(2, batch=False) == 2


def test_max_requests_is_one_cap_for_a_whole_batch() -> None:
    assert _peak_requests(None, batch=True) == 30
    assert _peak_requests(4, batch=True) == 4


def test_max_requests_must_be_a_positive_whole_number() -> None:
    with pytest.raises(ValueError, match="max_requests"):
        sd.complete("Q [[a]]", model=Script(lambda c: "x").model(), max_requests=0)
