"""The `sd` command line: run/chat, check, explain (batch is in test_cli_batch.py).

Commands run in-process through typer's CliRunner with a scripted model put in
place of every model string (`struckdown.models._from_string`, where one becomes a Model).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cli_support import plain_environment, runner, sd, use_model  # noqa: F401
from cli_models import calls_tool_once, scripted
from struckdown.cli.loading import load_tools



@pytest.fixture(autouse=True)
def wide_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def echo(prompt: str, info: Any) -> Any:
    """Free-text slots answer with their prompt; guards never trip."""
    if info.output_tools:
        return {"triggered": False, "reason": "fine"}
    return f"echo: {prompt.strip()}"


# -- sd run: answers, context, exit codes -------------------------------------------------


def test_run_streams_answers_and_summary(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "Tell me about {{ topic }} [[summary]]\n")
    result = sd("run", template, "-c", "topic=owls")
    assert result.exit_code == 0
    assert "summary: echo: Tell me about owls\n" in result.stdout
    assert "done · 1 answer · 1 request" in result.stdout


@pytest.mark.parametrize(
    ("name", "content"),
    [("ctx.json", '{"topic": "owls", "n": 3}'), ("ctx.yaml", "topic: owls\nn: 3\n"), ("ctx.yml", "topic: owls\nn: 3\n")],
)
def test_context_file_json_or_yaml(tmp_path: Path, use_model: Any, name: str, content: str) -> None:
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "{{ topic }} x{{ n + 1 }} [[summary]]\n")
    context = write(tmp_path / name, content)
    result = sd("run", template, "--context", context, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"summary": "echo: owls x4"}


def test_set_overrides_the_context_file_and_parses_json(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "{{ topic }} {{ n + 1 }} {{ tags | join('/') }} [[summary]]\n")
    context = write(tmp_path / "ctx.json", '{"topic": "owls", "n": 1, "tags": []}')
    result = sd("run", template, "--context", context, "-c", "topic=bats", "-c", "n=41", "-c", 'tags=["a","b"]', "--json")
    assert json.loads(result.stdout) == {"summary": "echo: bats 42 a/b"}


def test_json_stdout_is_exactly_the_answers(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "One [[a]]\nIs it ok? [[halt:check]]\nTwo [[b]]\n")
    result = sd("run", template, "--json")
    answers = {"a": "echo: One", "check": {"triggered": False, "reason": "fine"}, "b": "echo: Two"}
    assert result.exit_code == 0
    assert result.stdout == json.dumps(answers, indent=2) + "\n"
    assert "guard check: passed — fine" in result.stderr  # the display moved to stderr


def test_output_file_holds_answers_usage_and_halted(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "One [[a]]\n")
    out = tmp_path / "out.json"
    assert sd("run", template, "-o", out).exit_code == 0
    record = json.loads(out.read_text())
    assert record["answers"] == {"a": "echo: One"}
    assert record["usage"]["requests"] == 1 and record["usage"]["total_tokens"] > 0
    assert record["halted"] is None


def test_guard_trip_exits_3_and_records_the_halt(tmp_path: Path, use_model: Any) -> None:
    def judge(prompt: str, info: Any) -> Any:
        if info.output_tools:
            return {"triggered": "idiot" in prompt, "reason": "insulting"}
        return "a reply"

    use_model(scripted(judge))
    template = write(tmp_path / "t.sd", "Message: {{ msg }}\n[[halt:rude]]\nReply to it. [[reply]]\n")
    out = tmp_path / "out.json"
    result = sd("run", template, "-c", "msg=you idiot", "-o", out)
    assert result.exit_code == 3
    assert "guard rude: TRIPPED — insulting" in result.stdout
    assert "halted by guard 'rude': insulting" in result.stdout
    assert json.loads(out.read_text())["halted"] == {"slot": "rude", "reason": "insulting"}


def test_template_error_exits_2_with_position(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "A [[a]]\nB [[a]]\n")
    result = sd("run", template)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {template}:2:3: duplicate slot key 'a'")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("ctx.json", '{"topic": ', "invalid JSON"),
        ("ctx.json", "[1, 2]", "must hold a mapping"),
        ("ctx.yaml", "a: [unclosed", "invalid YAML"),
        ("missing.json", None, "does not exist"),
    ],
)
def test_bad_context_file_exits_2(tmp_path: Path, use_model: Any, name: str, content: str | None, message: str) -> None:
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "A [[a]]\n")
    if content is not None:
        write(tmp_path / name, content)
    result = sd("run", template, "--context", tmp_path / name)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and message in result.stderr


def test_model_failure_exits_1_without_traceback(tmp_path: Path, use_model: Any) -> None:
    def broken(prompt: str, info: Any) -> Any:
        raise RuntimeError("the model server fell over")

    use_model(scripted(broken))
    template = write(tmp_path / "t.sd", "A [[a]]\n")
    result = sd("run", template)
    assert result.exit_code == 1
    assert result.stderr == "error: slot 'a': RuntimeError: the model server fell over\n"


def test_missing_model_is_one_clear_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_BASE", "LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    template = write(tmp_path / "t.sd", "A [[a]]\n")
    result = sd("run", template)
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: no model configured")
    for hint in ("--model", "STRUCKDOWN_MODEL", "LLM_API_BASE"):
        assert hint in result.stderr


def test_model_test_is_a_dry_run(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", "A [[a]]\nPick [[pick:p|x,y]]\n")
    result = sd("chat", template, "--model", "test", "--json", "--no-stream")
    assert result.exit_code == 0
    assert json.loads(result.stdout).keys() == {"a", "p"}


def test_stop_at_ends_after_that_slot(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "One [[a]]\nTwo [[b]]\n")
    assert json.loads(sd("run", template, "--stop-at", "a", "--json").stdout) == {"a": "echo: One"}
    result = sd("run", template, "--stop-at", "zzz")
    assert result.exit_code == 2 and "--stop-at 'zzz' is not a slot" in result.stderr


def test_output_is_plain_when_not_a_terminal(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "Message [[halt:g]]\nOne two three [[a]]\n<checkpoint>\nFour [[b]]\n")
    result = sd("run", template)
    assert result.exit_code == 0
    assert "\x1b[" not in result.output
    assert "a: echo: One two three\n" in result.stdout


@pytest.mark.parametrize(("flags", "cache"), [((), True), (("--no-cache",), False)])
def test_run_and_batch_pass_the_cache_flag_to_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], cache: bool
) -> None:
    from struckdown.incremental import ProcessingComplete
    from struckdown.results import Result

    seen: dict[str, Any] = {}

    async def incremental(template: Any, context: Any, **kwargs: Any) -> Any:
        seen["run"] = kwargs
        yield ProcessingComplete(Result({}, ()))

    async def batch(template: Any, contexts: Any, **kwargs: Any) -> Any:
        seen["batch"] = kwargs
        for index, _ in enumerate(contexts):
            yield index, Result({}, ())

    monkeypatch.setattr("struckdown.api.complete_incremental_async", incremental)
    monkeypatch.setattr("struckdown.api.complete_batch_iter_async", batch)
    template = write(tmp_path / "t.sd", "A [[a]]\n")
    rows = write(tmp_path / "rows.jsonl", '{"x": 1}\n')
    assert sd("run", template, "--model", "test", *flags).exit_code == 0
    assert sd("batch", template, rows, "--model", "test", "-j", "3", *flags).exit_code == 0
    assert seen["run"]["cache"] is cache and seen["run"]["model"] == "test"
    assert seen["batch"]["cache"] is cache and seen["batch"]["concurrency"] == 3
    assert seen["batch"]["max_requests"] == 6  # the default request cap: 2 x -j
    assert sd("batch", template, rows, "--model", "test", "-j", "3", "--max-requests", "4", *flags).exit_code == 0
    assert seen["batch"]["max_requests"] == 4


def test_terminal_gets_the_live_display(tmp_path: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    monkeypatch.setattr("struckdown.cli.run_cmd.run_console", lambda stream: Console(file=stream, force_terminal=True))
    use_model(scripted(echo))
    template = write(tmp_path / "t.sd", "Check {{ x }} [[halt:g]]\nOne two three [[a]]\n")
    result = sd("run", template, "-c", "x=1")
    assert result.exit_code == 0
    assert "\x1b[" in result.stdout  # colours and cursor moves
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stdout)
    assert "echo: One two three" in plain and "guard g: passed" in plain and "done · 2 answers" in plain


# -- --tools ---------------------------------------------------------------------------------

TOOLS_FILE = '''
import json
from os.path import join  # imported, so not a tool
from struckdown import readonly

LOG = {log!r}


@readonly
def lookup(city: str) -> str:
    """The weather in a city."""
    with open(LOG, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({{"city": city}}) + "\\n")
    return f"sunny in {{city}}"


def _private() -> None:
    pass
'''


def test_tools_file_is_loaded_and_the_model_calls_it(tmp_path: Path, use_model: Any) -> None:
    log = tmp_path / "calls.jsonl"
    tools = write(tmp_path / "tools.py", TOOLS_FILE.format(log=str(log)))
    offered: list[list[str]] = []

    def reply(prompt: str, info: Any) -> Any:
        offered.append([t.name for t in info.function_tools])
        return calls_tool_once("lookup", {"city": "Paris"}, lambda out: f"It is {out}.")(prompt, info)

    use_model(scripted(reply))
    template = write(tmp_path / "t.sd", "Weather in Paris? [[answer|use_tools=true]]\n")
    result = sd("run", template, "--tools", tools)
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in log.read_text().splitlines()] == [{"city": "Paris"}]
    assert offered and all(names == ["lookup"] for names in offered)  # not `join`, not `_private`
    assert '[answer] tool lookup(city="Paris") → sunny in Paris' in result.stdout
    assert "answer: It is sunny in Paris.\n" in result.stdout


def test_load_tools_keeps_readonly_marks(tmp_path: Path) -> None:
    from struckdown.run.tools import is_readonly

    tools = load_tools(write(tmp_path / "tools.py", TOOLS_FILE.format(log=str(tmp_path / "x"))))
    assert [t.__name__ for t in tools] == ["lookup"]
    assert is_readonly(tools[0])


def test_broken_tools_file_exits_2(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", "A [[a|use_tools=true]]\n")
    tools = write(tmp_path / "tools.py", "import not_a_module_anywhere\n")
    result = sd("run", template, "--model", "test", "--tools", tools)
    assert result.exit_code == 2
    assert "tools file" in result.stderr and "ModuleNotFoundError" in result.stderr


# -- sd check ------------------------------------------------------------------------------------


def test_check_reports_each_diagnostic_with_line_and_column(tmp_path: Path) -> None:
    template = write(
        tmp_path / "t.sd",
        """
        Hello {{ name }} and {{ who }}
        [[summary]]
        [[halt:late]]
        Plan [[plan|use_tools=true, max_iter=50]]
        Later {{ future }}
        [[future]]
        """,
    )
    orphan = write(tmp_path / "orphan.sd", "[[halt:g]]\nThen [[a]]\n")
    result = sd("check", template, orphan, "-c", "name=Ann")
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if not line.startswith("    ")]
    assert lines == [
        f"{template}:1:25: error: undefined variable 'who': not in the context and not answered before",
        f"{template}:3:1: warning: guard 'late' placed after the text it should judge: "
        "it follows [[summary]] with no text between, so it has nothing to read",
        f"{template}:4:6: warning: slot 'plan' sets use_tools=true but no --tools file was given",
        f"{template}:4:6: warning: slot 'plan' asks for max_iter=50 above the default ceiling 20; 20 will be used",
        f"{template}:5:10: error: undefined variable 'future': not in the context and not answered before",
        f"{orphan}:1:1: error: guard 'g' has no text above it to judge",
    ]
    assert "hint: 'future' is answered later (line 6)" in result.stdout
    assert result.stderr == "3 errors, 3 warnings in 2 templates\n"


def test_check_syntax_error_is_positioned(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", "A [[a]]\nB [[bogus:b]]\n")
    result = sd("check", template)
    assert result.exit_code == 1
    # the source line and a caret under the column, then the hint
    assert result.stdout.startswith(f"{template}:2:5: error: unknown type 'bogus'\n    B [[bogus:b]]\n        ^\n    hint: known types:")


def test_check_lists_expected_variables_without_a_context(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", "Hello {{ name }}\n[[a]]\nUse {{ a }} {{ later }} [[b]]\n[[later]]\n")
    result = sd("check", template)
    assert result.exit_code == 0  # notes are information, not problems
    assert result.stdout == (
        f"{template}:1:10: note: expects 'name' from the context\n"
        "    Hello {{ name }}\n"
        "             ^\n"
        f"{template}:3:16: note: expects 'later' from the context\n"
        "    Use {{ a }} {{ later }} [[b]]\n"
        "                   ^\n"
        "    hint: 'later' is answered later (line 4); a template can only read earlier answers\n"
    )
    assert result.stderr == "1 template checked: no problems found\n"
    assert sd("check", template, "-c", "name=x", "-c", "later=y").exit_code == 0  # `a` is answered before it is read


def test_check_with_tools_has_no_tool_warning(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", "Go [[a|use_tools=true]]\n")
    tools = write(tmp_path / "tools.py", "def ping() -> str:\n    return 'pong'\n")
    assert sd("check", template).stdout.count("warning") == 1
    assert "warning" not in sd("check", template, "--tools", tools).stdout


# -- sd explain --------------------------------------------------------------------------------


def test_explain_shows_segments_slots_guards_and_limits(tmp_path: Path) -> None:
    template = write(
        tmp_path / "t.sd",
        """
        Topic: {{ topic }}
        [[halt:offtopic]]
        Summarise [[summary]]
        Pick [[pick:colour|red, green]]
        <checkpoint>Second</checkpoint>
        Use {{ summary }} [[int*:n|max_iter=3]]
        Plan [[json:plan|use_tools=true, max_iter=30, max_calls=2]]
        """,
    )
    result = sd("explain", template)
    assert result.exit_code == 0
    out = result.stdout
    for expected in (
        "segment 0 — starts at once",
        "segment 1 'Second' — waits for: summary · fresh conversation",
        "guard offtopic: halts the run when triggered is true",
        "judges the text above it (reads topic)",
        "starts when reached and runs beside what follows",
        "joined before: the first streamed token",
        "slot colour: pick, one answer, may be null",
        "choices: red | green",
        "slot n: int, a list of any length, may be null",
        "limits: 3 requests (max_iter) · 20 tool calls · 250,000 output tokens",
        "limits: 20 requests (max_iter=30, clamped to the ceiling) · 2 tool calls (max_calls)",
        "limits per slot: 20 requests · 20 tool calls · 250,000 output tokens",
    ):
        assert expected in out, expected
    assert "\x1b[" not in out


def test_explain_template_error_exits_2(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", "A [[a]\n")
    result = sd("explain", template)
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {template}:1:")


# -- startup ---------------------------------------------------------------------------------------


def test_help_does_not_import_pydantic_ai() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['sd', '--help']\n"
        "from struckdown.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED' if 'pydantic_ai' in sys.modules else 'LAZY', file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert "Usage: sd" in done.stdout
    assert done.stderr.strip().endswith("LAZY")


def test_a_tools_file_runs_without_struckdowns_future_flags(tmp_path: Path) -> None:
    """The file is compiled on its own terms: its annotations are real types, not strings."""
    from struckdown.cli.loading import load_tools

    path = tmp_path / "tools.py"
    path.write_text('def lookup(word: str, n: int = 1) -> str:\n    """Look up."""\n    return word\n')
    (tool,) = load_tools(path)
    assert tool.__annotations__ == {"word": str, "n": int, "return": str}


def test_the_answer_beside_a_tripped_guard_is_never_shown_or_written(
    tmp_path: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC §4 in the CLI (issue 24 item 6): with --no-stream, --json and -o. Gate: the
    guard's verdict comes only after the display has received the reply beside it."""
    import asyncio

    from pydantic_ai.models.function import FunctionModel

    from struckdown.cli.display import RunDisplay

    reply_seen = asyncio.Event()
    original = RunDisplay._on_slot_completed

    def seen(self: RunDisplay, event: Any) -> None:
        original(self, event)
        if event.slot == "reply":
            reply_seen.set()

    monkeypatch.setattr(RunDisplay, "_on_slot_completed", seen)
    base = scripted(lambda prompt, info: {"triggered": True, "reason": "insulting"} if info.output_tools else "a reply")

    async def judge_after_the_reply(messages: Any, info: Any) -> Any:
        if info.output_tools:
            await reply_seen.wait()
        return base.function(messages, info)  # type: ignore[misc]

    use_model(FunctionModel(judge_after_the_reply, model_name="scripted"))
    template = write(tmp_path / "t.sd", "Message: {{ msg }}\n[[halt:rude]]\nReply to {{ msg }}. [[reply]]\n")
    out = tmp_path / "out.json"
    result = sd("run", template, "-c", "msg=you idiot", "--no-stream", "--json", "-o", out)
    assert result.exit_code == 3
    assert "a reply" not in result.stdout and "a reply" not in result.stderr
    assert json.loads(result.stdout) == {"rude": {"triggered": True, "reason": "insulting"}}
    record = json.loads(out.read_text())
    assert record["answers"] == {"rude": {"triggered": True, "reason": "insulting"}}
    assert record["usage"]["requests"] == 2  # the discarded reply was still paid for


def test_check_warns_at_500_slots_in_one_conversation_quoting_the_measured_cost(tmp_path: Path) -> None:
    """Issue 39 N19: a long single conversation costs the square of its slots (docs/performance.md)."""
    long = write(tmp_path / "long.sd", "".join(f"Q{n} [[a{n}]]\n" for n in range(520)) + "<checkpoint>\nLast [[z]]\n")
    result = sd("check", long)
    assert result.exit_code == 0  # a warning, not an error
    assert result.stdout.splitlines()[:3] == [
        f"{long}:500:6: warning: 520 slots in one conversation: every request carries all the turns before it, "
        "so the work grows with the square of the slots (measured: 1.9 s of CPU for 200 slots, so about 13 s for 520, "
        "before any model time; the prompt tokens, and so the cost, grow the same way; "
        'see "Long conversations" in docs/performance.md)',
        "    Q499 [[a499]]",
        "         ^",
    ]
    assert "hint: split it with <checkpoint>" in result.stdout
    assert result.stderr == "0 errors, 1 warning in 1 template\n"
    split = write(tmp_path / "split.sd", "".join(f"Q{n} [[a{n}]]\n" for n in range(499)) + "<checkpoint>\n"
                  + "".join(f"R{n} [[b{n}]]\n" for n in range(499)))
    assert sd("check", split).stderr == "1 template checked: no problems found\n"


# -- typed answers that stream (SPEC §26) ------------------------------------------------


def record_in_pieces() -> Any:
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel

    pieces = ['{"response": {"name": "Al', 'ice", "age": 3', "1}}"]

    async def stream(messages: Any, info: Any) -> Any:
        for i, piece in enumerate(pieces):
            yield {0: DeltaToolCall(info.output_tools[0].name if i == 0 else None, piece)}

    def whole(messages: Any, info: Any) -> Any:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, "".join(pieces))])

    return FunctionModel(whole, stream_function=stream, model_name="scripted")


@pytest.mark.parametrize("flags", [(), ("--no-stream",)])
def test_the_live_region_shows_a_typed_answer_growing_then_the_answer(
    tmp_path: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...]
) -> None:
    import io

    from rich.console import Console

    from struckdown.cli.display import RunDisplay
    from struckdown.run import partials

    ticks = iter(range(1000))
    monkeypatch.setattr(partials, "monotonic", lambda: float(next(ticks)))  # no partial coalesced
    monkeypatch.setattr("struckdown.cli.run_cmd.run_console", lambda stream: Console(file=stream, force_terminal=True))
    frames: list[str] = []
    original = RunDisplay._on_slot_partial

    def seen(self: RunDisplay, event: Any) -> None:
        original(self, event)
        out = io.StringIO()
        Console(file=out, width=60, color_system=None).print(self.__rich__())
        frames.append("\n".join(line.rstrip() for line in out.getvalue().splitlines()[1:-1]))

    monkeypatch.setattr(RunDisplay, "_on_slot_partial", seen)
    use_model(record_in_pieces())
    result = sd("run", write(tmp_path / "t.sd", "Who? [[record:who]]\n"), *flags)
    assert result.exit_code == 0
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stdout)
    assert '{"name": "Alice", "age": 31}' in plain  # the final answer, printed for good
    if flags:
        assert frames == []  # --no-stream: only the final answer
        return
    assert frames == [
        '  {\n    "name": "Al"\n  }',
        '  {\n    "name": "Alice",\n    "age": 3\n  }\n  ✓ name',
        '  {\n    "name": "Alice",\n    "age": 31\n  }\n  ✓ name, age',
    ]
