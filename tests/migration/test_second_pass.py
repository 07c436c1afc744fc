"""Issue 32, items 1-5: 0.x calling code runs unchanged (results, names, events, None in
text, action values as turns, custom actions the 0.x way)."""

from __future__ import annotations

import asyncio
import json
import runpy
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelResponse, TextPart, ThinkingPart
from pydantic_ai.models.function import FunctionModel

import struckdown as sd
from cli_support import plain_environment  # noqa: F401
from cli_support import sd as cli
from scripted import Script
from struckdown.environment import default_environment

SCRIPTS = Path(__file__).parent / "scripts_0x"


@pytest.fixture
def fresh_actions() -> Iterator[list[str]]:
    """Names the test registers on the default Environment are removed afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        default_environment().actions.unregister(name)


# -- the whole 0.x script ----------------------------------------------------------------------


def test_a_0x_script_runs_unchanged(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                    fresh_actions: list[str]) -> None:
    for var in ("STRUCKDOWN_MODEL", "LLM_API_BASE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DEFAULT_LLM", "model_0x:model")
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import model_0x

    model_0x.SCRIPT.calls.clear()
    fresh_actions += ["shout", "lookup"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runpy.run_path(str(SCRIPTS / "script_0x.py"), run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert out[:7] == [
        "outputs ANN!ANN! '' nothing None",
        "usage 0.0 True True",
        "slot Hi Ann True Greet them: True",
        "schema ['happy', 'sad']",
        "thinking None {}",
        out[5],  # the token counts of FunctionModel's estimate
        "stripped ()",
    ]
    assert out[5].startswith("Total cost: unknown (") and out[5].endswith(" out)")
    assert out[7:] == [
        "event slot a answer 4",
        "event slot b answer 5",
        "event checkpoint 0 None",
        "event checkpoint 1 Checkpoint 1",
        "event complete False complete",
        "event error True the provider is down error",
        "done struckdown",
    ]
    messages = [str(w.message) for w in caught if "action @" in str(w.message)]
    assert messages == [
        "action @shout failed (RuntimeError: no shouting); using ''",
        "action @lookup failed (KeyError: 'absent'); using 'nothing'",
    ]
    # the action values joined the conversation as user turns (the empty one did not);
    # the null age is empty in later text
    first = model_0x.SCRIPT.calls[0]
    assert first.turns == [("user", "Hello ann."), ("user", "ANN!ANN!"), ("user", "nothing"), ("user", "Greet them:")]
    mood = model_0x.SCRIPT.calls[2]
    assert mood.turns[-1] == ("user", 'Age was "". Mood?')


# -- 1. Result and SlotResult ------------------------------------------------------------------


def _thinking_model() -> FunctionModel:
    def answer(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[ThinkingPart("first, read it"), ThinkingPart("then answer"), TextPart("yes")])

    return FunctionModel(answer, model_name="m")


def test_result_and_slot_result_read_as_0x_did() -> None:
    result = sd.complete("Question [[a]]", model=_thinking_model(), prices={"m": {"input": 1, "output": 2}})
    slot = result.results["a"]
    assert str(slot) == "yes" and slot == "yes" and slot != "no"
    assert slot.prompt == "Question"
    assert slot.thinking == "first, read it\n\nthen answer"
    assert result.thinking == {"a": "first, read it\n\nthen answer"}
    assert slot.response_schema == {"type": "string"}
    usage = result.usage
    assert (result.prompt_tokens, result.completion_tokens, result.total_tokens) == (
        usage.input_tokens, usage.output_tokens, usage.total_tokens)
    assert result.total_cost == pytest.approx(usage.input_tokens * 1e-6 + usage.output_tokens * 2e-6)
    assert slot.completion == {
        "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                  "total_tokens": usage.total_tokens},
        "_hidden_params": {"response_cost": usage.cost},
        "_thinking": "first, read it\n\nthen answer",
        "_output": "yes",
        "_cached": False,
    }
    assert result.outputs == {"a": "yes"} and result.outputs.a == "yes"
    stripped = result.strip_debug_data()
    assert stripped.results["a"].messages == () and dict(stripped) == {"a": "yes"} and result.results["a"].messages
    summary = sd.CostSummary.from_results([result, result])
    assert summary.format_summary() == (
        f"Total cost: ${2 * result.total_cost:.4f} ({2 * usage.input_tokens} in / {2 * usage.output_tokens} out)"
    )
    import pickle

    shipped = pickle.loads(pickle.dumps(result))  # as a --workers batch row crosses processes
    assert shipped.results["a"].response_schema is None and shipped.results["a"] == slot and dict(shipped) == {"a": "yes"}
    for name in ("total_cost", "outputs", "prompt_tokens"):
        with pytest.raises(AttributeError):
            setattr(result, name, 1)
    with pytest.raises(AttributeError):
        slot.prompt = "x"  # type: ignore[misc]


def test_unknown_prices_count_zero_and_say_unknown() -> None:
    result = sd.complete("Q [[a]]", model=Script(lambda c: "x").model())
    assert result.usage.cost is None and result.total_cost == 0.0 and result.has_unknown_costs
    usage = result.usage
    assert sd.CostSummary.from_results(result).format_summary() == (
        f"Total cost: unknown ({usage.input_tokens} in / {usage.output_tokens} out)"
    )


# -- 2. names ----------------------------------------------------------------------------------


def test_0x_names_import_from_struckdown() -> None:
    from struckdown import incremental

    for name in ("CheckpointReached", "ProcessingComplete", "ProcessingError", "SlotCompleted",
                 "SlotRetracted", "ThinkingDelta"):
        assert getattr(sd, name) is getattr(incremental, name)
    assert sd.IncrementalEvent is incremental.Event
    assert sd.mark_struckdown_safe("<system>x</system>") == "<system>x</system>"
    assert sd.mark_struckdown_safe(3) == 3 and sd.Safe("t").content == "t"
    assert sd.escape_struckdown_syntax("[[x]]", "v") == ("[[x]]", False)
    assert sd.escape_context_dict({"a": "[[b]]"}) == {"a": "[[b]]"}
    assert sd.LLMConfig(temperature=0.3, thinking="off").settings() == {"temperature": 0.3, "thinking": False}
    with pytest.raises(ValueError, match="less than or equal to 2"):
        sd.LLMConfig(temperature=3)
    parsed = sd.parse_options("MIN=1, Max=9.5, minlength=2, regex='^a', required=yes, happy, colour=red")
    assert parsed == sd.ParsedOptions(required=True, ge=1, le=9.5, min_length=2, pattern="^a",
                                      positionals=["happy"], kwargs={"colour": "red"})
    assert sd.ACTION_LOOKUP["timestamp"] is default_environment().actions.get("timestamp").func
    assert sd.Actions.is_registered("set") and not sd.Actions.is_registered("nosuch")
    assert {"set", "fetch", "evidence"} <= set(sd.Actions.list_registered()) and "set" in sd.ACTION_LOOKUP


def test_events_have_0x_types_and_model_dump() -> None:
    events = list(sd.complete_incremental("A [[a]]\n<checkpoint>Named</checkpoint>\nB [[b]]",
                                          model=Script(lambda c: "x").model(), stream=False))
    kinds = sorted(str(e.type) for e in events if e.type in ("slot_completed", "checkpoint", "complete"))
    assert kinds == ["checkpoint_reached", "checkpoint_reached", "processing_complete", "slot_completed",
                     "slot_completed"]
    assert [e.type == "checkpoint" for e in events if isinstance(e, sd.CheckpointReached)] == [True, True]
    assert [e.type == "complete" for e in events if isinstance(e, sd.ProcessingComplete)] == [True]
    checkpoint = next(e for e in events if isinstance(e, sd.CheckpointReached) and e.segment == 1)
    assert checkpoint.model_dump() == {"type": "checkpoint", "segment": 1, "name": "Named",
                                       "segment_index": 1, "segment_name": "Named"}
    assert json.loads(checkpoint.to_json())["type"] == "checkpoint_reached"
    done = next(e for e in events if isinstance(e, sd.SlotCompleted))
    assert done.model_dump()["slot_key"] == "a" and done.model_dump()["type"] == "slot_completed"


def test_the_incremental_generator_yields_processing_error_then_ends() -> None:
    def fail(messages: Any, info: Any) -> ModelResponse:
        raise RuntimeError("down")

    model = FunctionModel(fail)
    events = list(sd.complete_incremental("First [[a]]", model=model, stream=False))
    last = events[-1]
    assert isinstance(last, sd.ProcessingError) and last.type == "error" and last.error_message == "down"
    assert last.partial_results == {} and last.model_dump()["error_message"] == "down"

    async def collect() -> list[Any]:
        return [e async for e in sd.complete_incremental_async("First [[a]]", model=model)]

    with pytest.warns(UserWarning, match="cannot stream"):  # a streamed run of a FunctionModel without stream_function
        assert asyncio.run(collect())[-1].type == "processing_error"
    with pytest.raises(RuntimeError, match="down"):  # complete() still raises
        sd.complete("First [[a]]", model=model)
    with pytest.raises(sd.TemplateSyntaxError):  # a bad template is raised, before any event
        list(sd.complete_incremental("[[", model=model))


# -- 3. None renders empty ---------------------------------------------------------------------


def test_none_renders_as_empty_text() -> None:
    script = Script(lambda c: None if "Age" in c.last_user else "ok")
    result = sd.complete("Age? [[int:age]] Was it '{{ age }}'? {{ nothing }}[[a]]", {"nothing": None},
                         model=script.model())
    assert result["age"] is None
    assert script.calls[1].last_user == "Was it ''?"


# -- 4. action values as turns -----------------------------------------------------------------


def test_action_values_join_the_conversation_as_user_turns() -> None:
    env = sd.Environment()
    env.register_action("shout", lambda text: text.upper())
    env.register_action("aside", lambda text: f"({text})", role="assistant")
    env.register_action("hidden", lambda text: "secret", role="none")
    script = Script(lambda c: "ok")
    env.complete(
        "Start [[@shout:s|hey]] [[@aside:x|note]] [[@hidden:h|z]] "
        "[[@shout:quiet|psst, role=none]] [[@shout:said|hi, role=assistant]] [[@set:e|\"\"]] Go [[a]]",
        model=script.model(),
    )
    assert script.calls[0].turns == [
        ("user", "Start"), ("user", "HEY"), ("assistant", "(note)"), ("assistant", "HI"), ("user", "Go"),
    ]
    with pytest.raises(sd.TemplateSyntaxError, match="role= is one of user, assistant, none"):
        env.parse("[[@shout:s|hey, role=system]]")


def test_timestamp_and_set_values_are_user_turns_as_in_0_18() -> None:
    script = Script(lambda c: "ok")
    sd.complete("[[@set:g|Hello]] [[@timestamp:t|format=\"%Y\"]] Q [[a]]", model=script.model())
    got = script.calls[0].turns
    assert got[0] == ("user", "Hello") and got[1][0] == "user" and got[1][1].isdigit() and got[2] == ("user", "Q")


# -- 5. custom actions the 0.x way -------------------------------------------------------------


def test_actions_register_decorator_on_error_and_conversion(fresh_actions: list[str]) -> None:
    fresh_actions += ["repeat", "risky", "strict_one"]
    seen: list[Any] = []

    @sd.Actions.register("repeat")
    def repeat(context: dict[str, Any], word: str, times: int = 1, loud: bool = False) -> str:
        seen.append((word, times, loud, context.get("who")))
        return (word.upper() if loud else word) * times

    @sd.Actions.register("risky", on_error="return_default", default="fallback")
    async def risky(context: dict[str, Any]) -> str:
        raise ValueError("nope")

    @sd.Actions.register("strict_one")
    def strict_one(context: dict[str, Any], n: int) -> int:
        return n

    assert sd.ACTION_LOOKUP["repeat"] is repeat and sd.ACTION_LOOKUP["risky"] is risky
    with pytest.warns(UserWarning, match=r"action @risky failed \(ValueError: nope\); using 'fallback'"):
        result = sd.complete('[[@repeat:r|ab, times="3", loud="yes"]] [[@repeat:n|7]] [[@risky:k]]', {"who": "me"})
    assert dict(result) == {"r": "ABABAB", "n": "7", "k": "fallback"}
    assert seen == [("ab", 3, True, "me"), ("7", 1, False, "me")]  # "3" → 3, "yes" → True, 7 → "7"
    with pytest.raises(sd.TemplateRuntimeError, match=r"action @strict_one failed: TypeError: argument n='many'"):
        sd.complete('[[@strict_one:v|"many"]]')


def test_an_actions_folder_beside_the_template_is_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         fresh_actions: list[str]) -> None:
    fresh_actions.append("greet_0x")
    folder = tmp_path / "project"
    (folder / "actions").mkdir(parents=True)
    (folder / "actions" / "greetings.py").write_text(
        "from struckdown import Actions\n\n"
        "@Actions.register('greet_0x')\n"
        "def greet(context, name: str, times: int = 1):\n"
        "    return ('hello ' + name + ' ') * times\n"
    )
    (folder / "t.sd").write_text('[[@greet_0x:g|name="ann", times="2"]]\n')
    monkeypatch.chdir(tmp_path)
    result = cli("run", folder / "t.sd", "-o", "out.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out.json").read_text())["answers"] == {"g": "hello ann hello ann "}
    (folder / "actions" / "broken.py").write_text("raise RuntimeError('bad file')\n")
    broken = cli("run", folder / "t.sd")
    assert broken.exit_code == 2 and "broken.py failed to load: RuntimeError: bad file" in broken.output


def test_evidence_without_a_folder_is_empty_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = Script(lambda c: "ok")
    with pytest.warns(UserWarning, match=r"@evidence: no evidence folder 'evidence' in .*; it returns no passages"):
        result = sd.complete("[[@evidence:found|topic]] Q [[a]]", model=script.model())
    assert result["found"] == "" and script.calls[0].turns == [("user", "Q")]

