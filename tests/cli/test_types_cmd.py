"""`sd types T.sd --jsonschema | --typescript` (SPEC §36): the input and output types a
client of `sd serve --api` writes against."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import sd

TEMPLATE = (
    "Customer {{ customer }} wrote: {{ message }}\n"
    "Is it a complaint? [[bool:complaint]]\n"
    "How many items? [[int:count]]\n"
    "Reply kindly. [[reply]]\n"
    "Which? [[pick:tag|refund,repair]]\n"
    "Stop? [[halt:stop]]\n"
)


def _template(tmp_path: Path) -> Path:
    path = tmp_path / "reply-to.sd"
    path.write_text(TEMPLATE)
    return path


def test_jsonschema_gives_the_inputs_read_and_each_answer_type(tmp_path: Path) -> None:
    result = sd("types", _template(tmp_path), "--jsonschema")
    assert result.exit_code == 0, result.output
    both = json.loads(result.output)
    assert both["input"] == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "title": "ReplyToInput",
        "properties": {"customer": {"type": "string"}, "message": {"type": "string"}},
        "required": ["customer", "message"],
        "additionalProperties": False,
    }
    output = both["output"]
    assert output["title"] == "ReplyToOutput" and output["required"] == ["answers", "usage", "cost"]
    answers = output["properties"]["answers"]["properties"]
    assert list(answers) == ["complaint", "count", "reply", "tag"]  # the guard gives no answer
    assert answers["reply"]["type"] == "string"
    assert [s.get("type") for s in answers["complaint"]["anyOf"]] == ["boolean", "null"]
    assert [s.get("type") for s in answers["count"]["anyOf"]] == ["integer", "null"]
    assert answers["tag"]["anyOf"][0]["enum"] == ["refund", "repair"]
    assert output["properties"]["usage"]["title"] == "Usage"


def test_typescript_names_the_types_after_the_template(tmp_path: Path) -> None:
    result = sd("types", _template(tmp_path), "--typescript")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "export type ReplyToInput = {\n  customer: string;\n  message: string;\n};" in text
    assert "export type ReplyToOutput = {\n  answers: {\n    complaint?: boolean | null;\n" in text
    assert '    tag?: "refund" | "repair" | null;\n' in text
    assert "  cost: number | null;\n" in text


def test_both_formats_at_once_is_refused(tmp_path: Path) -> None:
    result = sd("types", _template(tmp_path), "--jsonschema", "--typescript")
    assert result.exit_code == 2
    assert "--jsonschema and --typescript cannot be used together" in result.output


def test_a_template_that_does_not_parse_is_a_positioned_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.sd"
    path.write_text("Hi [[nope:x]]\n")
    result = sd("types", path)
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {path}:1:6: unknown type 'nope'\n")


def test_a_types_own_definitions_are_lifted_and_named(tmp_path: Path) -> None:
    path = tmp_path / "rule.sd"
    path.write_text("When? [[date_rule:when]]\n")
    both = json.loads(sd("types", path).output)
    assert both["input"]["properties"] == {}
    output = both["output"]
    assert list(output["$defs"]) == ["when__DateRule"]
    assert '"$ref": "#/$defs/when__DateRule"' in json.dumps(output["properties"]["answers"]["properties"]["when"])
    text = sd("types", path, "--typescript").output
    assert "export type RuleWhenDateRule = {" in text
    assert "    when?: RuleWhenDateRule" in text
