"""Issue 32, items 9 and 11: number keeps integers, 0.x YAML type files, a list of contexts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd
from cli_support import plain_environment  # noqa: F401
from cli_support import sd as cli
from scripted import Script

TYPES_0X = Path(__file__).parent / "templates_0x" / "types_0x"


def test_number_keeps_an_integral_answer_an_int() -> None:
    script = Script(lambda c: {"Count": 3.0, "Mean": 2.5, "Many": [1.0, 1.5], "So": "ok"}[c.last_user.split()[0]])
    result = sd.complete("Count [[number:n]]\n\nMean [[number:m]]\n\nMany [[number*:xs]]\n\nSo {{ n }} and {{ m }} [[a]]",
                         model=script.model())
    assert result["n"] == 3 and type(result["n"]) is int
    assert result["m"] == 2.5 and result["xs"] == [1, 1.5] and type(result["xs"][0]) is int
    assert script.calls[3].last_user == "So 3 and 2.5"


def test_a_list_of_contexts_says_use_complete_batch() -> None:
    for call in (lambda: sd.complete("[[a]]", [{"x": 1}], model="test"),
                 lambda: sd.complete_incremental("[[a]]", [{"x": 1}], model="test"),
                 lambda: sd.complete_incremental_async("[[a]]", [{"x": 1}], model="test")):
        with pytest.raises(TypeError, match=r"takes one context dict; for a list of contexts use complete_batch\(\)"):
            call()
    with pytest.raises(TypeError, match="takes a context dict .* not int"):
        sd.complete("[[a]]", 3, model="test")  # type: ignore[arg-type]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_0x_yaml_types_load_with_extends_and_llm_config() -> None:
    env = sd.Environment()
    assert env.load_type_file(TYPES_0X) == ["item", "product"]  # a folder, in name order
    schema: dict[str, Any] = {}

    def answer(call: Any) -> Any:
        schema.update(call.schema)
        return {"title": "Lamp", "price": 12, "colour": None, "tags": ["home"], "sku": "L-1"}

    script = Script(answer)
    seen: list[Any] = []
    model = script.model()
    original = model.request

    async def spy(messages: Any, settings: Any, params: Any) -> Any:
        seen.append(dict(settings or {}))
        return await original(messages, settings, params)

    model.request = spy  # type: ignore[method-assign]
    result = env.complete("Describe the lamp [[product:p]]", model=model)
    assert result["p"].title == "Lamp" and result["p"].sku == "L-1" and result["p"].price == 12
    answer_schema = schema["properties"]["response"]
    props = answer_schema["properties"] if "properties" in answer_schema else schema["$defs"]["Product"]["properties"]
    assert set(props) == {"sku", "title", "price", "colour", "tags"}
    assert seen[0]["temperature"] == 0.2 and seen[0]["max_tokens"] == 400
    env.complete("Describe [[product:q|temperature=0.9]]", model=model)
    assert seen[1]["temperature"] == 0.9 and seen[1]["max_tokens"] == 400


def test_0x_yaml_type_errors_name_the_file(tmp_path: Path) -> None:
    env = sd.Environment()
    bad = write(tmp_path / "orphan.yaml", """
        name: orphan
        extends: nothing
        fields:
          a: str
    """)
    with pytest.raises(ValueError, match=r"orphan.yaml: type 'orphan': extends 'nothing', which is not a 0.x type"):
        env.load_type_file(bad)
    hot = write(tmp_path / "hot.yaml", """
        name: hot
        llm_config: {temperature: 5}
        fields: {a: str}
    """)
    with pytest.raises(ValueError, match=r"hot.yaml: type 'hot': llm_config: temperature: Input should be less than or equal to 2$"):
        env.load_type_file(hot)
    routed = write(tmp_path / "routed.yaml", "name: routed\nllm_config: {model: gpt-4o}\nfields: {a: str}\n")
    with pytest.raises(ValueError, match=r"model is not a type's setting; name the model on the slot"):
        env.load_type_file(routed)


def test_type_flag_and_types_folder_in_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    template = write(tmp_path / "t.sd", "Describe [[product:p]]\n")
    answer = {"title": "Lamp", "price": 3, "colour": "red", "tags": [], "sku": "S"}
    monkeypatch.setenv("STRUCKDOWN_MODEL", "scripted")
    monkeypatch.setattr("struckdown.models._from_string", lambda *args, **kwargs: Script(lambda c: answer).model())
    unknown = cli("run", template)
    assert unknown.exit_code == 2 and "product" in unknown.output
    ok = cli("run", template, "--type", TYPES_0X, "-o", "out.json")
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "out.json").read_text())["answers"]["p"] == answer
    missing = cli("chat", "Q [[a]]", "--type", tmp_path / "nope.yaml")
    assert missing.exit_code == 2 and "--type" in missing.output and "no such file or folder" in missing.output
