"""SPEC §34 (issue 52): a free-text answer that loops is stopped as it streams, asked once more
with a repetition penalty in the provider's own setting, and cut before the loop if it loops
again; an answer that does not repeat is never cut. The detector (run/loop_guard.py) is
tested on its own first, then the slot through `complete`, `complete_incremental` and
`complete_batch` with scripted models that stream until they are stopped."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

import struckdown as sd
from struckdown.run.loop_guard import LoopDetector, find_loop, kept_text

POEM_START = "Here is a poem about the sea.\n"
LINE = "Whispers of the sea,\n"

PARAGRAPH = [
    "The team worked hard to finish the project before the deadline.",
    "Everyone shared ideas in the weekly meetings and the results were great.",
    "In the end the client was happy with the new website and its design.",
]
#: per sentence, the word a copy changes and what it becomes (copy n takes change n % 3)
CHANGES = [
    [("hard", "very hard"), ("finish", "complete"), ("project", "job")],
    [("ideas", "thoughts"), ("weekly", "daily"), ("great", "excellent")],
    [("happy", "pleased"), ("new", "fresh"), ("client", "customer")],
]


def changed_paragraph(copy: int) -> str:
    """The paragraph with one small change per sentence, a different one in each copy."""
    out = []
    for sentence, changes in zip(PARAGRAPH, CHANGES):
        old, new = changes[copy % 3]
        out.append(sentence.replace(old, new, 1) if copy else sentence)
    return " ".join(out) + "\n\n"


PROSE = (
    "Tea came to Europe in the seventeenth century, carried by Dutch and Portuguese traders "
    "who bought it in Chinese ports. At first it was a luxury sold by apothecaries as a medicine. "
    "Within fifty years coffee houses in London served it beside chocolate and sherbet, and the "
    "East India Company began to import it in bulk. Taxes on tea grew so high that smuggling "
    "became a trade of its own along the southern coast. When Parliament cut the duty in 1784, "
    "the smugglers lost their profit almost overnight. Meanwhile botanists tried to grow the plant "
    "in India; Robert Fortune famously took seeds and workers out of China disguised as a merchant. "
    "Plantations in Assam and Darjeeling changed the market within a generation. Black tea, "
    "fermented and sturdy on long voyages, won over green tea in Britain. Milk was added, perhaps "
    "to protect fine porcelain from the heat, perhaps simply because people liked the taste. "
    "Afternoon tea as a meal is credited to the Duchess of Bedford, who grew hungry between lunch "
    "and a late dinner. Today Turkey drinks more tea per person than any other country, followed "
    "by Ireland and the United Kingdom, while China remains the largest producer by far. "
    "Kenya exports more black tea than anyone, mostly for blends sold in supermarkets. "
    "Japanese matcha is ground from shaded leaves, and its ceremony values stillness over flavour. "
    "Moroccan mint tea is poured from a height so that a foam forms in the small glasses.\n"
)
NUMBERED = "".join(
    f"{n}. {item}\n" for n, item in enumerate([
        "Preheat the oven to 180 degrees.", "Butter a round cake tin and line it with paper.",
        "Beat the butter and sugar until pale.", "Add the eggs one at a time, beating well.",
        "Fold in the flour with a metal spoon.", "Stir in the lemon zest and a splash of milk.",
        "Pour the batter into the tin and level the top.", "Bake for forty minutes, until golden.",
        "Let it cool for ten minutes before turning it out.", "Drizzle with lemon icing once cold.",
        "Serve in thin slices with tea.", "Keep leftovers in a tin for up to three days.",
    ], start=1)
)
CODE = "```c\n" + "".join(
    f"int {name}(int a, int b) {{\n    if (a {op} b) {{\n        return a;\n    }}\n    return b;\n}}\n\n"
    for name, op in [("larger", ">"), ("smaller", "<"), ("first_bigger", ">="), ("first_smaller", "<=")]
) + "int main(void) {\n    int x = larger(3, 4);\n    {\n        {\n            x += 1;\n        }\n    }\n    return x;\n}\n```\n"
LONG_ANSWERS = {"prose": PROSE * 1, "numbered list": NUMBERED, "code": CODE, "all three": PROSE + NUMBERED + CODE}


# -- the detector on its own ------------------------------------------------------------
def feed_in_pieces(text: str, size: int = 3) -> tuple[Any, int]:
    """(the loop found, the offset of the text read when it was found)."""
    detector = LoopDetector()
    for at in range(0, len(text), size):
        loop = detector.feed(text[at : at + size])
        if loop is not None:
            return loop, at + size
    return detector.finish(), len(text)


def test_the_same_line_running_is_a_loop_found_early_and_the_text_before_keeps_one_copy() -> None:
    text = POEM_START + LINE * 300
    loop, read = feed_in_pieces(text)
    assert loop is not None and loop.kind == "exact" and loop.unit == LINE
    assert kept_text(text, loop) == POEM_START + LINE.strip()
    assert (read - loop.start) / 4 <= 64  # well within 256 tokens of the loop's start


def test_an_ngram_running_without_line_breaks_is_a_loop() -> None:
    text = "The sea is calm tonight. " + "Whispers of the sea, " * 300
    loop, read = feed_in_pieces(text, 5)
    assert loop is not None and kept_text(text, loop) == "The sea is calm tonight. Whispers of the sea,"
    assert (read - loop.start) / 4 <= 64


def test_a_paragraph_repeated_with_small_changes_is_a_loop() -> None:
    text = "Summary of the workflow:\n\n" + "".join(changed_paragraph(copy) for copy in range(10))
    assert changed_paragraph(1) != changed_paragraph(0) and changed_paragraph(2) != changed_paragraph(1)
    loop, read = feed_in_pieces(text)
    assert loop is not None and loop.kind == "near"
    assert kept_text(text, loop) == ("Summary of the workflow:\n\n" + changed_paragraph(0)).strip()
    assert (read - loop.start) / 4 <= 128


@pytest.mark.parametrize("kind", sorted(LONG_ANSWERS))
def test_long_answers_that_do_not_repeat_are_no_loop(kind: str) -> None:
    assert find_loop(LONG_ANSWERS[kind]) is None
    assert feed_in_pieces(LONG_ANSWERS[kind], 1)[0] is None


def test_a_short_refrain_and_code_braces_are_no_loop() -> None:
    assert find_loop("Let it be,\nlet it be,\nlet it be,\nlet it be.\nWhisper words of wisdom.\n") is None
    assert find_loop("    }\n  }\n}\n" * 12 + "done\n") is None


# -- the slot: scripted models that loop until they are stopped ---------------------------
class Looper:
    """A streamed model: each request streams `answers[i]` (the last one for later requests),
    a list of pieces; a piece list that ends with `LINE`/a paragraph goes on forever (it fails
    the test if nothing stops it after 5,000 pieces). `after_loop` counts the characters streamed
    from the point where the answer started to repeat."""

    def __init__(self, *answers: tuple[str, str | None]) -> None:
        self.answers = answers  # (the text before the loop, the piece that repeats or None)
        self.settings: list[dict[str, Any]] = []
        self.streamed: list[int] = []  # characters streamed past the loop's start, per request

    def model(self, streams: bool = True) -> FunctionModel:
        return FunctionModel(self._whole, stream_function=self._stream if streams else None, model_name="looper")

    def _answer(self, info: AgentInfo) -> tuple[str, str | None]:
        self.settings.append(dict(info.model_settings or {}))
        return self.answers[min(len(self.settings), len(self.answers)) - 1]

    async def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        before, repeat = self._answer(info)
        self.streamed.append(0)
        yield before
        if repeat is None:
            return
        yield repeat(0) if callable(repeat) else repeat  # the first copy belongs to the answer
        for n in range(1, 5000):
            piece = repeat(n) if callable(repeat) else repeat
            self.streamed[-1] += len(piece)
            yield piece
        raise AssertionError("the loop was never stopped")

    def _whole(self, messages: list[ModelMessage], info: AgentInfo) -> Any:
        from pydantic_ai.messages import ModelResponse, TextPart

        before, repeat = self._answer(info)
        return ModelResponse(parts=[TextPart(before + (repeat or "") * 200)])  # (a line, not a function)


def run_warned(*args: Any, **kwargs: Any) -> tuple[sd.Result, list[str]]:
    """`complete()`: whole answers, checked when they arrive."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = sd.complete(*args, **kwargs)
    return result, [str(w.message) for w in caught]


def stream_warned(*args: Any, **kwargs: Any) -> tuple[sd.Result, list[str]]:
    """`complete_incremental()`: streamed answers, watched as they stream."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = list(sd.complete_incremental(*args, **kwargs))
    assert events[-1].type == "processing_complete", events[-1]
    return events[-1].result, [str(w.message) for w in caught]


NOTICE = ("slot 'poem': the answer looped (repeated: 'Whispers of the sea,') and again when asked once more "
          "with a repetition penalty; it keeps the text before the loop (finish='loop')")


def test_a_line_repeated_forever_is_stopped_asked_again_with_a_penalty_and_cut_before_the_loop() -> None:
    model = Looper((POEM_START, LINE))
    result, notices = stream_warned("Write a poem about the sea. [[poem]]", model=model.model())
    slot = result.results["poem"]
    assert slot.output == POEM_START + LINE.strip() and slot.finish == "loop" and not slot.truncated
    assert notices == [NOTICE]
    assert len(model.settings) == 2  # one re-ask, no more
    assert "frequency_penalty" not in model.settings[0] and model.settings[1]["frequency_penalty"] == 0.5
    assert {k: v for k, v in model.settings[1].items() if k != "frequency_penalty"} == model.settings[0]
    assert len(model.streamed) == 2 and all(chars / 4 <= 256 for chars in model.streamed)  # within 256 tokens
    assert slot.usage.requests == 2 and result.usage.requests == 2


def test_complete_checks_the_whole_answer_when_it_arrives() -> None:
    model = Looper((POEM_START, LINE))
    result, notices = run_warned("Write a poem about the sea. [[poem]]", model=model.model())
    assert result["poem"] == POEM_START + LINE.strip() and result.results["poem"].finish == "loop"
    assert notices == [NOTICE] and model.streamed == []  # nothing streamed: the answers came whole
    assert "frequency_penalty" not in model.settings[0] and model.settings[1]["frequency_penalty"] == 0.5


def test_a_reask_that_does_not_loop_is_the_answer() -> None:
    model = Looper((POEM_START, LINE), ("A calm sea at dawn, gulls above the harbour.\n", None))
    result, notices = run_warned("Write a poem about the sea. [[poem]]", model=model.model())
    assert result["poem"] == "A calm sea at dawn, gulls above the harbour.\n" and result.results["poem"].finish == "stop"
    assert notices == [] and len(model.settings) == 2 and model.settings[1]["frequency_penalty"] == 0.5


def test_streamed_events_retract_the_looping_text_and_show_what_the_answer_keeps() -> None:
    model = Looper((POEM_START, LINE))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        events = list(sd.complete_incremental("Write a poem about the sea. [[poem]]", model=model.model()))
    kinds = [(e.type, getattr(e, "reason", None)) for e in events if e.type in ("slot_retracted", "slot_completed")]
    assert kinds == [("slot_retracted", "loop"), ("slot_retracted", "loop"), ("slot_completed", None)]
    last_retract = max(i for i, e in enumerate(events) if e.type == "slot_retracted")
    shown = "".join(e.delta for e in events[last_retract:] if e.type == "token_delta")
    assert shown == POEM_START + LINE.strip() == events[-1].result["poem"]
    assert events[-1].result.results["poem"].finish == "loop"


def test_a_paragraph_repeated_with_small_changes_is_caught_on_the_slot() -> None:
    model = Looper(("Summary of the workflow:\n\n", changed_paragraph))  # type: ignore[arg-type]
    result, notices = stream_warned("Summarise the workflow. [[summary]]", model=model.model())
    slot = result.results["summary"]
    assert slot.finish == "loop" and slot.output == ("Summary of the workflow:\n\n" + changed_paragraph(0)).strip()
    assert len(notices) == 1 and "repeated with small changes" in notices[0]
    assert len(model.streamed) == 2 and all(chars / 4 <= 256 for chars in model.streamed)


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("kind", sorted(LONG_ANSWERS))
def test_a_long_answer_that_does_not_repeat_is_never_cut(kind: str, streamed: bool) -> None:
    model = Looper((LONG_ANSWERS[kind], None))
    result, notices = (stream_warned if streamed else run_warned)("Write. [[text]]", model=model.model())
    assert result["text"] == LONG_ANSWERS[kind] and result.results["text"].finish == "stop"
    assert notices == [] and len(model.settings) == 1


def test_batch_rows_are_guarded_too() -> None:
    model = Looper((POEM_START, LINE))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = sd.complete_batch("Write a poem about {{ topic }}. [[poem]]", [{"topic": "the sea"}], model=model.model())
    assert rows[0]["poem"] == POEM_START + LINE.strip() and rows[0].results["poem"].finish == "loop"
    assert model.settings[1]["frequency_penalty"] == 0.5


def test_a_model_that_cannot_stream_is_checked_when_its_answer_arrives() -> None:
    model = Looper((POEM_START, LINE))
    result, notices = stream_warned("Write a poem about the sea. [[poem]]", model=model.model(streams=False))
    assert result["poem"] == POEM_START + LINE.strip() and result.results["poem"].finish == "loop"
    assert NOTICE in notices and model.settings[1]["frequency_penalty"] == 0.5 and model.streamed == []


@pytest.mark.parametrize("where", ["slot", "run"])
def test_loop_guard_false_keeps_the_whole_answer(where: str) -> None:
    model = Looper((POEM_START, LINE))
    template = "Write a poem about the sea. [[poem|loop_guard=false]]" if where == "slot" else "Write a poem. [[poem]]"
    options = {"loop_guard": False} if where == "run" else {}
    result, notices = run_warned(template, model=model.model(streams=False), **options)
    assert result["poem"] == POEM_START + LINE * 200 and result.results["poem"].finish == "stop"
    assert notices == [] and len(model.settings) == 1


def test_the_slot_option_wins_over_the_run_option() -> None:
    model = Looper((POEM_START, LINE))
    result, _ = stream_warned("Poem. [[poem|loop_guard=true]]", model=model.model(), loop_guard=False)
    assert result.results["poem"].finish == "loop"


def test_a_bad_loop_guard_value_is_refused_before_any_model_call() -> None:
    model = Looper((POEM_START, LINE))
    with pytest.raises(sd.TemplateSyntaxError, match="loop_guard"):
        sd.complete("Poem. [[poem|loop_guard=maybe]]", model=model.model())
    with pytest.raises(ValueError, match="loop_guard= must be True or False"):
        sd.complete("Poem. [[poem]]", model=model.model(), loop_guard="no")  # type: ignore[arg-type]
    assert model.settings == []


def test_an_agent_slot_is_cut_at_once_without_running_its_tools_again() -> None:
    ran: list[str] = []

    def lookup(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        return "sunny"

    settings: list[dict[str, Any]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        settings.append(dict(info.model_settings or {}))
        if len(settings) == 1:
            yield {0: DeltaToolCall(name="lookup", json_args='{"city": "Paris"}')}
            return
        yield "It is sunny.\n"
        for _ in range(5000):
            yield "Sunny in Paris today,\n"

    model = FunctionModel(stream_function=stream, model_name="agent")
    result, notices = stream_warned("Weather? [[w|use_tools=true]]", model=model, tools=[lookup])
    assert result["w"] == "It is sunny.\nSunny in Paris today," and result.results["w"].finish == "loop"
    assert ran == ["Paris"] and len(settings) == 2
    assert notices == ["slot 'w': the answer looped (repeated: 'Sunny in Paris today,'); "
                       "it keeps the text before the loop (finish='loop')"]


# -- the penalty in each provider's own setting, on the wire ------------------------------
class LoopingServer:
    """An OpenAI-compatible server (in-process transport) whose answer (streamed or whole)
    repeats one line 400 times; every request body is kept."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def reply(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":  # llama.cpp's /props: no context size to learn here
            return httpx2.Response(404)
        body = json.loads(request.content)
        self.bodies.append(body)
        pieces = [POEM_START] + [LINE] * 400
        if not body.get("stream"):
            return httpx2.Response(200, json={
                "id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(pieces)},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2400, "total_tokens": 2410},
            })
        head = {"id": "c", "created": 0, "model": body["model"], "object": "chat.completion.chunk"}
        events = [{**head, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
        events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx2.Response(200, content=data.encode(), headers={"content-type": "text/event-stream"})

    def model(self, base_url: str) -> Any:
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.reply))
        return OpenAIChatModel("m", provider=OpenAIProvider(base_url=base_url, api_key="k", http_client=client))


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_llama_cpp_is_asked_again_with_its_own_repeat_penalty_and_dry(streamed: bool) -> None:
    server = LoopingServer()
    run = stream_warned if streamed else run_warned
    result, notices = run("Write a poem. [[poem]]", model=server.model("http://127.0.0.1:8765/v1"), cache=False)
    assert result.results["poem"].finish == "loop" and len(server.bodies) == 2
    first, second = server.bodies
    assert bool(first.get("stream")) is streamed
    assert not {"repeat_penalty", "dry_multiplier", "frequency_penalty"} & set(first)
    assert (second["repeat_penalty"], second["repeat_last_n"], second["dry_multiplier"]) == (1.15, 256, 0.8)
    assert "frequency_penalty" not in second


def test_openai_is_asked_again_with_frequency_penalty() -> None:
    server = LoopingServer()
    run_warned("Write a poem. [[poem]]", model=server.model("https://api.openai.com/v1"), cache=False)
    assert "frequency_penalty" not in server.bodies[0] and server.bodies[1]["frequency_penalty"] == 0.5
    assert "repeat_penalty" not in server.bodies[1]
