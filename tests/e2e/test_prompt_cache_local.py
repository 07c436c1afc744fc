"""Issue 34 and issue 40 item 17 against the real local model (scripts/local-llm.sh):
llama.cpp's prompt cache serves the second slot the prefix the first one sent, and the
default answer cap fits what the server's context leaves."""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from typing import Any

import struckdown as sd

# `openai_include_unmapped_response_data` keeps llama.cpp's `timings` (cache_n, prompt_n,
# prompt_ms) in each response's provider_details
SETTINGS = {"temperature": 0, "seed": 7, "openai_include_unmapped_response_data": True}
RULES = "".join(
    f"Rule {i}: keep every answer to a single short word, with no punctuation and no explanation. " for i in range(1, 13)
)


def timings(slot: Any) -> dict[str, Any]:
    details = slot.messages[-1].provider_details or {}
    found = details["unmapped"]["response"]["timings"]
    assert isinstance(found, dict)
    return found


def test_the_second_slot_reads_the_shared_prefix_from_the_servers_prompt_cache(base_url: str) -> None:
    """The first slot's request (a ~270-token system text, its question) is the prefix of the
    second's. A fresh session id at the top keeps earlier runs' cache entries out of the
    first request. "Faster" is measured as llama.cpp's prompt_n, the prompt tokens it had to
    process: its wall time (prompt_ms) follows them, but on 2 shared cores it is not a bound.
    No retries (a retried first request would read its own prefix from the cache) and a long
    timeout: the one server slot is shared with the other e2e tests."""
    from struckdown.models import openai_compatible

    model = openai_compatible("qwen2.5-coder-0.5b-instruct", base_url, None, timeout=600, retries=0)
    template = (
        f"<system>Session {uuid.uuid4().hex[:12]}. {RULES}</system>\n"
        "Name one colour. [[colour|max_tokens=8]]\n\nName one animal. [[animal|max_tokens=8]]\n"
    )
    result = sd.complete(template, model=model, settings=SETTINGS, cache=False, retries=0)
    first, second = result.results["colour"], result.results["animal"]
    assert (first.usage.requests, second.usage.requests) == (1, 1)
    one, two = timings(first), timings(second)
    # Usage reads llama.cpp's prompt_tokens_details.cached_tokens, the same count as its timings
    assert (first.usage.cache_read_tokens, second.usage.cache_read_tokens) == (one["cache_n"], two["cache_n"])
    assert first.usage.cache_read_tokens <= 8  # at most the chat template's opening before the session id
    assert first.usage.input_tokens == one["cache_n"] + one["prompt_n"]
    # the whole first request (and the first answer after it) came from the cache
    assert second.usage.cache_read_tokens >= first.usage.input_tokens
    assert second.usage.input_tokens == two["cache_n"] + two["prompt_n"]
    assert two["prompt_n"] * 4 < one["prompt_n"], (one, two)
    assert result.usage.cache_read_tokens == first.usage.cache_read_tokens + second.usage.cache_read_tokens


def test_the_default_answer_cap_fits_the_servers_context(model: Any, base_url: str) -> None:
    """Issue 40 item 17: on the bundled server 4,096 tokens is the whole context, prompt and
    answer together; the default cap of a free-text answer is at most 1,024 tokens (SPEC §34), or
what the prompt leaves when that is less."""
    from pydantic_ai.models.wrapper import WrapperModel

    from struckdown.run import context_window

    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/props", timeout=10) as response:
        n_ctx = json.load(response)["default_generation_settings"]["n_ctx"]
    context_window.forget()
    assert asyncio.run(context_window.context_window(model)) == n_ctx
    caps: list[int] = []

    class Recorder(WrapperModel):
        async def request(self, messages: Any, model_settings: Any, parameters: Any) -> Any:
            caps.append(model_settings["max_tokens"])
            return await super().request(messages, model_settings, parameters)

        def request_stream(self, messages: Any, model_settings: Any, parameters: Any, run_context: Any = None) -> Any:
            caps.append(model_settings["max_tokens"])
            return super().request_stream(messages, model_settings, parameters, run_context)

    prompt = "Say hello to Ada in one short sentence."
    result = sd.complete(prompt + " [[greeting]]", model=Recorder(model), settings=SETTINGS, cache=False)
    assert result["greeting"].strip()
    estimate = -(-len(prompt) // context_window.CHARS_PER_TOKEN)
    left = n_ctx - estimate - context_window.TEMPLATE_MARGIN  # what the prompt leaves of the context
    assert caps == [min(sd_default_cap(), left)]  # SPEC §34: at most 1,024, or what the prompt leaves


def sd_default_cap() -> int:
    from struckdown.slot_options import default_max_tokens

    return default_max_tokens("text")
