"""What a new user runs into on the CLI (issue 40)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from cli_support import plain_environment, sd, use_model  # noqa: F401


@pytest.fixture(autouse=True)
def wide_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


# -- item 1: `--model module:factory` with a plain FunctionModel ---------------------------


def test_sd_run_with_a_model_that_cannot_stream_answers_and_says_so_once(tmp_path: Path, use_model: Any) -> None:
    def hello(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("hello")])

    use_model(FunctionModel(hello))
    template = write(tmp_path / "t.sd", "Say hi [[a]]\n\nAgain [[b]]\n")
    result = sd("run", template, "--no-cache")
    assert result.exit_code == 0, result.output
    assert "a: hello" in result.stdout and "b: hello" in result.stdout
    assert [line for line in result.stderr.splitlines() if line.startswith("warning:")] == [
        "warning: model function:hello cannot stream (a FunctionModel without stream_function=): its answers arrive whole"
    ]
    assert "AssertionError" not in result.output


# -- item 4: tool names in options --------------------------------------------------------

TYPOS = """
Q [[a|use_tools=true, budget="serch=1"]]
R [[b|use_tools=true, approve=fetc]]
S [[c|use_tools=true, tool_choice=seach]]
"""


def test_sd_check_tools_checks_every_tool_name_of_every_option(tmp_path: Path) -> None:
    template = write(tmp_path / "typo.sd", TYPOS)
    tools = write(tmp_path / "tools.py", """
        def search(q: str) -> str:
            return q

        def fetch(url: str) -> str:
            return url
    """)
    result = sd("check", template, "--tools", tools)
    assert result.exit_code == 1
    assert result.stdout == textwrap.dedent(f"""\
        {template}:1:30: error: budget= names 'serch', which is not a tool of this run
            Q [[a|use_tools=true, budget="serch=1"]]
                                         ^
            hint: did you mean 'search'? the run's tools: search, fetch
        {template}:2:31: error: approve= names 'fetc', which is not a tool of this run
            R [[b|use_tools=true, approve=fetc]]
                                          ^
            hint: did you mean 'fetch'? the run's tools: search, fetch
        {template}:3:35: error: tool_choice= names 'seach', which is not a tool of this run
            S [[c|use_tools=true, tool_choice=seach]]
                                              ^
            hint: did you mean 'search'? the run's tools: search, fetch
    """)
    assert result.stderr == "3 errors, 0 warnings in 1 template\n"
    fixed = write(tmp_path / "ok.sd", TYPOS.replace("serch", "search").replace("fetc]", "fetch]").replace("seach", "search"))
    assert sd("check", fixed, "--tools", tools).exit_code == 0


def test_sd_run_stops_at_a_budget_typo_with_its_position_before_any_request(tmp_path: Path, use_model: Any) -> None:
    calls: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append("called")
        return ModelResponse(parts=[TextPart("x")])

    use_model(FunctionModel(model))
    template = write(tmp_path / "t.sd", 'Q [[a|use_tools=true, budget="serch=1"]]\n')
    tools = write(tmp_path / "tools.py", "def search(q: str) -> str:\n    return q\n")
    result = sd("run", template, "--tools", tools, "--no-stream")
    assert result.exit_code == 2
    assert f"{template}:1:30: budget= names 'serch', which is not a tool of this run" in result.stderr
    assert "did you mean 'search'?" in result.stderr
    assert calls == []


# -- item 17: a runaway answer, its token rate, max_seconds ---------------------------------


def test_the_live_display_shows_a_streaming_answers_token_rate() -> None:
    import io

    from rich.console import Console

    from struckdown.cli.display import RunDisplay, token_rate
    from struckdown.incremental import SlotStreamStart, TokenDelta

    assert token_rate(10.0, 30, 12.0) == "30 tokens · 15.0 tok/s · 2 s"
    assert token_rate(10.0, 1, 10.5) == "1 token · 2.0 tok/s · 0 s"
    display = RunDisplay(Console(file=io.StringIO(), force_terminal=False), {}, ("poem",))
    display.handle(SlotStreamStart("poem"))
    text = ""
    for word in ("Roses ", "are ", "red"):
        text += word
        display.handle(TokenDelta("poem", word, text))
    out = io.StringIO()
    Console(file=out, width=120, force_terminal=False).print(display.__rich__())
    first = out.getvalue().splitlines()[0]
    assert "poem · 3 tokens · " in first and " tok/s · " in first


def test_sd_run_max_seconds_keeps_the_text_so_far_and_says_how_to_go_further(
    tmp_path: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    passes = [asyncio.Event()]  # bound to the run's loop when first waited on
    asked: list[float] = []

    async def sleep(seconds: float) -> None:  # the deadline's clock: passes once the model streamed
        asked.append(seconds)
        await passes[-1].wait()

    monkeypatch.setattr("struckdown.run.deadline.sleep", sleep)

    async def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("streamed")

    async def stream(messages: list[ModelMessage], info: AgentInfo):  # type: ignore[no-untyped-def]
        yield "Roses "
        yield "are red"
        passes[-1].set()
        await asyncio.Event().wait()
        yield ""

    use_model(FunctionModel(whole, stream_function=stream, model_name="slow"))
    template = write(tmp_path / "t.sd", "Write a poem [[poem]]\n")
    out = tmp_path / "out.json"
    result = sd("run", template, "--max-seconds", "30", "--no-cache", "-o", out)
    assert result.exit_code == 0, result.output
    assert asked == [30.0]
    assert "poem: Roses are red" in result.stdout
    assert "poem: cut off at its limit (raise max_tokens= or --max-tokens; max_seconds= or --max-seconds)" in result.output
    import json

    assert json.loads(out.read_text())["answers"] == {"poem": "Roses are red"}


# -- item 6: --otel without a collector ---------------------------------------------------


def test_otel_without_a_collector_is_one_warning_line(
    tmp_path: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on: connection refused at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr("struckdown.observe.EXPORT_TIMEOUT_S", 0.3)  # the exporter's retries end quickly

    def hello(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("hello")])

    use_model(FunctionModel(hello))
    template = write(tmp_path / "t.sd", "Say hi [[a]]\n")
    result = sd("run", template, "--otel", "--no-cache", "--no-stream")
    assert result.exit_code == 0, result.output
    assert "a: hello" in result.stdout
    assert [line for line in result.stderr.splitlines() if line.strip()] == [
        f"warning: --otel: the traces could not be exported to http://127.0.0.1:{port}: is an OTLP collector "
        "running there? (OTEL_EXPORTER_OTLP_ENDPOINT sets where)"
    ]
