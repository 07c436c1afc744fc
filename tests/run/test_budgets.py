"""Budgets and cost (SPEC §13): per-tool budgets, run-wide limits, cost, the usage ledger.

Scripted models with exact usage; every number below is the arithmetic of the script.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

import struckdown as sd
from scripted import Call, Script, Tools, turns

EXHAUSTED = "Call budget exhausted: 'search' may be called at most 3 times in this slot."


def priced(
    answer: Any, *, input_tokens: int = 1000, output_tokens: int = 200, name: str = "m1", provider: str | None = None
) -> Any:
    """A FunctionModel function: each response reports this usage under model name `name`."""
    calls: list[list[ModelMessage]] = []

    def function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(list(messages))
        value = answer(messages, info) if callable(answer) else answer
        if isinstance(value, ModelResponse):
            parts = value.parts
        elif info.output_tools:  # a typed slot: a whole number fits every test's int slot
            parts = [ToolCallPart(info.output_tools[0].name, {"response": 7 if value == "x" else value})]
        else:
            parts = [TextPart(str(value))]
        return ModelResponse(
            parts=parts, usage=RequestUsage(input_tokens=input_tokens, output_tokens=output_tokens), model_name=name,
            provider_name=provider,
        )

    function.calls = calls  # type: ignore[attr-defined]
    return function


def searching(n: int, *, repeat: bool = False) -> Any:
    """A model that calls search n times (one call per response), then answers with the tool results it read."""

    def answer(call: Call) -> Any:
        made = sum(1 for role, _ in call.turns if role == "call")
        if made < n:
            return Tools([("search", {"q": "same" if repeat else f"q{made}"})])
        return "done: " + " | ".join(text for role, text in call.turns if role == "return")

    return answer


def make_search(runs: list[str]) -> Any:
    def search(q: str) -> str:
        """Search."""
        runs.append(q)
        return f"found {q}"

    return search


# -- per-tool budgets ---------------------------------------------------------------


def test_a_call_past_the_budget_does_not_run_and_the_model_reads_why() -> None:
    runs: list[str] = []
    script = Script(searching(4))
    events = list(
        sd.complete_incremental(
            'Find [[a|use_tools=true, budget="search=3"]]', model=script.model(), tools=[make_search(runs)]
        )
    )
    assert runs == ["q0", "q1", "q2"]  # the fourth body never ran
    completed = [e for e in events if e.type == "tool_completed"]
    assert [(e.arguments["q"], e.ok, e.error) for e in completed] == [
        ("q0", True, None), ("q1", True, None), ("q2", True, None), ("q3", False, EXHAUSTED),
    ]
    assert [e.type for e in events if e.type.startswith("tool_")] == ["tool_started", "tool_completed"] * 4
    # the run went on: the model read the refusal as the call's result, then answered
    assert script.calls[-1].turns[-1] == ("return", EXHAUSTED)
    result = events[-1].result
    assert result["a"] == f"done: found q0 | found q1 | found q2 | {EXHAUSTED}"
    assert [(c.tool_name, c.ok, c.error) for c in result.results["a"].tool_calls][-1] == ("search", False, EXHAUSTED)
    assert result.usage.tool_calls == 3  # the refused call was not a successful call


def test_a_call_answered_from_the_slots_tool_cache_spends_no_budget() -> None:
    runs: list[str] = []
    result = sd.complete(
        'Find [[a|use_tools=true, budget="search=1"]]', model=Script(searching(3, repeat=True)).model(),
        tools=[make_search(runs)],
    )
    assert runs == ["same"]
    calls = result.results["a"].tool_calls
    assert [(c.ok, c.was_cached) for c in calls] == [(True, False), (True, True), (True, True)]


def test_the_budget_is_per_slot() -> None:
    runs: list[str] = []
    result = sd.complete(
        'One [[a|use_tools=true, budget="search=1"]] Two [[b|use_tools=true, budget="search=1"]]',
        model=Script(searching(1)).model(), tools=[make_search(runs)],
    )
    assert runs == ["q0", "q0"]
    assert all(c.ok for key in "ab" for c in result.results[key].tool_calls)


def test_the_host_ceiling_limits_a_slot_without_a_budget_and_a_template_may_only_lower_it() -> None:
    runs: list[str] = []
    search = make_search(runs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sd.complete("Find [[a|use_tools=true]]", model=Script(searching(3)).model(), tools=[search],
                    tool_limits={"search": 2})
    assert runs == ["q0", "q1"]
    runs.clear()
    env = sd.Environment(tool_limits={"search": 5})
    with pytest.warns(UserWarning) as caught:
        env.complete('Find [[a|use_tools=true, budget="search=9"]]', model=Script(searching(7)).model(), tools=[search])
    assert [str(w.message) for w in caught] == [
        "template asked for budget search=9 but the caller's ceiling is 5; using 5"
    ]
    assert runs == ["q0", "q1", "q2", "q3", "q4"]
    runs.clear()
    env.complete('Find [[a|use_tools=true, budget="search=2"]]', model=Script(searching(3)).model(), tools=[search])
    assert runs == ["q0", "q1"]


def test_budget_option_errors() -> None:
    with pytest.raises(sd.TemplateSyntaxError, match="tool=count pairs"):
        sd.parse('Q [[a|use_tools=true, budget="search"]]')
    with pytest.raises(sd.TemplateSyntaxError, match="whole number"):
        sd.parse('Q [[a|use_tools=true, budget="search=-1"]]')
    script = Script(searching(1))
    with pytest.raises(sd.TemplateSyntaxError) as typo:
        sd.complete('Q [[a|use_tools=true, budget="serch=1"]]', model=script.model(), tools=[make_search([])])
    assert str(typo.value) == (
        "line 1:30: budget= names 'serch', which is not a tool of this run\n"
        '    Q [[a|use_tools=true, budget="serch=1"]]\n'
        "                                 ^\n"
        "hint: did you mean 'search'? the run's tools: search"
    )
    assert script.calls == []  # before any model call
    with pytest.raises(sd.ConfigurationError, match="tool_limits="):
        sd.complete("Q [[a]]", model=script.model(), tool_limits={"search": -1})


# -- run-wide limits -----------------------------------------------------------------


def test_a_run_limit_of_n_requests_across_three_slots_stops_at_exactly_n() -> None:
    script = Script(lambda c: f"answer {len(script.calls)}")
    with pytest.raises(sd.BudgetExceeded) as caught:
        sd.complete("A [[a]] B [[b]] C [[c]]", model=script.model(), run_limits=UsageLimits(request_limit=2))
    assert len(script.calls) == 2
    error = caught.value
    assert (error.limit, error.scope, str(error)) == (
        "request_limit", "run", "run budget spent: the request_limit of 2 requests is reached",
    )
    assert dict(error.results) == {"a": "answer 1", "b": "answer 2"}
    assert error.results.usage.requests == 2 and error.slot == "c"


def test_guards_count_in_the_run_limit() -> None:
    def answer(call: Call) -> Any:
        return {"triggered": False, "reason": "fine"} if "Judge" in call.last_user else "ok"

    script = Script(answer)
    with pytest.raises(sd.BudgetExceeded):
        sd.complete("Judge [[halt:g]] A [[a]] B [[b]]", model=script.model(), run_limits=UsageLimits(request_limit=2))
    assert len(script.calls) == 2


def test_a_run_wide_tool_call_limit_is_checked_before_the_call() -> None:
    runs: list[str] = []
    with pytest.raises(sd.BudgetExceeded) as caught:
        sd.complete(
            "One [[a|use_tools=true]] Two [[b|use_tools=true]]", model=Script(searching(2)).model(),
            tools=[make_search(runs)], run_limits=UsageLimits(tool_calls_limit=3),
        )
    assert runs == ["q0", "q1", "q0"]  # three calls ran, the fourth never started
    assert caught.value.limit == "tool_calls_limit"
    assert list(caught.value.results) == ["a"]


def test_token_and_cost_limits_are_checked_after_each_response_and_streamed_text_is_retracted() -> None:
    model = FunctionModel(
        priced("x"), stream_function=None, model_name="m1"
    )

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        yield "streamed text"

    streaming = FunctionModel(stream_function=stream, model_name="m1")
    events: list[Any] = []

    async def run() -> None:
        async for event in sd.complete_incremental_async(
            "A [[a]]", model=streaming, run_limits=UsageLimits(output_tokens_limit=1)
        ):
            events.append(event)

    asyncio.run(run())  # the generator ends after ProcessingError; the error is on the event
    caught = events[-1].error
    assert isinstance(caught, sd.BudgetExceeded) and caught.limit == "output_tokens_limit"
    kinds = [(e.type, getattr(e, "reason", None)) for e in events]
    assert ("slot_retracted", "budget") in kinds and kinds[-1][0] == "processing_error"
    assert kinds.index(("slot_retracted", "budget")) > kinds.index(("token_delta", None))
    assert list(caught.results) == [] and caught.results.usage.requests == 1

    with pytest.raises(sd.BudgetExceeded) as costly:
        sd.complete("A [[a]] B [[b]]", model=model, prices={"m1": {"input": 1, "output": 1}}, max_cost=0.0015)
    # each request costs (1000 + 200) / 1e6 = $0.0012: the second crosses $0.0015
    assert costly.value.limit == "max_cost" and list(costly.value.results) == ["a"]
    assert str(costly.value) == "run budget spent: $0.0024, over max_cost=0.0015 USD"
    assert costly.value.results.usage.cost == pytest.approx(0.0024)


# -- cost ------------------------------------------------------------------------------


def test_the_cost_of_a_run_is_the_arithmetic_of_its_usage_and_the_prices() -> None:
    model = FunctionModel(priced("x", input_tokens=1000, output_tokens=200), model_name="m1")
    result = sd.complete(
        "A [[a]] B [[int:b]]", model=model, prices={"m1": {"input": 0.15, "output": 0.60}}
    )
    one = (1000 * 0.15 + 200 * 0.60) / 1e6
    assert result.results["a"].usage.cost == pytest.approx(one)
    assert result.results["b"].usage.cost == pytest.approx(one)
    assert result.usage.cost == pytest.approx(2 * one)
    assert result.usage.to_dict()["cost"] == pytest.approx(2 * one)


def test_provider_and_name_wins_over_name_and_an_unknown_price_is_none() -> None:
    model = FunctionModel(priced("x"), model_name="m1")
    result = sd.complete("A [[a]]", model=model, prices={"m1": {"input": 1, "output": 1}, "function:m1": {"input": 2, "output": 0}})
    assert result.usage.cost == pytest.approx(1000 * 2 / 1e6)
    unknown = sd.complete("A [[a]]", model=FunctionModel(priced("x"), model_name="m1"))
    assert unknown.usage.cost is None and unknown.usage.requests == 1


def test_genai_prices_price_a_known_model() -> None:
    model = FunctionModel(priced("x", name="gpt-4o-mini", provider="openai"), model_name="gpt-4o-mini")
    result = sd.complete("A [[a]]", model=model)
    from genai_prices import calc_price

    usage = RequestUsage(input_tokens=1000, output_tokens=200)
    expected = float(calc_price(usage, "gpt-4o-mini", provider_id="openai").total_price)
    assert result.usage.cost == pytest.approx(expected) and expected > 0


def test_max_cost_with_an_unknown_price_fails_before_any_request() -> None:
    script = Script(lambda c: "x")
    with pytest.raises(sd.ConfigurationError, match=r"price of model 'scripted' is unknown"):
        sd.complete("A [[a]]", model=script.model(), max_cost=1.0)
    assert script.calls == []


def test_bad_prices_are_configuration_errors() -> None:
    for prices, words in [
        ({"m": {"input": 1}}, "needs both"),
        ({"m": {"input": 1, "output": -2}}, "non-negative"),
        ({"m": {"input": 1, "output": 1, "reasoning": 1}}, "unknown rate 'reasoning'"),
    ]:
        with pytest.raises(sd.ConfigurationError, match=words):
            sd.complete("A [[a]]", model=Script(lambda c: "x").model(), prices=prices)


# -- the ledger ------------------------------------------------------------------------


def test_every_request_yields_model_responded_and_a_cache_hit_costs_nothing(tmp_path: Any) -> None:
    model = FunctionModel(priced("x"), model_name="m1")
    prices = {"m1": {"input": 1, "output": 2}}
    first = list(sd.complete_incremental("A [[int:a]]", model=model, prices=prices, cache=str(tmp_path)))
    ledger = [e for e in first if e.type == "model_responded"]
    assert [(e.slot, e.model, e.usage.requests, e.usage.input_tokens, e.usage.output_tokens, e.cached) for e in ledger] == [
        ("a", "m1", 1, 1000, 200, False)
    ]
    assert ledger[0].cost == pytest.approx(1400 / 1e6) and ledger[0].usage.cost == ledger[0].cost
    assert ledger[0].elapsed_ms >= 0 and ledger[0].finish_reason is None
    assert ledger[0].to_dict()["usage"]["cost"] == pytest.approx(1400 / 1e6)
    again = list(sd.complete_incremental("A [[int:a]]", model=model, prices=prices, cache=str(tmp_path)))
    hit = [e for e in again if e.type == "model_responded"]
    assert [(e.cached, e.cost, e.usage.requests) for e in hit] == [(True, 0.0, 0)]
    assert again[-1].result.usage.cost == 0.0 and again[-1].result.usage.requests == 0


# -- usage that is the bill (issue 23 item 3) --------------------------------------------


def test_a_run_halted_after_three_requests_reports_three() -> None:
    """a (1 request), then the guard reading a (1), and b beside the guard (1, cut off by the trip)."""
    b_sent = asyncio.Event()

    async def gate(call: Call) -> None:
        if "Answer" in call.last_user:
            b_sent.set()
            await asyncio.Event().wait()  # never answers: the trip cancels it
        elif "Judge" in call.last_user:
            await b_sent.wait()

    script = Script(
        lambda c: {"triggered": True, "reason": "no"} if "Judge" in c.last_user else "first", gate=gate
    )
    with pytest.raises(sd.Halted) as caught:
        sd.complete("Q [[a]]\n\nJudge {{ a }} [[halt:g]]\n\nAnswer [[b]]", model=script.model())
    assert len(script.calls) == 3
    assert caught.value.results is not None
    assert list(caught.value.results) == ["a", "g"]
    assert caught.value.results.usage.requests == 3


def test_a_failed_run_reports_the_answers_so_far_and_every_request_in_its_usage() -> None:
    def answer(call: Call) -> Any:
        if "Second" in call.last_user:
            raise sd.ModelError("provider gave up")
        return "one"

    events: list[Any] = []

    async def run() -> None:
        # retries=0: the failed request is sent once (retries are pinned in test_resilience_retries.py)
        async for event in sd.complete_incremental_async("First [[a]] Second [[b]]", model=Script(answer).model(), retries=0):
            events.append(event)

    asyncio.run(run())  # the generator ends after ProcessingError; the error is on the event
    error_event = events[-1]
    assert error_event.type == "processing_error" and error_event.result is not None
    assert isinstance(error_event.error, sd.ModelError)
    assert dict(error_event.result) == {"a": "one"}
    assert error_event.result.usage.requests == 2  # the failed request was sent, so it counts
    assert error_event.error.struckdown_usage.requests == 2


def test_turns_helper_sees_refusal_text() -> None:
    # the refusal reaches the model as the failed tool's return, in the same request as any other result
    script = Script(searching(1))
    sd.complete('Q [[a|use_tools=true, budget="search=0"]]', model=script.model(), tools=[make_search([])])
    assert turns(script.calls[-1].messages)[-1] == (
        "return", "Call budget exhausted: 'search' may be called at most 0 times in this slot."
    )


# -- batch budgets ------------------------------------------------------------------------


def test_a_batch_over_its_budget_returns_the_unstarted_rows_as_budget_exceeded() -> None:
    script = Script(lambda c: f"row {c.last_user}")
    results = sd.complete_batch(
        "Q {{ n }} [[a]]", [{"n": i} for i in range(5)], concurrency=1, model=script.model(),
        batch_limits=UsageLimits(request_limit=2),
    )
    assert len(script.calls) == 2
    assert [type(r).__name__ for r in results] == ["Result", "Result", "BudgetExceeded", "BudgetExceeded", "BudgetExceeded"]
    stopped = results[2]
    assert isinstance(stopped, sd.BudgetExceeded)
    assert (stopped.scope, stopped.limit, str(stopped)) == (
        "batch", "request_limit", "batch budget spent: the request_limit of 2 requests is reached; this row was not run",
    )
    assert len(stopped.results) == 0 and stopped.results.usage.requests == 0


def test_rows_in_flight_finish_when_the_batch_budget_runs_out() -> None:
    script = Script(lambda c: "ok", meet=3)  # the first three rows are all in flight before any answers
    results = sd.complete_batch(
        "Q {{ n }} [[a]]", [{"n": i} for i in range(5)], concurrency=3, model=script.model(),
        batch_limits=UsageLimits(request_limit=1),
    )
    assert script.peak == 3 and len(script.calls) == 3
    assert [type(r).__name__ for r in results] == ["Result"] * 3 + ["BudgetExceeded"] * 2


def test_a_batch_max_cost_counts_every_row_and_its_rows_have_no_run_budget_of_their_own() -> None:
    model = FunctionModel(priced("x"), model_name="m1")
    prices = {"m1": {"input": 1, "output": 1}}  # $0.0012 a request
    results = sd.complete_batch("Q {{ n }} [[a]]", [{"n": i} for i in range(4)], concurrency=1, model=model,
                                prices=prices, max_cost=0.002)
    assert [type(r).__name__ for r in results] == ["Result", "Result", "BudgetExceeded", "BudgetExceeded"]
    assert sum(r.usage.cost for r in results[:2]) == pytest.approx(0.0024)  # type: ignore[union-attr, misc]
    assert results[2].limit == "max_cost"  # type: ignore[union-attr]
    script = Script(lambda c: "x")
    with pytest.raises(sd.ConfigurationError, match="unknown"):
        sd.complete_batch("Q [[a]]", [{}, {}], model=script.model(), max_cost=1.0)
    assert script.calls == []
