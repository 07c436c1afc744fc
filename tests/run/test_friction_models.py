"""Issue 40, items 9 and 12: scripted models in the response cache, and the texts of model errors."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import logging
import pickle
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import struckdown as sd
from scripted import Script

MODEL_FILE = '''
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

GREETING = {greeting!r}

def reply(messages, info):
    return ModelResponse(parts=[TextPart(GREETING + " " + {suffix!r})])

def factory():
    return FunctionModel(reply)
'''


def load_model(path: Path, greeting: str, suffix: str = "there") -> Any:
    """The factory of a module written to `path` now, imported afresh (as a new `sd run
    --model module:factory` process imports the file after an edit)."""
    path.write_text(MODEL_FILE.format(greeting=greeting, suffix=suffix))
    spec = importlib.util.spec_from_file_location("edited_model", path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.factory()


# -- item 9: the cache key of a FunctionModel is its code -----------------------------------------


def test_an_edited_function_model_is_not_served_its_old_answers(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    source = tmp_path / "edited_model.py"
    first = sd.complete("Greet [[g]]", model=load_model(source, "hello"), cache=cache)
    again = sd.complete("Greet [[g]]", model=load_model(source, "hello"), cache=cache)  # the same code: a hit
    edited = sd.complete("Greet [[g]]", model=load_model(source, "hello", suffix="you"), cache=cache)  # code edited
    constant = sd.complete("Greet [[g]]", model=load_model(source, "goodbye"), cache=cache)  # a global it reads
    assert (first["g"], first.results["g"].cached) == ("hello there", False)
    assert (again["g"], again.results["g"].cached) == ("hello there", True)
    assert (edited["g"], edited.results["g"].cached) == ("hello you", False)
    assert (constant["g"], constant.results["g"].cached) == ("goodbye there", False)


def make_model(word: str, record: list[str]) -> FunctionModel:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        record.append(word)
        return ModelResponse(parts=[TextPart(word)])

    return FunctionModel(reply)


def test_closure_values_are_in_the_key_but_a_recording_list_is_not(tmp_path: Path) -> None:
    record: list[str] = []
    cache = str(tmp_path)
    assert sd.complete("Say [[a]]", model=make_model("one", record), cache=cache)["a"] == "one"
    assert sd.complete("Say [[a]]", model=make_model("two", record), cache=cache)["a"] == "two"  # another value
    hit = sd.complete("Say [[a]]", model=make_model("one", record), cache=cache)  # the list has grown: still a hit
    assert (hit["a"], hit.results["a"].cached) == ("one", True)
    assert record == ["one", "two"]


def test_scripts_with_different_answers_do_not_share_cache_entries(tmp_path: Path) -> None:
    yes, no = Script(lambda call: "yes"), Script(lambda call: "no")
    assert sd.complete("Q [[a]]", model=yes.model(), cache=str(tmp_path))["a"] == "yes"
    assert sd.complete("Q [[a]]", model=no.model(), cache=str(tmp_path))["a"] == "no"
    assert (len(yes.calls), len(no.calls)) == (1, 1)


# -- item 9: errors name a model by its model_name= -------------------------------------------------


def test_errors_name_a_function_model_by_its_model_name() -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("many")])

    with pytest.raises(sd.BadModelOutput) as named:
        sd.complete("How many? [[int:n]]", model=FunctionModel(broken, model_name="my-bot"))
    assert str(named.value).startswith("slot 'n': model my-bot gave no usable answer in 3 tries (last problem: ")
    with pytest.raises(sd.BadModelOutput) as unnamed:
        sd.complete("How many? [[int:n]]", model=FunctionModel(broken))
    assert str(unnamed.value).startswith("slot 'n': model function:broken gave no usable answer in 3 tries (last problem: ")


# -- item 12: BadModelOutput keeps whole words and no URLs ------------------------------------------

LONG_ANSWER = (
    "I think the answer is probably somewhere around forty-two, but it depends heavily on what exactly "
    "you are counting and on the context of the question"
)


def test_bad_model_output_quotes_the_answer_in_whole_words_without_pydantic_urls() -> None:
    def wordy(call: Any) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(call.info.output_tools[0].name, {"response": LONG_ANSWER})])

    with pytest.raises(sd.BadModelOutput) as info:
        sd.complete("How many? [[int:n]]", model=Script(wordy).model("wordy"))
    assert str(info.value) == (
        "slot 'n': model wordy gave no usable answer in 3 tries (last problem: Input should "
        "be a valid integer, unable to parse string as an integer (the answer was 'I think the answer is probably "
        "somewhere around forty-two…')). Hint: make the question clearer about the form of the answer, try a stronger "
        "model, or loosen the slot's options"
    )
    assert "http" not in str(info.value) and "[type=" not in str(info.value)
    copy = pickle.loads(pickle.dumps(info.value))
    assert (str(copy), copy.reason) == (str(info.value), info.value.reason)


def test_invalid_json_names_the_problem_and_how_the_answer_began() -> None:
    def text(call: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(LONG_ANSWER)])

    model = FunctionModel(lambda messages, info: text(None), model_name="texty")
    with pytest.raises(sd.BadModelOutput) as info:
        sd.complete("Pick [[pick:c|red, blue]]", model=model)
    assert info.value.reason == (
        "Invalid JSON: expected ident at line 1 column 2 (the answer was 'I think the answer is probably somewhere "
        "around forty-two…')"
    )


# -- item 12: TruncatedError says its cause once ----------------------------------------------------


def cut(parts: list[Any]) -> FunctionModel:
    return FunctionModel(lambda messages, info: ModelResponse(parts=parts, finish_reason="length"), model_name="cutter")


def test_a_truncated_error_says_its_cause_once() -> None:
    hint = "Hint: raise the slot's max_tokens= (or settings={'max_tokens': N}, sd run --max-tokens N), "
    with pytest.raises(sd.TruncatedError) as text:
        sd.complete("Tell [[a|on_truncate=error]]", model=cut([TextPart("Once upon")]))
    assert str(text.value).startswith(
        "model cutter: the answer was cut off at the output token limit: on_truncate=error refuses a cut answer. " + hint
    )
    with pytest.raises(sd.TruncatedError) as typed:
        sd.complete("Items [[items*]]", model=cut([ToolCallPart("final_result", '{"response": ["a"]}')]))
    assert str(typed.value).startswith(
        "model cutter: the answer was cut off at the output token limit: a typed answer cut short cannot be used. " + hint
    )
    with pytest.raises(sd.TruncatedError) as call:
        sd.complete("Go [[a|use_tools=true]]", model=cut([ToolCallPart("look", {"q": "x"})]), tools=[look])
    assert str(call.value).startswith(
        "model cutter: the answer was cut off at the output token limit: look() did not run: a tool call cut short "
        "cannot be used. " + hint
    )
    for error in (text.value, typed.value, call.value):
        assert str(error).count("token limit") == 1


def look(q: str) -> str:
    """Look something up."""
    raise AssertionError("a cut call must not run")


# -- a consumer that stops at the error event leaves no "Task exception was never retrieved" --------


def test_stopping_at_the_error_event_leaves_no_unretrieved_task_exception(caplog: pytest.LogCaptureFixture) -> None:
    script = Script(lambda call: "many")

    async def consume() -> str:
        async for event in sd.complete_incremental_async("How many? [[int:n]]", model=script.model()):
            if event.type == "processing_error":
                return type(event.error).__name__  # as `sd run` does: it raises the error at this event
        return "no error"

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        assert asyncio.run(consume()) == "BadModelOutput"
        gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
