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
        "undefined variable 'nme' (line 1): not in the context and not answered before",
        "undefined variable 'vip' (line 2): not in the context and not answered before",
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "struckdown"] == [str(w.message) for w in caught]
    assert result["greeting"] == "hi"
    assert script.calls[0].last_user == "Hello"  # an undefined name renders as nothing, as in Jinja


def test_strict_undefined_raises_before_any_request() -> None:
    script = Script(lambda call: "hi")
    with pytest.raises(sd_api.TemplateRuntimeError) as info:
        sd_api.complete("Hi [[a]]\nHello {{ nme }} [[b]]", {"name": "Ann"}, model=script.model(), strict_undefined=True)
    assert str(info.value) == (
        "undefined variable 'nme' (line 2): not in the context and not answered before (strict_undefined=True)"
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
        f"warning: undefined variable 'nme' (line 1 of {template}): not in the context and not answered before",
        f"warning: undefined variable 'place' (line 2 of {template}): not in the context and not answered before",
    ]
    strict = sd("run", template, "-c", "name=Ann", "--strict")
    assert strict.exit_code == 2
    assert f"undefined variable 'nme' (line 1 of {template})" in strict.stderr and "Traceback" not in strict.stderr
