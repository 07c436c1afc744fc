"""SPEC §10: an Environment owns types, actions, the sandbox, the caches and the run
defaults; two environments in one process share none of it."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai.usage import UsageLimits

import struckdown as sd
from scripted import Script, Tools


class Address(BaseModel):
    street: str
    city: str


def test_a_type_registered_on_one_environment_is_unknown_on_another() -> None:
    one, two = sd.Environment(), sd.Environment()
    one.register_type("address", Address)
    assert one.parse("Where? [[address:home]]").plans
    with pytest.raises(sd.TemplateSyntaxError, match="unknown type 'address'") as info:
        two.parse("Where? [[address:home]]")
    assert (info.value.line, info.value.column) == (1, 10)
    with pytest.raises(sd.TemplateSyntaxError, match="unknown type 'address'"):
        sd.parse("Where? [[address:home]]")  # the default environment is another one again


def test_a_typed_answer_comes_back_as_the_registered_model() -> None:
    env = sd.Environment()
    env.register_type("address", Address)
    script = Script(lambda call: {"street": "1 Main St", "city": "Leeds"})
    result = env.complete("Where? [[!address:home]]", model=script.model())
    assert result["home"] == Address(street="1 Main St", city="Leeds")


def test_an_action_registered_on_one_environment_is_unknown_on_another() -> None:
    one, two = sd.Environment(), sd.Environment()
    one.register_action("shout", lambda text: text.upper())
    result = one.complete('[[@shout:loud|"hey"]]')
    assert result["loud"] == "HEY"
    with pytest.raises(sd.TemplateSyntaxError, match="unknown action @shout"):
        two.parse('[[@shout:loud|"hey"]]')


def test_an_action_with_a_role_joins_the_conversation_as_that_turn() -> None:
    env = sd.Environment()
    env.register_action("recall", lambda: "we spoke about kettles", role="assistant")
    script = Script(lambda call: "ok")
    env.complete("Hello [[@recall:memory]] And now? [[reply]]", model=script.model())
    assert script.calls[0].turns == [("user", "Hello"), ("assistant", "we spoke about kettles"), ("user", "And now?")]


def test_register_action_refuses_an_unknown_role() -> None:
    with pytest.raises(ValueError, match="role must be"):
        sd.Environment().register_action("x", lambda: 1, role="system")  # type: ignore[arg-type]


def test_caches_are_per_environment() -> None:
    one, two = sd.Environment(), sd.Environment()
    text = "Q [[a]] then [[int:n]]"
    assert one.parse(text) is one.parse(text)  # parse once, run many
    assert one.parse(text) is not two.parse(text)
    assert one.renderer is not two.renderer and one.renderer.sandbox is not two.renderer.sandbox
    spec_one = one.parse(text).plans[one.parse(text).slots()[1]].spec
    spec_two = two.parse(text).plans[two.parse(text).slots()[1]].spec
    assert spec_one is not None and spec_two is not None and spec_one is not spec_two
    script = Script(lambda call: "7" if call.schema else "x")
    one.complete(text, model=script.model())
    two.complete(text, model=script.model())
    assert one.engine_caches() is not two.engine_caches()


def test_registering_a_type_drops_programs_planned_before() -> None:
    env = sd.Environment()
    env.register_type("place", Address)
    before = env.parse("[[place:p]]")
    env.register_type("place", lambda options, quantifier, required: str)
    after = env.parse("[[place:p]]")
    assert before is not after
    assert after.plans[after.slots()[0]].spec is not before.plans[before.slots()[0]].spec


def test_defaults_apply_and_a_call_keyword_overrides_them_for_that_call_only() -> None:
    default, other = Script(lambda call: "from default"), Script(lambda call: "from call")
    env = sd.Environment(model=default.model())
    assert env.complete("Q [[a]]")["a"] == "from default"
    assert env.complete("Q [[a]]", model=other.model())["a"] == "from call"
    assert env.complete("Q [[a]]")["a"] == "from default"
    assert (len(default.calls), len(other.calls)) == (2, 1)


def test_environment_tools_and_limits_are_defaults_too() -> None:
    def lookup(q: str) -> str:
        """Look something up."""
        return "found"

    script = Script(lambda call: Tools([("lookup", {"q": "a"})]) if call.tool_names else "done")
    env = sd.Environment(tools=[lookup], limits=UsageLimits(request_limit=3, tool_calls_limit=3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = env.complete("Go [[r|use_tools=true, max_iter=9]]", model=script.model())
    assert result["r"] == "done"
    assert [str(w.message) for w in caught] == [
        "template asked for max_iter=9 but the caller's ceiling is 3; using 3"
    ]
    assert [c.tool_names for c in script.calls] == [["lookup"], ["lookup"], []]
    plan = env.parse("Go [[r|use_tools=true, max_iter=9]]").plans
    (slot_plan,) = plan.values()
    assert (slot_plan.limits.request_limit, slot_plan.limits.tool_calls_limit) == (3, 3)


def test_a_program_runs_only_with_the_environment_that_parsed_it() -> None:
    one = sd.Environment()
    program = one.parse("Q [[a]]")
    assert program.environment is one
    script = Script(lambda call: "x")
    with pytest.raises(ValueError, match="parsed by another Environment"):
        sd.complete(program, model=script.model())
    with pytest.raises(ValueError, match="parsed by another Environment"):
        sd.Environment().complete(program, model=script.model())
    assert script.calls == []  # refused before any model call
    assert one.complete(program, model=script.model())["a"] == "x"


def test_module_functions_are_the_default_environments() -> None:
    env = sd.default_environment()
    assert env is sd.default_environment()
    assert sd.parse("Q [[a]]") is env.parse("Q [[a]]")
    assert sd.parse("Q [[a]]").environment is env


def test_the_plan_knows_waits_guards_and_whether_a_model_is_needed() -> None:
    program = sd.Environment().parse(
        "Is it rude? [[halt:rude]] Say hi [[a]]<checkpoint>Use {{ a }} [[b]]<checkpoint>[[@set:c|1]]"
    )
    assert [s.guards for s in program.segments] == [("rude",), (), ()]
    assert [s.waits_for for s in program.segments] == [(), ("a",), ()]
    assert program.needs_model and program.guards == ("rude",)
    assert not sd.Environment().parse("[[@set:c|1]] just text").needs_model


def test_a_template_without_slots_runs_without_any_model() -> None:
    result: Any = sd.Environment().complete("[[@set:c|1]] just text")
    assert dict(result) == {"c": 1}
