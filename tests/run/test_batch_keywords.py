"""The batch calls' keywords are rows of the one declaration (SPEC §22, issue 45): every keyword
of `complete_batch`, `complete_batch_async` and `complete_batch_iter_async` (the module's and an
Environment's) is a row of `run_options.BATCH_OPTIONS` and every such row is a keyword of each;
`sd batch` takes each row's flags; the rows' checks hold on every one of them."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
import typer

import struckdown as sd
from struckdown.cli.app import app
from struckdown.cli.options import BATCH_COMMAND_FLAGS, RUN_FLAGS
from struckdown.run_options import BATCH_OPTIONS, DECLARED, EXECUTOR_OPTIONS, OPTIONS, RunOptions
from tests.support.scripted import Script

BATCH_CALLS = [
    sd.complete_batch, sd.complete_batch_async, sd.complete_batch_iter_async,
    sd.Environment.complete_batch, sd.Environment.complete_batch_async, sd.Environment.complete_batch_iter_async,
]


@pytest.mark.parametrize("call", BATCH_CALLS, ids=lambda c: c.__qualname__)
def test_every_keyword_of_a_batch_call_is_a_row_and_every_row_a_keyword(call: Any) -> None:
    parameters = inspect.signature(call).parameters.values()
    keywords = {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert keywords == set(BATCH_OPTIONS)
    (rest,) = [p for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
    assert "Unpack[RunOptions]" in str(rest.annotation)  # the run keywords: the other rows


def test_the_rows_are_the_run_keywords_the_batch_keywords_and_the_executors() -> None:
    assert set(DECLARED) == set(OPTIONS) | set(BATCH_OPTIONS) | EXECUTOR_OPTIONS
    assert set(OPTIONS) == set(RunOptions.__annotations__)
    assert EXECUTOR_OPTIONS == {"model_factory", "deps_factory"}
    assert not set(OPTIONS) & set(BATCH_OPTIONS)
    assert all(not row.environment for row in BATCH_OPTIONS.values())  # per call: no Environment default


def test_sd_batch_takes_the_flags_of_every_batch_row() -> None:
    """Each batch row's flags are sd batch's options, declared in the one flag table."""
    command = typer.main.get_command(app).commands["batch"]  # type: ignore[attr-defined]
    spelled = {spelling for param in command.params for spelling in getattr(param, "opts", ())}
    for row in BATCH_OPTIONS.values():
        assert set(row.flags) <= spelled, row.name
    assert {RUN_FLAGS[name].option for name in BATCH_COMMAND_FLAGS} <= set(BATCH_OPTIONS)


@pytest.mark.parametrize("call", [sd.complete_batch, sd.Environment().complete_batch])
def test_a_bad_concurrency_is_refused_by_its_rows_rule(call: Any) -> None:
    with pytest.raises(TypeError, match=r"complete_batch\(\) concurrency must be a whole number of at least 1, not 0"):
        call("A [[a]]", [{}], concurrency=0, model="test")


def test_complete_batch_iter_async_calls_on_result_with_each_pair_it_yields() -> None:
    """The keyword the three calls did not share (issue 45: the batch keywords had drifted)."""
    told: list[tuple[int, Any]] = []
    script = Script(lambda call: "ok")

    async def collect() -> list[tuple[int, Any]]:
        pairs = []
        async for index, outcome in sd.complete_batch_iter_async(
            "Say it. [[a]]", [{"n": 1}, {"n": 2}], concurrency=1, on_result=lambda i, o: told.append((i, o)),
            model=script.model(),
        ):
            assert told[-1] == (index, outcome)  # told before it is yielded
            pairs.append((index, outcome))
        return pairs

    pairs = asyncio.run(collect())
    assert told == pairs and sorted(i for i, _ in pairs) == [0, 1]
    assert all(isinstance(outcome, sd.Result) and outcome["a"] == "ok" for _, outcome in pairs)
