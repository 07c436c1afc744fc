"""A calling script written for struckdown 0.18, run unchanged (issue 32, items 1-5):
0.x's result attributes, top-level names, event types, None in text, action values
as user turns and a custom action registered the 0.x way. The model comes from
DEFAULT_LLM, as in 0.x."""

import struckdown as sd
from struckdown import (
    ACTION_LOOKUP,
    Actions,
    CheckpointReached,
    CostSummary,
    IncrementalEvent,
    LLMConfig,
    ParsedOptions,
    ProcessingComplete,
    ProcessingError,
    SlotCompleted,
    SlotRetracted,
    StruckdownResult,
    ThinkingDelta,
    complete,
    complete_incremental,
    escape_context_dict,
    escape_struckdown_syntax,
    mark_struckdown_safe,
    parse_options,
)


@Actions.register("shout", on_error="return_empty")
def shout(context, text: str, times: int = 1):
    if text == "boom":
        raise RuntimeError("no shouting")
    return (text.upper() + "!") * times


@Actions.register("lookup", on_error="return_default", default="nothing")
def lookup(context, key):
    return context["table"][key]


assert Actions.is_registered("shout") and "lookup" in Actions.list_registered()
assert ACTION_LOOKUP["shout"] is shout
assert escape_struckdown_syntax("[[x]]", "v") == ("[[x]]", False)
assert mark_struckdown_safe("ann").content == "ann"
options = parse_options(["MIN=1", "max=5", "required"])
assert isinstance(options, ParsedOptions) and (options.ge, options.le, options.required) == (1, 5, True)
assert LLMConfig(temperature=0.2).temperature == 0.2

TEMPLATE = """Hello {{ name }}.
[[@shout:loud|text=name, times="2"]]
[[@shout:quiet|text="boom"]]
[[@lookup:found|"absent"]]
Greet them: [[greeting]]
Age if known: [[int:age]]
Age was "{{ age }}". Mood? [[pick:mood|happy,sad]]"""

context = escape_context_dict({"name": mark_struckdown_safe("ann"), "table": {}})
result = complete(TEMPLATE, context, extra_kwargs={"temperature": 0})
assert isinstance(result, StruckdownResult)
print("outputs", result.outputs.loud, repr(result.outputs.quiet), result.outputs.found, result.outputs.age)
print("usage", result.total_cost, result.prompt_tokens > 0, result.completion_tokens > 0)
greeting = result.results["greeting"]
print("slot", str(greeting), greeting == "Hi Ann", greeting.prompt, greeting.completion["usage"]["total_tokens"] > 0)
print("schema", result.results["mood"].response_schema["properties"]["response"]["anyOf"][0]["enum"])
print("thinking", greeting.thinking, result.thinking)
print(CostSummary.from_results([result]).format_summary())
print("stripped", result.strip_debug_data().results["greeting"].messages)

for event in complete_incremental("One [[a]]\n<checkpoint>\nTwo [[b]]"):
    if isinstance(event, (ThinkingDelta, SlotRetracted)):
        print("unexpected", event)
    elif event.type == "slot_completed":
        assert isinstance(event, SlotCompleted)
        print("event slot", event.slot_key, event.result.output)
    elif event.type == "checkpoint":
        assert isinstance(event, CheckpointReached)
        print("event checkpoint", event.segment_index, event.segment_name)
    elif event.type == "complete":
        assert isinstance(event, ProcessingComplete)
        print("event complete", event.early_termination, event.model_dump()["type"])

events: list[IncrementalEvent] = list(complete_incremental("Fail [[c]]"))
last = events[-1]
assert isinstance(last, ProcessingError)
print("event error", last.type == "error", last.error_message, last.model_dump()["type"])
print("done", sd.__name__)
