"""Issue 40 item 16: the CLI's words. `sd --help` without markup escapes, counts in the
singular when there is one, budgets named by their flag, `sd test` naming the model as
given, date answers without JSON quotes, the provider-batch refusal naming the model in
the form it advises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_support import plain_environment, sd, use_model  # noqa: F401 - fixtures
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from struckdown.cli.fast.help_pages import PAGES


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def priced(answer: Any = "fine") -> FunctionModel:
    """1,000 tokens in and 200 out a request: $0.0012 at the prices below."""

    def function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts: list[Any] = (
            [ToolCallPart(info.output_tools[0].name, {"response": answer})] if info.output_tools else [TextPart(str(answer))]
        )
        return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=1000, output_tokens=200), model_name="m1")

    return FunctionModel(function, model_name="m1")


def test_sd_help_shows_slots_without_markup_escapes() -> None:
    result = sd("--help")
    assert "struckdown: run markdown templates whose [[slots]] a language model fills" in result.stdout
    assert "\\[" not in result.stdout
    assert "whose [[slots]] a language model fills" in PAGES[""] and "\\[" not in PAGES[""]  # the stored page too


def test_one_row_one_request_are_counted_in_the_singular(tmp_path: Path, use_model: Any) -> None:
    use_model(priced())
    rows = write(tmp_path / "rows.jsonl", '{"n": 1}\n')
    out = tmp_path / "out.jsonl"
    result = sd("batch", write(tmp_path / "t.sd", "Q {{ n }} [[a]]"), rows, "-o", out, "--no-cache")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1].startswith(f"batch: 1 row → {out}: 1 ok · 1 request · 1,200 tokens · ")
    run = sd("run", write(tmp_path / "one.sd", "Q [[a]]"), "--no-cache", "--no-stream")
    assert "done · 1 answer · 1 request · 1,200 tokens (1,000 in, 200 out) · " in run.stdout


def test_a_spent_max_cost_is_named_by_its_flag(tmp_path: Path, use_model: Any) -> None:
    use_model(priced())
    prices = write(tmp_path / "prices.json", json.dumps({"m1": {"input": 1, "output": 1}}))
    template = write(tmp_path / "t.sd", "A [[a]]\n\nB [[b]]")
    result = sd("run", template, "--prices", prices, "--max-cost", "0.001", "--no-cache", "--no-stream")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "error: slot 'a': BudgetExceeded: run budget spent: $0.0012, over --max-cost 0.001"


def test_sd_test_names_the_model_as_it_was_given() -> None:
    result = sd("test", "--model", "test")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: test answered 'success (no tool calls)' in ")


def test_a_date_answer_is_shown_without_json_quotes(tmp_path: Path, use_model: Any) -> None:
    use_model(priced("2026-12-03"))
    result = sd("run", write(tmp_path / "t.sd", "When? [[date:d]]"), "--no-cache", "--no-stream")
    assert result.exit_code == 0, result.output
    assert "d: 2026-12-03\n" in result.stdout and '"2026-12-03"' not in result.stdout
    as_json = sd("run", tmp_path / "t.sd", "--no-cache", "--json")
    assert json.loads(as_json.stdout) == {"d": "2026-12-03"}  # --json keeps JSON


def test_the_provider_batch_refusal_names_a_chat_model_as_openai_chat(tmp_path: Path, use_model: Any) -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    use_model(OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(api_key="sk-not-used")))
    rows = write(tmp_path / "rows.jsonl", '{"n": 1}\n')
    result = sd("batch", write(tmp_path / "t.sd", "Q [[a]]"), rows, "--provider-batch", "-o", tmp_path / "out.jsonl")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: provider batching needs a model with a batch API: OpenAI's Responses models (openai:… or "
        "openai-responses:…, not openai-chat:…), Anthropic, Google (FunctionModel and TestModel in tests); "
        "openai-chat:gpt-4o-mini (Chat Completions) has none; use openai:gpt-4o-mini"
    )
