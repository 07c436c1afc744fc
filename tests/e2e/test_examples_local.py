"""Every example template against the real local model, each typed answer checked for
its Python type: a real model (or a struckdown change) that breaks a type shows here."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import struckdown as sd
from struckdown.cli.loading import load_tools
from struckdown.syntax.nodes import If, Slot, walk

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.sd"))

#: The Python type each builtin type's answer has (one item of a quantified slot).
PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "respond": (str,), "think": (str,), "speak": (str,), "extract": (str,), "pick": (str,),
    "bool": (bool,), "int": (int,), "number": (int, float), "score": (int,),
    "date": (dt.date,), "datetime": (dt.datetime,), "time": (dt.time,), "duration": (dt.timedelta,),
    "record": (dict,), "halt": (dict,), "json": (dict, list, str, int, float, bool),
}


def _context(template: Path) -> dict[str, Any]:
    for suffix, load in ((".json", json.loads), (".yaml", yaml.safe_load), (".yml", yaml.safe_load)):
        path = template.with_suffix(suffix)
        if path.exists():
            return dict(load(path.read_text(encoding="utf-8")))
    return {}


def _check(value: Any, type_name: str, listed: bool, required: bool) -> None:
    kinds = PYTHON_TYPES[type_name]
    if listed:
        assert isinstance(value, list), f"a quantified slot answers a list, got {value!r}"
        for item in value:
            _check(item, type_name, False, True)
        return
    if value is None:
        assert not required, "a required slot answered None"
        return
    assert isinstance(value, kinds), f"{type_name} answered {type(value).__name__}: {value!r}"
    if type_name in ("int", "score"):
        assert not isinstance(value, bool)
    if type_name == "date":
        assert not isinstance(value, dt.datetime)


@pytest.mark.parametrize("template", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_runs_on_the_local_model_with_typed_answers(template: Path, model: Any) -> None:
    text = template.read_text(encoding="utf-8")
    program = sd.parse(text, template_path=template)
    tools = load_tools(ROOT / "examples" / "support_tools.py") if "use_tools" in text else []
    result = sd.complete(
        program, _context(template), model=model, tools=tools, on_halt="return", cache=False,
        settings={"temperature": 0.0, "max_tokens": 800},
    )
    answered = result.results
    conditional = {
        inner.key for node in walk(program.template.nodes) if isinstance(node, If)
        for inner in walk(tuple(n for branch in node.branches for n in branch.body)) if isinstance(inner, Slot)
    }
    for slot in program.slots():
        if slot.key not in answered:
            # only a branch not taken or a tripped guard leaves a slot unanswered
            assert slot.key in conditional or result.halted is not None, f"{slot.key} has no answer"
            continue
        _check(answered[slot.key].output, slot.type_name, slot.quantifier is not None, slot.required)
