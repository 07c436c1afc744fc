"""Issue 40 item 17: the default cap of an answer never asks for more than the context of a
local OpenAI-compatible server leaves. The server's n_ctx comes from llama.cpp's `GET /props`
(once per model); the requests go to an in-process mock transport."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

import struckdown as sd
from struckdown.run import context_window


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    context_window.forget()
    yield
    context_window.forget()


class Server:
    """A llama.cpp-like server: `props` is what GET /props answers (a dict, an HTTP status,
    or an exception to raise); every chat request body is kept."""

    def __init__(self, props: Any, answer: str = "hello") -> None:
        self.props, self.answer = props, answer
        self.gets: list[str] = []
        self.bodies: list[dict[str, Any]] = []

    def reply(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":
            self.gets.append(str(request.url))
            if isinstance(self.props, BaseException):
                raise self.props
            if isinstance(self.props, int):
                return httpx2.Response(self.props, json={"error": "no"})
            return httpx2.Response(200, json=self.props)
        body = json.loads(request.content)
        self.bodies.append(body)
        return httpx2.Response(200, json={
            "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
        })

    def model(self, base_url: str = "http://127.0.0.1:8765/v1", name: str = "qwen") -> Any:
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.reply))
        return OpenAIChatModel(name, provider=OpenAIProvider(base_url=base_url, api_key="none", http_client=client))

    def caps(self) -> list[int | None]:
        return [b.get("max_completion_tokens", b.get("max_tokens")) for b in self.bodies]


LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 2048, "n_predict": -1}, "total_slots": 1}


def test_the_default_cap_is_what_the_context_leaves_after_the_prompt_and_props_is_asked_once() -> None:
    server = Server(LLAMA_PROPS, answer="x" * 400)
    prompt = "p" * 4000  # 1,000 tokens at 4 characters each
    template = prompt + " [[first]]\n\nAgain. [[second]]"
    sd.complete(template, model=server.model(), cache=False)
    # first: 2048 - 1000 - 64 (the chat template's margin); second: its history holds the first
    # prompt (1,000), the first answer (100) and "Again." (2)
    assert server.caps() == [2048 - 1000 - 64, 2048 - 1000 - 100 - 2 - 64]
    sd.complete("Hi. [[greeting]]", model=server.model(), cache=False)  # another object, the same model
    assert server.caps()[2] == 1024  # free text's default: less than the 2048 - 1 - 64 the context leaves
    assert server.gets == ["http://127.0.0.1:8765/props"]  # once per model, at the server's root


def test_a_cap_the_user_set_is_sent_as_given() -> None:
    server = Server(LLAMA_PROPS)
    sd.complete("Hi. [[a|max_tokens=3000]]", model=server.model(), cache=False)
    sd.complete("Hi. [[b]]", model=server.model(), cache=False, settings={"max_tokens": 4000})
    assert server.caps() == [3000, 4000]


def test_a_typed_answer_gets_the_same_cap() -> None:
    server = Server(LLAMA_PROPS, answer='{"response": ["a", "b"]}')
    sd.complete("Two fruits. [[default{2}:fruits]]", model=server.model(), cache=False)
    assert server.caps() == [2048 - 3 - 64]


@pytest.mark.parametrize(
    "props",
    [404, 500, {"default_generation_settings": {}}, {"default_generation_settings": {"n_ctx": "big"}},
     {"default_generation_settings": {"n_ctx": 0}}, httpx2.ConnectError("refused")],
    ids=["404", "500", "no-n_ctx", "not-a-number", "zero", "connection-error"],
)
def test_a_server_that_does_not_say_keeps_the_default_cap(props: Any) -> None:
    server = Server(props)
    sd.complete("Hi. [[greeting]]", model=server.model(), cache=False)
    sd.complete("Hi. [[greeting]]", model=server.model(), cache=False)
    assert server.caps() == [1024, 1024]
    assert len(server.gets) == 1  # the failure is remembered too: no second /props per slot


def test_a_prompt_that_fills_the_context_is_sent_with_the_default_cap_for_the_server_to_refuse() -> None:
    server = Server(LLAMA_PROPS)
    sd.complete("p" * 8000 + " [[a]]", model=server.model(), cache=False)
    assert server.caps() == [1024]


def test_openais_own_api_and_other_models_are_never_asked() -> None:
    server = Server(LLAMA_PROPS)
    sd.complete("Hi. [[greeting]]", model=server.model("https://api.openai.com/v1", "gpt-4o"), cache=False)
    assert server.gets == [] and server.caps() == [1024]
    assert sd.complete("Hi. [[greeting]]", model="test")["greeting"]


def test_each_base_url_is_asked_for_its_own_context() -> None:
    small, large = Server({"default_generation_settings": {"n_ctx": 512}}), Server(LLAMA_PROPS)
    sd.complete("Hi. [[a]]", model=small.model("http://127.0.0.1:9001/v1"), cache=False)
    sd.complete("Hi. [[a]]", model=large.model("http://127.0.0.1:9002/v1"), cache=False)
    assert (small.caps(), large.caps()) == ([512 - 1 - 64], [1024])  # (free text's default is smaller)
    assert (small.gets, large.gets) == (["http://127.0.0.1:9001/props"], ["http://127.0.0.1:9002/props"])
