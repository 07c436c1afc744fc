"""What a real user runs into (issue 23): one JSON form for every value, the
guard's reason before its verdict, undefined variables, the CLI's messages."""

from __future__ import annotations

import csv
import datetime as dt
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd_api
from cli_models import scripted
from cli_support import plain_environment, runner, sd, use_model  # noqa: F401
from scripted import Script


@pytest.fixture(autouse=True)
def wide_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def typed(prompt: str, info: Any) -> Any:
    """A duration and a date, answered through the output tool."""
    schema = info.output_tools[0].parameters_json_schema["properties"]["response"]
    formats = [branch.get("format") for branch in schema.get("anyOf", [schema])]
    return "PT2H30M" if "duration" in formats else "2024-05-01"


# -- one JSON form: durations as ISO 8601 everywhere ---------------------------------------


def test_duration_is_iso_8601_in_to_dict() -> None:
    script = Script(lambda call: "PT2H30M")
    result = sd_api.complete("How long? [[duration:d]]", model=script.model())
    assert result["d"] == dt.timedelta(hours=2, minutes=30)
    assert result.to_dict() == {"d": "PT2H30M"}
    assert result.results["d"].to_dict()["output"] == "PT2H30M"


def test_duration_is_iso_8601_in_run_json_and_output_file(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(typed))
    template = write(tmp_path / "t.sd", "How long? [[duration:d]]\nWhen? [[date:when]]\n")
    result = sd("run", template, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"d": "PT2H30M", "when": "2024-05-01"}
    out = tmp_path / "out.json"
    assert sd("run", template, "-o", out).exit_code == 0
    assert json.loads(out.read_text())["answers"] == {"d": "PT2H30M", "when": "2024-05-01"}


def test_duration_is_iso_8601_in_batch_outputs(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(typed))
    template = write(tmp_path / "t.sd", "How long is {{ input }}? [[duration:d]]\n")
    inputs = write(tmp_path / "in.csv", "input\nlunch\n")
    out_csv, out_jsonl = tmp_path / "out.csv", tmp_path / "out.jsonl"
    assert sd("batch", template, inputs, "-o", out_csv).exit_code == 0
    assert sd("batch", template, inputs, "-o", out_jsonl).exit_code == 0
    assert [row["d"] for row in csv.DictReader(out_csv.open())] == ["PT2H30M"]
    assert [json.loads(line)["d"] for line in out_jsonl.read_text().splitlines()] == ["PT2H30M"]


# -- the guard reasons before its verdict ---------------------------------------------------


def test_guard_verdict_schema_asks_for_the_reason_first() -> None:
    def answer(call: Any) -> Any:
        return {"reason": "polite", "triggered": False} if call.schema else "hi"

    script = Script(answer)
    result = sd_api.complete("Say hi [[reply]]\nStop if the reply is rude. [[halt:rude]]", model=script.model())
    assert result["reply"] == "hi"
    [guard] = [call.schema for call in script.calls if call.schema]
    assert list(guard["$defs"]["HaltVerdict"]["properties"]) == ["reason", "triggered"]


# -- undefined variables: a warning with its line, or (strict) an error before any request ---


def test_undefined_variable_warns_with_its_line(caplog: pytest.LogCaptureFixture) -> None:
    script = Script(lambda call: "hi")
    template = "Hello {{ nme }}\n{% if vip %}Dear guest{% endif %} [[greeting]]\nThen {{ greeting }} [[b]]"
    with pytest.warns(UserWarning) as caught:
        result = sd_api.complete(template, {"name": "Ann"}, model=script.model())
    assert [str(w.message) for w in caught] == [
        "undefined variable 'nme' (line 1): not in the context and not answered before; did you mean 'name'?",
        "undefined variable 'vip' (line 2): not in the context and not answered before",  # no key is close
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "struckdown"] == [str(w.message) for w in caught]
    assert result["greeting"] == "hi"
    assert script.calls[0].last_user == "Hello"  # an undefined name renders as nothing, as in Jinja


def test_strict_undefined_raises_before_any_request() -> None:
    script = Script(lambda call: "hi")
    with pytest.raises(sd_api.TemplateRuntimeError) as info:
        sd_api.complete("Hi [[a]]\nHello {{ nme }} [[b]]", {"name": "Ann"}, model=script.model(), strict_undefined=True)
    assert str(info.value) == (
        "undefined variable 'nme' (line 2): not in the context and not answered before; did you mean 'name'? "
        "(strict_undefined=True)"
    )
    assert script.calls == []
    # every name the template reads is given: no error, no warning
    sd_api.complete("Hi [[a]]\nHello {{ nme }} [[b]]", {"nme": "Ann"}, model=script.model(), strict_undefined=True)
    assert len(script.calls) == 2


def test_sd_run_prints_one_line_per_undefined_name(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: "ok"))
    template = write(tmp_path / "t.sd", "Hello {{ nme }} and {{ nme }}\nAlso {{ place }} [[a]]\n")
    result = sd("run", template, "-c", "name=Ann")
    assert result.exit_code == 0
    assert [line for line in result.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: undefined variable 'nme' (line 1 of {template}): not in the context and not answered before; "
        "did you mean 'name'?",
        f"warning: undefined variable 'place' (line 2 of {template}): not in the context and not answered before",
    ]
    strict = sd("run", template, "-c", "name=Ann", "--strict")
    assert strict.exit_code == 2
    assert f"undefined variable 'nme' (line 1 of {template})" in strict.stderr and "Traceback" not in strict.stderr


# -- answers print in template order ------------------------------------------------------


def test_answers_print_in_template_order_whatever_order_they_finish(tmp_path: Path) -> None:
    """Two independent segments; the second finishes first (the model holds the first
    until the consumer has seen the second's answer). The display still prints a, then b."""
    import asyncio
    import io

    from rich.console import Console

    from struckdown.cli.display import RunDisplay, answer_order

    template = "First [[a]]\n<checkpoint>\nSecond [[b]]\nThird [[c]]\n"
    second_done = asyncio.Event()

    async def gate(call: Any) -> None:
        if "First" in call.last_user:
            await second_done.wait()

    script = Script(lambda call: call.last_user.split()[0].lower(), gate=gate)

    async def collect() -> list[Any]:
        events = []
        async for event in sd_api.complete_incremental_async(template, {}, model=script.model(), stream=False):
            events.append(event)
            if event.type == "slot_completed" and event.slot == "c":
                second_done.set()
        return events

    events = asyncio.run(collect())
    assert [e.slot for e in events if e.type == "slot_completed"] == ["b", "c", "a"]
    program = sd_api.default_environment().parse(template)
    out = io.StringIO()
    display = RunDisplay(Console(file=out, force_terminal=False), {}, program.keys, answer_order(program))
    with display:
        for event in events:
            display.handle(event)
    display.summary(events[-1].result, 0.0)
    assert out.getvalue().splitlines()[:3] == ["a: first", "b: second", "c: third"]


def test_an_answer_after_a_skipped_branch_is_not_held(tmp_path: Path) -> None:
    """`answer_order`: a slot's completion settles the slots before it in its segment,
    taken branch or not, so nothing waits for a slot that never runs."""
    import io

    from rich.console import Console

    from struckdown.cli.display import RunDisplay, answer_order

    template = "Go [[a]]\n{% if a == 'never' %}Maybe [[m]]{% endif %}\nThen [[b]]\n"
    script = Script(lambda call: "yes")
    events = list(sd_api.complete_incremental(template, {}, model=script.model(), stream=False))
    program = sd_api.default_environment().parse(template)
    assert answer_order(program) == {"a": frozenset(), "m": frozenset({"a"}), "b": frozenset({"a", "m"})}
    out = io.StringIO()
    display = RunDisplay(Console(file=out, force_terminal=False), {}, program.keys, answer_order(program))
    shown_before_the_end = []
    with display:
        for event in events:
            display.handle(event)
            if event.type == "slot_completed":
                shown_before_the_end.append(out.getvalue())
    assert shown_before_the_end == ["a: yes\n", "a: yes\nb: yes\n"]


# -- errors say what failed: the class, the model's name and where it runs, the hint --------


def test_a_runtime_error_shows_its_class_model_and_hint(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: "many"))  # never a whole number
    template = write(tmp_path / "t.sd", "How many? [[int:n]]\n")
    result = sd("run", template)
    assert result.exit_code == 1
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith("error: BadModelOutput: slot 'n': model scripted gave no usable answer in 3 tries (last problem: ")
    assert "Hint: make the question clearer" in line


def test_a_served_model_is_named_by_its_name_and_endpoint() -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from struckdown.models import model_display

    local = OpenAIChatModel("qwen3:8b", provider=OpenAIProvider(base_url="http://127.0.0.1:8080/v1", api_key="x"))
    assert model_display(local) == "'qwen3:8b' at http://127.0.0.1:8080/v1"
    hosted = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(api_key="x"))
    assert model_display(hosted) == "openai:gpt-4o-mini"
