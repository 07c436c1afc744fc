"""0.x's template spellings parse to today's forms (SPEC §11), before any model call."""

from __future__ import annotations

from typing import Any

import pytest

import struckdown as sd


def plan(template: str, key: str = "x") -> Any:
    program = sd.parse(template)
    return next(p for s, p in program.plans.items() if s.key == key)


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("[[int:x|ge=1, le=5]]", "[[int:x|min=1, max=5]]"),
        ("[[number:x|GE=0.5, Le=2]]", "[[number:x|min=0.5, max=2]]"),
        ("[[x|minlength=2, maxlength=9]]", "[[x|min_length=2, max_length=9]]"),
        ('[[extract:x|regex="^a+$"]]', '[[extract:x|pattern="^a+$"]]'),
        ("[[x|Temperature=0.2, MAX_TOKENS=9, Seed=3]]", "[[x|temperature=0.2, max_tokens=9, seed=3]]"),
        ("[[x|use_tools=No, MAX_ITER=2]]", "[[x|use_tools=false, max_iter=2]]"),
        ("[[halt:x|when=off]]", "[[halt:x|when=false]]"),
        ("[[halt:x|WHEN=0]]", "[[halt:x|when=false]]"),
        ("[[x|use_tools=ON]]", "[[x|use_tools=true]]"),
        ("[[x|use_tools=1]]", "[[x|use_tools=true]]"),
        ("[[x|thinking=on]]", "[[x|thinking=high]]"),
    ],
)
def test_old_option_spellings_mean_todays(written: str, canonical: str) -> None:
    old, new = plan(written), plan(canonical)
    assert (old.type_options, bool(old.control.get("use_tools")), old.when) == (
        new.type_options, bool(new.control.get("use_tools")), new.when,
    )
    assert {k: v for k, v in old.settings.items() if k != "thinking"} == {
        k: v for k, v in new.settings.items() if k != "thinking"
    }


@pytest.mark.parametrize(
    "slot",
    ["[[x|required]]", "[[extract:x|required]]", "[[int:x|min=0,max=120,required]]", "[[number:x|required, max=3]]",
     "[[date:x|required]]", "[[pick:x|a, b, required]]", "[[bool:x|required]]", "[[json:x|required]]",
     "[[x|required=yes]]", "[[x|Required=On]]", "[[x|required=1]]", "[[!x]]", "[[score:x|lo, hi, required]]"],
)
def test_bare_required_is_the_required_flag_on_every_type(slot: str) -> None:
    p = plan(slot)
    assert p.slot.required is True
    assert "required" not in p.positional


def test_a_quoted_required_is_a_pick_choice() -> None:
    p = plan('[[pick:x|"required", optional]]')
    assert p.slot.required is False and p.positional == ("required", "optional")
    assert sd.complete('[[pick:x|"required", optional]]', model="test")["x"] in ("required", "optional")


def test_an_option_given_twice_under_two_spellings_is_an_error() -> None:
    with pytest.raises(sd.TemplateSyntaxError, match="option 'min' given twice") as info:
        sd.parse("[[int:x|min=1, ge=2]]")
    assert (info.value.line, info.value.column) == (1, 16)
    with pytest.raises(sd.TemplateSyntaxError, match="'required' given twice"):
        sd.parse("[[x|required=true, required]]")


def test_action_keys_are_parameter_names_and_not_folded() -> None:
    seen: list[Any] = []
    sd.register_action("echo_kw", lambda **kw: seen.append(kw) or "ok")
    sd.complete("[[@echo_kw:r|Query=yes, GE=1]]")
    assert seen == [{"Query": "yes", "GE": 1}]


def test_checkpoint_names_may_span_lines() -> None:
    program = sd.parse(
        "A [[a]]\n<checkpoint>\n  Second part\n  of the work\n</checkpoint>\nB [[b]]\n"
        "<obliviate>Third</obliviate>C [[c]]<checkpoint/>D [[d]]"
    )
    assert [s.name for s in program.segments] == [None, "Second part of the work", "Third", None]
    assert [s.keys for s in program.segments] == [("a",), ("b",), ("c",), ("d",)]


def test_an_unclosed_checkpoint_keeps_the_text_after_it() -> None:
    program = sd.parse("<checkpoint>\nTell me a joke [[joke]]\n\n<checkpoint>More [[b]]")
    assert [s.name for s in program.segments] == [None, None, None]
    assert program.segments[1].keys == ("joke",)


def test_slots_without_a_key_are_numbered_by_type() -> None:
    program = sd.parse("Sky? [[bool:]] Grass? [[bool:]] [[pick:|a, b]] [[@timestamp:]]")
    assert program.keys == ("_bool_01", "_bool_02", "_pick_01", "_timestamp_01")
    result = sd.complete("Sky? [[bool:]] Grass? [[bool:]]", model="test")
    assert list(result) == ["_bool_01", "_bool_02"]


def test_keyless_actions_store_under_their_name_and_may_recur() -> None:
    program = sd.parse("[[@noop]] A [[a]] <checkpoint> [[@noop]] [[@timestamp|format=\"%Y\"]] B [[b]]")
    assert program.keys == ("noop", "a", "timestamp", "b")
    result = sd.complete('[[@timestamp|format="%Y"]] [[@noop]]')
    assert result["timestamp"].isdigit() and result["noop"] == ""
    with pytest.raises(sd.TemplateSyntaxError, match="needs a key"):
        sd.parse("[[@set|x]]")  # @set's value needs a name of its own


def test_whitespace_after_the_required_mark() -> None:
    assert plan("[[ ! int : x ]]").slot.required is True


@pytest.mark.parametrize(
    ("slot", "type_name"),
    [("[[default:x]]", "default"), ("[[boolean:x]]", "boolean"), ("[[poem:x]]", "poem"), ("[[decide:x]]", "decide"),
     ("[[decide:x|go, stay]]", "decide"), ("[[date_rule:x]]", "date_rule"), ("[[chunked_conversation:x]]",
                                                                             "chunked_conversation")],
)
def test_the_0x_type_names_are_known(slot: str, type_name: str) -> None:
    assert plan(slot).slot.type_name == type_name


def test_0x_type_words_are_answer_names_but_todays_types_stay_ambiguous() -> None:
    assert sd.parse("Write a poem: [[poem]] [[default]] [[decide]]").keys == ("poem", "default", "decide")
    with pytest.raises(sd.TemplateSyntaxError, match="ambiguous"):
        sd.parse("[[think]]")


def test_decide_takes_no_quantifier_and_is_always_answered() -> None:
    with pytest.raises(sd.TemplateSyntaxError, match="does not take a quantifier"):
        sd.parse("[[decide*:x]]")
    spec = plan("[[decide:x|go, stay]]").spec
    assert spec.answer_schema == {"description": "The decision: one of the given choices", "enum": ["go", "stay"],
                                  "type": "string"}


def test_date_rule_and_chunked_conversation_schemas() -> None:
    rule = plan("[[date_rule:x]]").spec.answer_schema
    fields = rule["$defs"]["DateRule"]["properties"]
    assert list(fields) == ["freq", "dtstart", "count", "until", "interval", "byweekday", "bymonth", "bymonthday",
                            "bysetpos"]
    assert fields["freq"]["enum"] == ["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY"]
    chunks = plan("[[chunked_conversation:x]]").spec.answer_schema
    assert chunks["type"] == "array"
    assert list(chunks["$defs"]["ConversationChunk"]["properties"]) == ["description", "start", "end"]


def test_a_quoted_pattern_keeps_its_backslashes() -> None:
    """0.x's docs write `pattern="\\w{4}\\d+"`: a backslash escapes only a quote or a backslash."""
    assert plan(r'[[extract:x|pattern="\w{4}\d+"]]').type_options == {"pattern": r"\w{4}\d+"}
    assert plan(r'[[x|pattern="\\d{3}-\"q\""]]').type_options == {"pattern": r'\d{3}-"q"'}
    assert plan(r"[[x|pattern='it\'s \s']]").type_options == {"pattern": r"it's \s"}
