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
