"""The 0.x-style templates of templates_0x/ parse and run with a scripted model (SPEC §11)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scripted import Call, Script, auto_answer

import struckdown as sd
from struckdown.actions.search import make_search

HERE = Path(__file__).parent / "templates_0x"
TEMPLATES = sorted(p.name for p in HERE.glob("*.sd"))
CONTEXT: dict[str, Any] = {
    "topic": "autumn",
    "source": "An essay about prejudice.",
    "question": "What do you sell?",
    "page": "<html><body><h1>Shop</h1><p>We sell <b>kettles</b>.</p></body></html>",
    "_history_file": "conversation.txt",
    "include_examples": True,
    "items": [{"name": "kettle", "description": "boils"}],
    "text": "loud",
}


def searched(query: str, n: int) -> list[dict[str, str]]:
    return [{"title": f"About {query}", "url": f"https://example.org/{i}", "snippet": "A result."} for i in range(n)]


def answer(call: Call) -> Any:
    """Valid answers; guards pass (those with `when=false` are judged true, so they do not trip)."""
    if call.schema and "triggered" in json.dumps(call.schema):
        return {"triggered": "products" in call.last_user or "safe" in call.last_user, "reason": "judged by the script"}
    if call.schema and call.schema["properties"]["response"].get("pattern") == "^[A-Z]{3}$":
        return "ABC"
    return auto_answer(call)


@dataclass
class Run:
    program: Any
    result: sd.Result
    script: Script


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    """Each template run once with one Environment (its output types built once): the
    tests below read these runs."""
    environment = sd.Environment()
    environment.register_action("search", make_search(searched), role="user")
    out: dict[str, Run] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(HERE)  # @history and @evidence read files under the working directory
        for name in TEMPLATES:
            path = HERE / name
            program = environment.parse(path.read_text(encoding="utf-8"), template_path=path)
            script = Script(answer)
            out[name] = Run(program, environment.complete(program, CONTEXT, model=script.model()), script)
    return out


def test_the_folder_covers_every_template_kind() -> None:
    assert TEMPLATES == ["actions.sd", "auto_keys.sd", "guards.sd", "options.sd", "structure.sd", "types.sd"]


@pytest.mark.parametrize("name", TEMPLATES)
def test_each_template_parses_and_runs(name: str, runs: dict[str, Run]) -> None:
    run = runs[name]
    assert run.result.halted is None
    assert list(run.result) == [k for k in run.program.keys if k in run.result]  # template order
    assert set(run.program.keys) <= set(run.result), set(run.program.keys) - set(run.result)
    assert len(run.script.calls) == len(run.program.slots())  # one request per slot, none repeated


def test_every_type_gives_its_python_value(runs: dict[str, Run]) -> None:
    result = runs["types.sd"].result
    assert isinstance(result["poem"], str) and isinstance(result["plain"], str)
    assert result["is_late"] is True and result["escalate"] is True and result["route"] == "support"
    assert isinstance(result["deadline"], dt.date) and isinstance(result["length"], dt.timedelta)
    assert result["schedule"]["freq"] == "SECONDLY" and result["schedule"]["dtstart"] == dt.date(2025, 3, 3)
    assert result["phases"] == [{"description": "text", "start": 3, "end": 3}]
    assert len(result["idea"]) == 3 and 2 <= len(result["evaluation"]) <= 4


def test_actions_template_reads_history_evidence_and_search(runs: dict[str, Run]) -> None:
    result, script = runs["actions.sd"].result, runs["actions.sd"].script
    last_turn = "Mostly fine, but I keep skipping breakfast and feel tired at school."
    assert result["history"][-1] == {"role": "user", "content": last_turn}
    assert result["copied"] == result["topic"]  # an unquoted name passes its variable
    assert result["literal"] == "topic" and result["greeting"] == "Hello"
    assert result["page_text"] == "# Shop\n\nWe sell **kettles**."  # links and emphasis kept (issue 32)
    assert result["noop"] == ""
    assert result["results"].startswith(f"1. About {result['searchfor']} — https://example.org/0")
    first = script.calls[0]
    assert first.turns[:2] == [("assistant", "Hi, Laura."), ("user", "Hi.")]  # the history's turns
    final = script.calls[-1]
    assert final.turns[0] == ("assistant", "Hi, Laura.")  # the second segment read the history again


def test_structure_template_names_segments_and_keeps_turns(runs: dict[str, Run]) -> None:
    program, script = runs["structure.sd"].program, runs["structure.sd"].script
    assert [s.name for s in program.segments] == [None, None, "Third section name spread over lines", "Feedback", None]
    riddle = next(c for c in script.calls if c.last_user == "Riddle me this.")
    assert riddle.instructions == "You are a helpful, thoughtful assistant.\n\nYou never tell jokes, but give riddles instead."
    assert [r for r, _ in riddle.turns][-3:] == ["user", "assistant", "user"]
    pirate = script.calls[-1]
    assert pirate.instructions == "You are a pirate and always speak like one."
