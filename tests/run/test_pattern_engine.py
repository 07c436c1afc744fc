"""`pattern=` runs on a linear-time engine (issue 24 item 7): an answer cannot make a
pattern backtrack. A pattern that needs look-around or backreferences (which that engine
lacks) still works, on Python's `re`."""

from __future__ import annotations

import pytest

import struckdown as sd
from scripted import Script
from struckdown.types.spec import is_linear, pattern_matcher


def test_a_backtracking_pattern_rejects_a_hostile_answer_in_linear_time() -> None:
    # Python's re needs about 2**40 steps for this (hours); the linear engine a few dozen
    assert pattern_matcher(r"^(a+)+$")("a" * 40 + "!") is False
    assert pattern_matcher(r"^(a+)+$")("a" * 10_000) is True
    answers = iter(["a" * 40 + "!", "aaa"])
    script = Script(lambda call: next(answers))
    result = sd.complete('Say [[x|pattern="^(a+)+$"]]', model=script.model())
    assert result["x"] == "aaa"
    assert "String should match pattern '^(a+)+$'" in script.calls[1].turns[-1][1]


def test_search_semantics_as_in_json_schema() -> None:
    assert pattern_matcher(r"\d{3}")("ab123c") is True
    assert pattern_matcher(r"^\d{3}$")("ab123c") is False


@pytest.mark.parametrize("pattern", ["^(?=.*\\d)", "(?<=a)b", "(a)\\1"])
def test_look_around_and_backreferences_fall_back_to_python_re(pattern: str) -> None:
    assert not is_linear(pattern)
    assert is_linear("^(a+)+$")
    assert pattern_matcher("^(?=.*\\d)")("ab1") is True and pattern_matcher("^(?=.*\\d)")("ab") is False
    sd.parse(f'[[x|pattern="{pattern}"]] [[extract*:y|pattern="{pattern}"]]')  # both build
