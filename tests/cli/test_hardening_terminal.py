"""Model and tool text cannot drive the terminal.

Answers, streamed tokens, tool arguments, outputs and errors, guard reasons and error
messages reach the terminal with every C0/C1 control character (but newline and tab)
spelled as a visible escape, in the live display, the plain display, `--json` and
`sd batch`. JSON output keeps the exact value (it only escapes differently).
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from cli_support import plain_environment, sd, use_model  # noqa: F401
from cli_models import calls_tool_once, scripted

# Set the clipboard (OSC 52), ring, erase the line and go back to its start, then a C1 CSI.
PAYLOAD = "ok \x1b]52;c;SGk=\x07 \x1b[2K\rfake \x9b31m end"
SHOWN = "ok \\x1b]52;c;SGk=\\x07 \\x1b[2K\\x0dfake \\x9b31m end"
RAW = ("\x1b]", "\x07", "\x9b", "\r", "\x1b[2K\r")


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def assert_inert(text: str) -> None:
    for sequence in RAW:
        assert sequence not in text, (sequence, text)


def hostile(prompt: str, info: AgentInfo) -> Any:
    if info.output_tools:
        return {"triggered": True, "reason": PAYLOAD}
    return PAYLOAD


@pytest.fixture
def template(tmp_path: Path) -> Path:
    return write(tmp_path / "t.sd", "Say it [[answer]]\n")


@pytest.mark.parametrize("flags", [(), ("--no-stream",)])
def test_plain_display_shows_control_characters_as_escapes(template: Path, use_model: Any, flags: tuple[str, ...]) -> None:
    use_model(scripted(hostile))
    result = sd("run", template, *flags)
    assert result.exit_code == 0, result.output
    assert_inert(result.output)
    assert f"answer: {SHOWN}\n" in result.stdout


def test_live_display_shows_control_characters_as_escapes(
    template: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    monkeypatch.setattr("struckdown.cli.run_cmd.run_console", lambda stream: Console(file=stream, force_terminal=True))
    use_model(scripted(hostile))
    result = sd("run", template)
    assert result.exit_code == 0
    for sequence in ("\x1b]", "\x07", "\x9b"):
        assert sequence not in result.stdout, sequence
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stdout)
    assert "\\x1b]52;c;SGk=\\x07" in plain and "\\x9b31m end" in plain


def test_json_output_keeps_the_value_and_escapes_every_control(template: Path, use_model: Any, tmp_path: Path) -> None:
    use_model(scripted(hostile))
    out = tmp_path / "out.json"
    result = sd("run", template, "--json", "-o", out)
    assert result.exit_code == 0
    assert_inert(result.stdout)
    assert_inert(result.stderr)
    assert json.loads(result.stdout) == {"answer": PAYLOAD}
    assert "\\u009b" in result.stdout
    assert json.loads(out.read_text(encoding="utf-8"))["answers"] == {"answer": PAYLOAD}


def test_guard_reason_cannot_erase_the_tripped_line(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(hostile))
    template = write(tmp_path / "g.sd", "Check [[halt:g]]\nNext [[a]]\n")
    result = sd("run", template)
    assert result.exit_code == 3
    assert_inert(result.output)
    assert f"guard g: TRIPPED — {SHOWN}\n" in result.stdout
    assert f"halted by guard 'g': {SHOWN}\n" in result.stdout


TOOLS = '''
def lookup(city: str) -> str:
    """Look a city up."""
    if city == "bad":
        raise RuntimeError({payload!r})
    return {payload!r}
'''


@pytest.mark.parametrize("city", ["good", "bad", PAYLOAD])
def test_tool_arguments_outputs_and_errors_are_shown_inert(
    tmp_path: Path, use_model: Any, city: str
) -> None:
    tools = write(tmp_path / "tools.py", TOOLS.format(payload=PAYLOAD))
    use_model(scripted(calls_tool_once("lookup", {"city": city}, lambda output: "done")))
    template = write(tmp_path / "t.sd", "Weather? [[answer|use_tools=true]]\n")
    result = sd("run", template, "--tools", tools)
    assert result.exit_code == 0, result.output
    assert_inert(result.output)
    assert "tool lookup(" in result.stdout
    assert "\\x1b]52;c;SGk=" in result.stdout


def test_error_messages_are_shown_inert(template: Path, use_model: Any) -> None:
    def fail(messages: list[ModelMessage], info: AgentInfo) -> Any:
        raise RuntimeError(PAYLOAD)

    use_model(FunctionModel(fail))
    result = sd("run", template, "--no-stream")
    assert result.exit_code == 1
    assert_inert(result.stderr)
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")
    assert SHOWN in result.stderr


def test_batch_failure_lines_and_jsonl_stdout_are_inert(tmp_path: Path, use_model: Any) -> None:
    def reply(prompt: str, info: AgentInfo) -> Any:
        if "Row 1" in prompt:
            raise RuntimeError(PAYLOAD)
        return PAYLOAD

    use_model(scripted(reply))
    template = write(tmp_path / "b.sd", "Row {{ n }} [[answer]]\n")
    rows = write(tmp_path / "rows.jsonl", '{"n": 0}\n{"n": 1}\n')
    result = sd("batch", template, rows)
    assert result.exit_code == 1
    assert_inert(result.stdout)
    assert_inert(result.stderr)
    first = json.loads(result.stdout.splitlines()[0])
    assert first == {"n": 0, "answer": PAYLOAD}
    assert any(line.startswith("row 2: ") and SHOWN in line for line in result.stderr.splitlines())


def test_lone_surrogates_are_shown_not_crashed_on(template: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: "half \ud800 pair"))
    shown = sd("run", template, "--no-cache")
    assert shown.exit_code == 0, shown.output
    assert "answer: half \\ud800 pair\n" in shown.stdout
    as_json = sd("run", template, "--json", "--no-cache")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == {"answer": "half \ud800 pair"}
