"""The CLI and SPEC §14: `sd run` / `sd batch` take --retries, --max-tokens and --fallback
and show retries, fallbacks and cut answers as they happen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from cli_support import plain_environment, sd, use_model  # noqa: F401
from cli_models import scripted


def template(tmp_path: Path, text: str = "Say hi [[a]]\n") -> Path:
    path = tmp_path / "t.sd"
    path.write_text(text, encoding="utf-8")
    return path


def flaky(failures: int, seen: list[Any]) -> Any:
    """Answers 'hello there' after `failures` requests that fail with 503."""

    def reply(prompt: str, info: AgentInfo) -> Any:
        seen.append(info.model_settings)
        if len(seen) <= failures:
            raise ModelHTTPError(503, "scripted", {"error": {"message": "overloaded"}})
        return "hello there"

    return scripted(reply)


def test_run_shows_a_retry_as_it_happens(tmp_path: Path, use_model: Any) -> None:
    seen: list[Any] = []
    use_model(flaky(1, seen))
    result = sd("run", template(tmp_path), "--no-cache")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    retry = next(line for line in lines if "retry" in line)
    assert retry.startswith("a: retry 1 in ") and retry.endswith(" s — the provider failed (HTTP 503): overloaded")
    assert "a: hello there" in lines
    assert lines.index(retry) < lines.index("a: hello there")


def test_run_retries_flag(tmp_path: Path, use_model: Any) -> None:
    seen: list[Any] = []
    use_model(flaky(1, seen))
    result = sd("run", template(tmp_path), "--no-cache", "--retries", "0")
    assert result.exit_code == 1 and len(seen) == 1
    assert "HTTP 503" in result.output


def test_run_falls_back_and_says_so(tmp_path: Path, use_model: Any) -> None:
    seen: list[Any] = []
    use_model(flaky(99, seen))
    result = sd("run", template(tmp_path), "--no-cache", "--retries", "0", "--fallback", "test", "--json")
    assert result.exit_code == 0, result.output
    assert "a: falling back from scripted to test — the provider failed (HTTP 503): overloaded" in result.stderr
    assert json.loads(result.stdout) == {"a": "success (no tool calls)"}


def test_run_max_tokens_caps_every_request_and_a_cut_answer_is_flagged(tmp_path: Path, use_model: Any) -> None:
    seen: list[Any] = []

    def reply(prompt: str, info: AgentInfo) -> Any:
        seen.append((info.model_settings or {}).get("max_tokens"))
        return ModelResponse(parts=[TextPart("Once upon a")], finish_reason="length")

    use_model(scripted(reply))
    result = sd("run", template(tmp_path, "Tell [[a]] And [[b|max_tokens=9]]\n"), "--no-cache", "--no-stream",
                "--max-tokens", "5")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert seen == [5, 9]  # the slot's own max_tokens= wins
    assert "a: cut off at its limit (raise max_tokens= or --max-tokens; max_seconds= or --max-seconds)" in result.output.splitlines()


def test_an_answer_cut_before_a_loop_is_said_and_no_loop_guard_keeps_it(tmp_path: Path, use_model: Any) -> None:
    """SPEC §34: sd run says a slot was cut before a loop; --no-loop-guard keeps the answer whole."""
    penalties: list[Any] = []

    def reply(prompt: str, info: AgentInfo) -> Any:
        penalties.append((info.model_settings or {}).get("frequency_penalty"))
        return "A poem.\n" + "Whispers of the sea,\n" * 100

    use_model(scripted(reply))
    path = template(tmp_path, "Write a poem. [[poem]]\n")
    result = sd("run", path, "--no-cache", "--no-stream", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"poem": "A poem.\nWhispers of the sea,"} and penalties == [None, 0.5]
    assert "poem: cut before a loop (the answer repeated itself, also when asked once more; --no-loop-guard keeps it " \
           "whole)" in result.stderr
    whole = sd("run", path, "--no-cache", "--no-stream", "--json", "--no-loop-guard")
    assert json.loads(whole.stdout) == {"poem": "A poem.\n" + "Whispers of the sea,\n" * 100} and len(penalties) == 3


def test_the_default_cap_reaches_the_model_from_the_cli(tmp_path: Path, use_model: Any) -> None:
    seen: list[Any] = []

    def reply(prompt: str, info: AgentInfo) -> Any:
        seen.append((info.model_settings or {}).get("max_tokens"))
        return "ok" if not info.output_tools else 3

    use_model(scripted(reply))
    assert sd("run", template(tmp_path, "A [[a]] B [[int:b]]\n"), "--no-cache").exit_code == 0
    assert seen == [1024, 1024]


def test_batch_counts_retries_and_fallbacks_in_its_progress(tmp_path: Path, use_model: Any) -> None:
    calls: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append("x")
        if len(calls) == 1:
            raise ModelHTTPError(503, "scripted", {"error": {"message": "overloaded"}})
        return ModelResponse(parts=[TextPart("fine")])

    from pydantic_ai.models.function import FunctionModel

    use_model(FunctionModel(respond, model_name="scripted"))
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"n": 1}\n{"n": 2}\n', encoding="utf-8")
    result = sd("batch", template(tmp_path, "Row {{ n }} [[a]]\n"), rows, "-o", tmp_path / "out.jsonl", "--no-cache",
                "-j", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "batch: 2/2 rows, 1 retry," in result.output


def test_batch_fallback_travels_to_dask_workers() -> None:
    from struckdown.distributed import ship_kwargs

    shipped = ship_kwargs({"fallback": ["test", "openai-chat:gpt-4o-mini"], "tool_timeout": 5.0, "on_truncate": "error"})
    assert shipped["fallback"] == ("test", "openai-chat:gpt-4o-mini")
    assert (shipped["tool_timeout"], shipped["on_truncate"]) == (5.0, "error")


def test_explain_shows_the_resilience_options_and_the_output_cap(tmp_path: Path) -> None:
    path = template(tmp_path, 'A [[a|fallback="test", on_truncate=error]] B [[int:b]] C [[c|max_tokens=9]]\n')
    result = sd("explain", path)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert "resilience: fallback=test, on_truncate=error" in text
    assert "output cap: 1,024 tokens per request (the default for text answers" in text
    assert "output cap: 1,024 tokens per request (the default for value answers" in text
    assert text.count("output cap:") == 2  # slot c sets its own
