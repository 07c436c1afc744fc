"""`sd run` / `sd batch` with budgets and cost: --prices, --max-cost, -o on failure (SPEC §13, issue 23)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from cli_support import plain_environment, sd, use_model  # noqa: F401 - fixtures

PRICES = {"m1": {"input": 1, "output": 1}}  # 1000 + 200 tokens a request: $0.0012


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def model(answer: Any = "fine", fail_on: str | None = None) -> FunctionModel:
    def function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text = str(messages[-1].parts[-1].content) if messages else ""  # type: ignore[union-attr]
        if fail_on is not None and fail_on in text:
            raise RuntimeError("provider exploded")
        value = answer(text, info) if callable(answer) else answer
        parts: list[Any] = (
            [ToolCallPart(info.output_tools[0].name, {"response": value})] if info.output_tools else [TextPart(str(value))]
        )
        return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=1000, output_tokens=200), model_name="m1")

    return FunctionModel(function, model_name="m1")


def test_run_shows_the_cost_and_writes_it(tmp_path: Path, use_model: Any) -> None:
    use_model(model())
    prices = write(tmp_path / "prices.json", json.dumps(PRICES))
    out = tmp_path / "out.json"
    result = sd("run", write(tmp_path / "t.sd", "A [[a]] B [[b]]"), "--prices", prices, "--no-stream", "-o", out)
    assert result.exit_code == 0, result.output
    assert "2 requests" in result.stdout and "$0.0024" in result.stdout
    assert json.loads(out.read_text())["usage"]["cost"] == 0.0024


def test_a_failed_run_writes_the_answers_so_far_the_usage_and_the_error(tmp_path: Path, use_model: Any) -> None:
    use_model(model(fail_on="Second"))
    out = tmp_path / "out.json"
    result = sd("run", write(tmp_path / "t.sd", "First [[a]]\n\nSecond [[b]]"), "--no-stream", "--no-cache", "-o", out)
    assert result.exit_code == 1
    record = json.loads(out.read_text())
    assert record["answers"] == {"a": "fine"}
    assert record["usage"]["requests"] == 2  # the failed request was sent: it counts
    assert record["error"] == "slot 'b': RuntimeError: provider exploded"
    assert "failed · 1 answer · 2 requests" in result.stdout


def test_a_run_halted_after_three_requests_reports_three_in_its_usage_and_in_o(tmp_path: Path, use_model: Any) -> None:
    b_sent = asyncio.Event()

    async def function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
        if "Answer" in text:
            b_sent.set()
            await asyncio.Event().wait()  # cut off by the trip
        if "Judge" in text:
            await b_sent.wait()
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": {"triggered": True, "reason": "no"}})])
        return ModelResponse(parts=[TextPart("first")])

    use_model(FunctionModel(function, model_name="m1"))
    out = tmp_path / "out.json"
    template = write(tmp_path / "t.sd", "Q [[a]]\n\nJudge {{ a }} [[halt:g]]\n\nAnswer [[b]]\n")
    result = sd("run", template, "--no-stream", "--no-cache", "-o", out)
    assert result.exit_code == 3
    record = json.loads(out.read_text())
    assert record["usage"]["requests"] == 3 and record["halted"] == {"slot": "g", "reason": "no"}
    assert "3 requests" in result.stdout


def test_batch_max_cost_records_rows_not_run_and_resume_runs_them(tmp_path: Path, use_model: Any) -> None:
    use_model(model(lambda text, info: text.split()[-1]))
    rows = write(tmp_path / "rows.jsonl", "".join(json.dumps({"n": i}) + "\n" for i in range(4)))
    prices = write(tmp_path / "prices.yaml", "m1: {input: 1, output: 1}\n")
    template = write(tmp_path / "t.sd", "Q {{ n }} [[a]]")
    out = tmp_path / "out.jsonl"
    first = sd("batch", template, rows, "-o", out, "-j", "1", "--prices", prices, "--max-cost", "0.002", "--no-cache")
    assert first.exit_code == 1
    assert "2 ok, 2 not run: budget spent (--resume runs them)" in first.stderr and "$0.0024" in first.stderr
    journal = [json.loads(line) for line in (tmp_path / "out.journal.jsonl").read_text().splitlines()]
    assert sorted((e["index"], e["ok"], e.get("not_run", False)) for e in journal) == [
        (0, True, False), (1, True, False), (2, False, True), (3, False, True),
    ]
    again = sd("batch", template, rows, "-o", out, "-j", "1", "--prices", prices, "--resume", "--no-cache")
    assert again.exit_code == 0, again.stderr
    assert [json.loads(line)["a"] for line in out.read_text().splitlines()] == ["0", "1", "2", "3"]
    assert "(2 done earlier, from the journal)" in again.stderr


def test_bad_prices_file_is_a_clear_error(tmp_path: Path, use_model: Any) -> None:
    use_model(model())
    prices = write(tmp_path / "prices.json", '{"m1": {"input": 1}}')
    result = sd("run", write(tmp_path / "t.sd", "A [[a]]"), "--prices", prices)
    assert result.exit_code == 2
    assert "--prices: prices['m1'] needs both 'input' and 'output'" in result.stderr


def test_batch_max_cost_summary_names_rows_not_run_one_way_and_counts_agree(tmp_path: Path, use_model: Any) -> None:
    """Issue 40 item 3: ten rows, a budget for two. No "failed" line for rows that never
    started, no "… and 3 more" with nothing before it; the resume note says the same."""
    use_model(model(lambda text, info: text.split()[-1]))
    rows = write(tmp_path / "rows.jsonl", "".join(json.dumps({"n": i}) + "\n" for i in range(10)))
    prices = write(tmp_path / "prices.yaml", "m1: {input: 1, output: 1}\n")
    template = write(tmp_path / "t.sd", "Q {{ n }} [[a]]")
    out = tmp_path / "out.jsonl"
    flags = ("-j", "1", "--prices", prices, "--max-cost", "0.002", "--no-cache")
    first = sd("batch", template, rows, "-o", out, *flags)
    assert first.exit_code == 1
    lines = first.stderr.splitlines()
    assert "failed" not in first.stderr and "more" not in first.stderr
    assert lines[-2].startswith("batch: 10/10 rows, 8 not run: budget spent, ")
    assert lines[-1].startswith(
        f"batch: 10 rows → {out}: 2 ok, 8 not run: budget spent (--resume runs them) · 2 requests · 2,400 tokens · $0.0024 · "
    )
    again = sd("batch", template, rows, "-o", out, *flags, "--resume")
    assert again.exit_code == 1
    assert again.stderr.splitlines()[0] == (
        f"resuming {tmp_path / 'out.journal.jsonl'}: 2 of 10 rows done; 8 rows not run: budget spent (run now)"
    )
    assert "failed" not in again.stderr
    assert "4 ok, 6 not run: budget spent (--resume runs them) (2 done earlier, from the journal)" in again.stderr


def test_a_failed_run_on_a_terminal_shows_what_it_spent(
    tmp_path: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    monkeypatch.setattr("struckdown.cli.run_cmd.run_console", lambda stream: Console(file=stream, force_terminal=True))
    use_model(model(fail_on="Second"))
    result = sd("run", write(tmp_path / "t.sd", "First [[a]]\n\nSecond [[b]]"), "--no-stream", "--no-cache")
    assert result.exit_code == 1
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stdout)
    assert "failed · 1 answer · 2 requests" in plain and "Line object" not in plain


UNPRICED_TEST = (
    "error: --max-cost is set but the price of model 'test' is unknown, so the budget cannot be enforced; "
    "give it with prices={'test': {'input': USD, 'output': USD}} (USD per million tokens; CLI --prices FILE)\n"
)


@pytest.mark.parametrize("engine", [[], ["--workers", "2"], ["--engine", "dask"]])
def test_batch_max_cost_with_an_unpriced_model_is_refused_before_any_row_on_every_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: list[str]
) -> None:
    """Issue 48 item 2, SPEC §13: `--workers 2 --max-cost 100 --model test` with no prices ran rows
    until "4 responses could not be priced"; the local engine refuses it before any call, and so
    does the Dask one now, before its cluster starts."""
    import struckdown.distributed as distributed

    class NoCluster:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise AssertionError("a cluster started for a batch that cannot be priced")

    monkeypatch.setattr(distributed, "DaskExecutor", NoCluster)
    template = write(tmp_path / "t.sd", "Say hi to {{ name }}.\n\n[[greeting]]\n")
    rows = write(tmp_path / "rows.csv", "name\na\nb\nc\n")
    out = tmp_path / "out.jsonl"
    done = sd("batch", template, rows, "-o", out, "--max-cost", "100", "--model", "test", *engine)
    assert (done.exit_code, done.output) == (1, UNPRICED_TEST)
    assert not out.exists()


def test_a_batch_refused_before_its_rows_closes_its_journal(tmp_path: Path) -> None:
    """A batch refused after its journal opened (an unpriced model, a model that cannot be used)
    left the journal's file open in the process."""
    import os

    def open_files() -> list[str]:
        return [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")]

    template = write(tmp_path / "t.sd", "Say hi to {{ name }}.\n\n[[greeting]]\n")
    rows = write(tmp_path / "rows.csv", "name\na\n")
    for argv in (["--max-cost", "100", "--model", "test", "--workers", "2"], ["--model", "issue48_nomod:factory"]):
        assert sd("batch", template, rows, "-o", tmp_path / "out.jsonl", *argv).exit_code == 1
        assert [f for f in open_files() if f.startswith(str(tmp_path))] == []
