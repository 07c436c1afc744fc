"""Provider prompt caching (SPEC §24): what each request asks the provider to cache, the
prefix it keeps byte-identical, and the cache tokens, cost and saving read back.

The models are pydantic-ai's own Anthropic and OpenAI chat models; their HTTP goes to a mock
transport (tests/support/provider_wire.py) that records each body as the provider gets it."""

from __future__ import annotations

import hashlib

import pytest
from provider_wire import Wire, breakpoints, dumped

import struckdown as sd

TEMPLATE = (
    "<system>You are a careful support assistant. Answer in one line.</system>\n"
    "Customer {{ name }} writes: {{ message }}\n\nSummarise it. [[summary]]\n\n"
    "Now the reply. [[reply]]\n\n"
    "And the tone. [[tone]]\n"
)
ROW_A = {"name": "Ann", "message": "my order is late"}
ROW_B = {"name": "Bob", "message": "refund please"}


def test_anthropic_breakpoints_after_the_system_text_and_at_the_end_of_the_shared_prefix() -> None:
    wire = Wire()
    sd.complete(TEMPLATE, ROW_A, model=wire.anthropic())
    assert [breakpoints(b) for b in wire.bodies] == [
        ["system[0]", "request"],  # later slots resend this request: cached at its end
        ["system[0]", "request"],
        ["system[0]"],  # the last slot of the conversation: nothing after it resends its turn
    ]
    assert wire.bodies[0]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert wire.bodies[0]["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}


def test_anthropic_agent_slot_caches_its_tool_definitions_and_loop() -> None:
    def lookup(order_id: str) -> str:
        """Look up an order."""
        return "shipped"

    wire = Wire()
    sd.complete("<system>Be brief.</system>\nWhere is order 7? [[answer|use_tools=true]]\n", {}, model=wire.anthropic(),
                tools=[lookup])
    (body,) = wire.bodies
    assert [t["name"] for t in body["tools"]] == ["lookup"]
    assert breakpoints(body) == ["tools[0]", "system[0]", "request"]
    assert len(breakpoints(body)) <= 4


def test_the_prefix_is_byte_identical_from_slot_to_slot_and_row_to_row() -> None:
    for make in ("anthropic", "openai"):
        wire = Wire()
        model = getattr(wire, make)()
        sd.complete(TEMPLATE, ROW_A, model=model)
        sd.complete(TEMPLATE, ROW_B, model=model)
        a, b = wire.bodies[:3], wire.bodies[3:]
        for rows in (a, b):  # each later slot's request starts with the whole earlier request
            for earlier, later in zip(rows, rows[1:]):
                assert dumped(later["messages"][: len(earlier["messages"])]) == dumped(earlier["messages"]), make
        fixed = "system" if make == "anthropic" else "messages"
        first = (lambda body: body["system"]) if make == "anthropic" else (lambda body: body["messages"][0])
        assert dumped(first(a[0])) == dumped(first(b[0])), fixed  # the system text: the same bytes for every row
        assert all(dumped(first(x)) == dumped(first(a[0])) for x in a + b)
        # the user's text stays where it was written: the row's values in the first user turn
        user = a[0]["messages"][-1]
        text = user["content"][0]["text"] if make == "anthropic" else user["content"]
        assert text == "Customer Ann writes: my order is late\n\nSummarise it."


def test_openai_prompt_cache_key_is_the_template_and_segment() -> None:
    wire = Wire()
    template = TEMPLATE + "<checkpoint>\nOne word for it. [[word]]\n"
    sd.complete(template, ROW_A, model=wire.openai())
    key = "sd-" + hashlib.sha256(template.encode()).hexdigest()[:16]
    # the segment after the checkpoint reads no answer of the first, so they run side by side
    keys = {b["messages"][-1]["content"]: b["prompt_cache_key"] for b in wire.bodies}
    assert keys == {
        "Customer Ann writes: my order is late\n\nSummarise it.": f"{key}-s0",
        "Now the reply.": f"{key}-s0", "And the tone.": f"{key}-s0", "One word for it.": f"{key}-s1",
    }
    assert all("cache_prompt" not in b for b in wire.bodies)


def test_llama_cpp_gets_cache_prompt_and_no_cache_key() -> None:
    wire = Wire()
    sd.complete(TEMPLATE, ROW_A, model=wire.llama_cpp())
    assert [b.get("cache_prompt") for b in wire.bodies] == [True, True, True]
    assert all("prompt_cache_key" not in b for b in wire.bodies)
    assert wire.urls[0] == "http://127.0.0.1:8765/v1/chat/completions"


def test_prompt_cache_false_asks_for_nothing_and_a_slot_may_decide_for_itself() -> None:
    wire = Wire()
    sd.complete(TEMPLATE, ROW_A, model=wire.anthropic(), prompt_cache=False)
    assert [breakpoints(b) for b in wire.bodies] == [[], [], []]
    wire = Wire()
    template = TEMPLATE.replace("[[reply]]", "[[reply|prompt_cache=false]]")
    sd.complete(template, ROW_A, model=wire.openai())
    key = "sd-" + hashlib.sha256(template.encode()).hexdigest()[:16]
    assert [b.get("prompt_cache_key") for b in wire.bodies] == [f"{key}-s0", None, f"{key}-s0"]
    wire = Wire()
    sd.complete(TEMPLATE.replace("[[tone]]", "[[tone|prompt_cache=true]]"), ROW_A, model=wire.llama_cpp(),
                prompt_cache=False)
    assert [b.get("cache_prompt") for b in wire.bodies] == [None, None, True]


def test_the_callers_settings_win_over_the_planned_ones() -> None:
    wire = Wire()
    sd.complete(TEMPLATE, ROW_A, model=wire.openai(), settings={"openai_prompt_cache_key": "mine"})
    assert {b["prompt_cache_key"] for b in wire.bodies} == {"mine"}
    wire = Wire()
    sd.complete(TEMPLATE, ROW_A, model=wire.llama_cpp(), settings={"extra_body": {"n_probs": 2}})
    assert all(b["cache_prompt"] is True and b["n_probs"] == 2 for b in wire.bodies)
    wire = Wire()
    sd.complete(TEMPLATE, ROW_A, model=wire.anthropic(), settings={"anthropic_cache_instructions": False})
    assert [breakpoints(b) for b in wire.bodies] == [["request"], ["request"], []]


def test_a_bad_prompt_cache_value_is_a_named_error() -> None:
    with pytest.raises(ValueError, match="prompt_cache= must be True or False"):
        sd.complete(TEMPLATE, ROW_A, model=Wire().openai(), prompt_cache="yes")  # type: ignore[arg-type]
    with pytest.raises(sd.TemplateSyntaxError, match="prompt_cache"):
        sd.complete("Hi [[a|prompt_cache=maybe]]", {}, model=Wire().openai())


# -- usage read back ---------------------------------------------------------------------

PRICES = {
    "claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    "gpt-4o": {"input": 2.5, "output": 10.0, "cache_read": 1.25},
    "qwen": {"input": 1.0, "output": 1.0},
}


@pytest.mark.parametrize(
    ("make", "read", "written", "cost", "saved"),
    [
        # Anthropic: 1,000 input = 200 plain + 700 read + 100 written
        ("anthropic", 700, 100, (200 * 3 + 700 * 0.3 + 100 * 3.75 + 2 * 15) / 1e6, (700 * 2.7 - 100 * 0.75) / 1e6),
        # OpenAI: 1,000 prompt tokens of which 700 cached
        ("openai", 700, 0, (300 * 2.5 + 700 * 1.25 + 2 * 10) / 1e6, 700 * 1.25 / 1e6),
        # llama.cpp reports prompt_tokens_details.cached_tokens too; no cache price: no saving
        ("llama_cpp", 700, 0, (1000 + 2) / 1e6, 0.0),
    ],
)
def test_usage_reads_the_cache_tokens_of_each_provider(
    make: str, read: int, written: int, cost: float, saved: float
) -> None:
    wire = Wire(input_tokens=1000, cached=read, written=written if make == "anthropic" else 0)
    result = sd.complete(TEMPLATE, ROW_A, model=getattr(wire, make)(), prices=PRICES)
    for slot in result.results.values():
        usage = slot.usage
        assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (1000, read, written)
        assert usage.cost == pytest.approx(cost)
        assert usage.cache_saved == pytest.approx(saved)
    total = result.usage
    assert (total.requests, total.input_tokens, total.cache_read_tokens, total.cache_write_tokens) == (
        3, 3000, 3 * read, 3 * written
    )
    assert total.cost == pytest.approx(3 * cost)
    assert total.cache_saved == pytest.approx(3 * saved)
    assert total.cache_share == pytest.approx(read / 1000)
    assert total.to_dict()["cache_read_tokens"] == 3 * read
    assert total.to_dict()["cache_write_tokens"] == 3 * written


def test_cost_uses_genai_prices_cache_rates() -> None:
    """No prices= given: genai-prices prices the cached tokens at Anthropic's cache rates."""
    wire = Wire(input_tokens=10_000, cached=9_000, written=0, output_tokens=0)
    result = sd.complete("Hi. [[a]]", {}, model=wire.anthropic())
    usage = result.usage
    assert usage.cost == pytest.approx((1_000 * 3 + 9_000 * 0.3) / 1e6)
    assert usage.cache_saved == pytest.approx(9_000 * (3 - 0.3) / 1e6)


def test_no_cache_tokens_leave_the_cache_fields_empty() -> None:
    result = sd.complete(TEMPLATE, ROW_A, model=Wire().openai(), prices=PRICES)
    usage = result.usage
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.cache_saved) == (0, 0, None)


def test_batch_usage_adds_the_cache_tokens_of_every_row() -> None:
    wire = Wire(input_tokens=1000, cached=800)
    results = sd.complete_batch(TEMPLATE, [ROW_A, ROW_B], model=wire.openai(), prices=PRICES)
    assert [r.usage.cache_read_tokens for r in results] == [2400, 2400]
    total = results[0].usage + results[1].usage
    assert (total.cache_read_tokens, total.input_tokens) == (4800, 6000)
    assert total.cache_saved == pytest.approx(4800 * 1.25 / 1e6)
