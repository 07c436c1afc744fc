"""Provider errors through a real OpenAIChatModel against a loopback fake server."""

from __future__ import annotations

import asyncio
import json
import pickle
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from http_support import http_serving
from model_support import clear_model_cache, openai_compatible
from pydantic_ai import Agent

import struckdown as sd
from struckdown.errors import StruckdownError
from struckdown.models import model_label
from struckdown.models.errors import (
    AuthenticationError,
    BadRequestError,
    ContentFilterError,
    ContextWindowError,
    ModelConnectionError,
    ModelError,
    RateLimitError,
    map_model_error,
)


def completion(text: str = "hello", finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }


def error(message: str, code: str | None = None, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": code}}


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    hold: threading.Event | None = None  # the server answers only once the test sets it


@dataclass
class FakeServer:
    """Replies from `script` in order; the last reply repeats forever."""

    base_url: str = ""
    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def play(self, *replies: Reply) -> None:
        with self.lock:
            self.script = list(replies)
            self.requests.clear()

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.requests.append(body)
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    fake = FakeServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/v1/chat/completions":
                reply = Reply(404, error(f"no route {self.path}"))
            else:
                reply = fake.next_reply(body)
            if reply.hold is not None:
                reply.hold.wait()  # released by the test (after the client gave up)
            data = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                # The SDK honours retry-after-ms: keeps backoff (and so the tests) short.
                self.send_header("retry-after-ms", "1")
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args: Any) -> None:
            pass

    with http_serving(Handler) as base:
        fake.base_url = f"{base}/v1"
        yield fake


@pytest.fixture(autouse=True)
def fresh_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("STRUCKDOWN_MAX_RETRIES", raising=False)
    monkeypatch.delenv("STRUCKDOWN_TIMEOUT", raising=False)
    clear_model_cache()
    yield
    clear_model_cache()


def run_and_map(model: Any) -> tuple[BaseException, ModelError | None]:
    with pytest.raises(Exception) as info:
        Agent(model).run_sync("hi")
    return info.value, map_model_error(info.value, model_label(model))


def test_valid_completion_passes_through(server: FakeServer) -> None:
    server.play(Reply(200, completion("hello there")))
    result = Agent(openai_compatible("fake", server.base_url, None)).run_sync("hi")
    assert result.output == "hello there"
    assert server.requests[0]["model"] == "fake"
    assert result.usage.input_tokens == 5


def test_one_cached_model_serves_runs_on_successive_event_loops(server: FakeServer) -> None:
    """Sync wrappers start a new loop per call: the provider must renew its HTTP client."""
    server.play(Reply(200, completion("again")))
    model = openai_compatible("fake", server.base_url, None)
    for _ in range(3):
        assert asyncio.run(Agent(model).run("hi")).output == "again"
    assert openai_compatible("fake", server.base_url, None) is model
    assert len(server.requests) == 3


def test_rate_limit_is_retried_then_succeeds(server: FakeServer) -> None:
    server.play(Reply(429, error("slow down", "rate_limit_exceeded", "requests")), Reply(200, completion("ok")))
    result = Agent(openai_compatible("fake", server.base_url, None)).run_sync("hi")
    assert result.output == "ok"
    assert len(server.requests) == 2


def test_rate_limit_after_retries_maps_to_rate_limit_error(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "1")
    server.play(Reply(429, error("slow down", "rate_limit_exceeded", "requests")))
    model = openai_compatible("fake", server.base_url, None)
    original, mapped = run_and_map(model)
    assert len(server.requests) == 2  # one attempt + STRUCKDOWN_MAX_RETRIES=1 retry
    assert isinstance(mapped, RateLimitError) and isinstance(mapped, StruckdownError)
    assert mapped.status == 429
    assert "fake" in mapped.model and "fake" in str(mapped)
    assert "Hint:" in str(mapped) and "STRUCKDOWN_MAX_RETRIES" in str(mapped)
    assert "slow down" in str(mapped)


def test_authentication_error_is_not_retried(server: FakeServer) -> None:
    server.play(Reply(401, error("Incorrect API key provided", "invalid_api_key")))
    _, mapped = run_and_map(openai_compatible("fake", server.base_url, "sk-wrong"))
    assert isinstance(mapped, AuthenticationError)
    assert mapped.status == 401
    assert len(server.requests) == 1
    assert "API key" in mapped.hint and "LLM_API_KEY" in str(mapped)


def test_context_length_400_maps_to_context_window_error(server: FakeServer) -> None:
    server.play(Reply(400, error("This model's maximum context length is 4096 tokens", "context_length_exceeded")))
    _, mapped = run_and_map(openai_compatible("fake", server.base_url, None))
    assert isinstance(mapped, ContextWindowError)
    assert mapped.status == 400
    assert "context" in str(mapped) and "shorten" in mapped.hint


def test_llama_cpp_context_size_wording_maps_to_context_window_error(server: FakeServer) -> None:
    body = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                      "type": "exceed_context_size_error"}}  # fmt: skip
    server.play(Reply(400, body))
    _, mapped = run_and_map(openai_compatible("fake", server.base_url, None))
    assert isinstance(mapped, ContextWindowError)


def test_content_filter_400_maps_to_content_filter_error(server: FakeServer) -> None:
    server.play(Reply(400, error("The response was filtered due to the content management policy", "content_filter")))
    _, mapped = run_and_map(openai_compatible("fake", server.base_url, None))
    assert isinstance(mapped, ContentFilterError)
    assert "rephrase" in mapped.hint


def test_filtered_finish_reason_maps_to_content_filter_error(server: FakeServer) -> None:
    server.play(Reply(200, completion("", finish_reason="content_filter")))
    _, mapped = run_and_map(openai_compatible("fake", server.base_url, None))
    assert isinstance(mapped, ContentFilterError)
    assert mapped.status is None


def test_other_4xx_maps_to_bad_request(server: FakeServer) -> None:
    server.play(Reply(422, error("temperature must be <= 2")))
    _, mapped = run_and_map(openai_compatible("fake", server.base_url, None))
    assert isinstance(mapped, BadRequestError)
    assert mapped.status == 422 and "temperature must be" in str(mapped)


def test_server_error_forever_is_retried_then_maps_to_model_error(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "2")
    server.play(Reply(500, error("boom", type_="server_error")))
    _, mapped = run_and_map(openai_compatible("fake", server.base_url, None))
    assert len(server.requests) == 3
    assert type(mapped) is ModelError
    assert mapped.status == 500 and "after retries" in mapped.hint


def test_retries_zero_makes_one_attempt(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "0")
    server.play(Reply(503, error("overloaded", type_="server_error")))
    _, mapped = run_and_map(openai_compatible("fake", server.base_url, None))
    assert len(server.requests) == 1
    assert isinstance(mapped, ModelError) and mapped.status == 503


def test_run_settings_override_model_retries(server: FakeServer) -> None:
    server.play(Reply(500, error("boom")))
    model = openai_compatible("fake", server.base_url, None)
    with pytest.raises(Exception):
        Agent(model).run_sync("hi", model_settings={"max_retries": 0})
    assert len(server.requests) == 1


def test_timeout_maps_to_connection_error_with_timeout_hint(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STRUCKDOWN_TIMEOUT", "0.2")
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "0")
    # The subject is time: the client's 0.2 s timeout firing on a server that never answers
    # in time (it holds its reply until the test releases it, after the client gave up).
    held = threading.Event()
    server.play(Reply(200, completion(), hold=held))
    try:
        _, mapped = run_and_map(openai_compatible("fake", server.base_url, None))
    finally:
        held.set()
    assert isinstance(mapped, ModelConnectionError)
    assert "timed out" in str(mapped) and "STRUCKDOWN_TIMEOUT" in mapped.hint


def test_refused_connection_maps_to_connection_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "0")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = openai_compatible("fake", f"http://127.0.0.1:{port}/v1", None)
    _, mapped = run_and_map(model)
    assert isinstance(mapped, ModelConnectionError)
    assert mapped.status is None
    assert f"127.0.0.1:{port}" in str(mapped)
    assert "local-llm.sh" in mapped.hint


def test_unrelated_errors_are_not_mapped() -> None:
    assert map_model_error(ValueError("x"), "m") is None
    assert map_model_error(KeyError("x"), "m") is None


def test_mapping_looks_through_groups_and_causes() -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    inner = ModelHTTPError(429, "gpt", {"error": {"message": "slow"}})
    group = ExceptionGroup("task group", [ValueError("noise"), inner])
    assert isinstance(map_model_error(group, "gpt"), RateLimitError)
    try:
        try:
            raise inner
        except ModelHTTPError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        assert isinstance(map_model_error(outer, "gpt"), RateLimitError)


def test_status_mapping_without_a_server() -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    cases = {403: AuthenticationError, 404: BadRequestError, 418: BadRequestError, 502: ModelError}
    for status, cls in cases.items():
        mapped = map_model_error(ModelHTTPError(status, "m", {"error": {"message": "x"}}), "m")
        assert type(mapped) is cls, status
        assert mapped.status == status


def test_quota_is_a_rate_limit_with_a_billing_hint() -> None:
    from pydantic_ai.exceptions import ModelHTTPError, ModelQuotaExceededError

    exc = ModelHTTPError.for_category(
        ModelQuotaExceededError, status_code=429, model_name="m", body={"error": {"message": "no credits"}}
    )
    mapped = map_model_error(exc, "m")
    assert isinstance(mapped, RateLimitError) and "billing" in mapped.hint


def test_model_errors_pickle() -> None:
    err = RateLimitError("openai:gpt", "slow", status=429)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is RateLimitError and str(back) == str(err) and back.status == 429


def test_errors_without_an_http_status() -> None:
    from pydantic_ai.exceptions import ModelAPIError, ModelRequestRejectedError

    stream = map_model_error(ModelAPIError("m", "stream broke", in_stream=True), "m")
    assert isinstance(stream, ModelConnectionError) and "stream broke" in str(stream)
    rejected = ModelRequestRejectedError("m", "prompt is too long: 300000 tokens", in_stream=True)
    assert isinstance(map_model_error(rejected, "m"), ContextWindowError)


def test_errors_from_below_pydantic_ai() -> None:
    import httpx2

    timeout = map_model_error(httpx2.ReadTimeout("read timed out"), "m")
    assert isinstance(timeout, ModelConnectionError) and "STRUCKDOWN_TIMEOUT" in timeout.hint
    assert isinstance(map_model_error(httpx2.ConnectError("refused"), "m"), ModelConnectionError)
    assert isinstance(map_model_error(ConnectionRefusedError("refused"), "m"), ModelConnectionError)
    assert isinstance(map_model_error(TimeoutError(), "m"), ModelConnectionError)


@pytest.mark.parametrize(("retries", "attempts"), [("0", 1), ("2", 3)])
def test_retries_reach_a_model_built_from_a_provider_string_as_run_settings(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch, retries: str, attempts: int
) -> None:
    """`openai-chat:…` is built by pydantic-ai's infer_model; struckdown's retry budget
    reaches its requests as run settings (the model object is never written to)."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", retries)
    server.play(Reply(503, error("overloaded", type_="server_error")))
    with pytest.raises(ModelError) as info:
        sd.complete("Q [[a]]", model="openai-chat:fake-model")
    assert info.value.status == 503
    assert len(server.requests) == attempts


# -- issue 40 items 8 and 19: errors that say the request cannot be served ------------------

LLAMA_NO_IMAGES = "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"


@pytest.mark.parametrize("status", [500, 400])
def test_a_model_that_cannot_take_images_is_told_at_once_never_retried(server: FakeServer, status: int) -> None:
    """llama.cpp answers a model without vision with HTTP 500, a provider with a 4xx: either
    way one request, no retry, a hint about images, and the model named by its real name."""
    server.play(Reply(status, error(LLAMA_NO_IMAGES, type_="server_error" if status == 500 else "invalid_request_error")))
    model = openai_compatible("default", server.base_url, None)  # LLM_API_BASE without a name
    with pytest.raises(BadRequestError) as info:
        sd.complete("Describe [[a]]", model=model, retry_base_delay=0, retry_max_delay=0)
    assert len(server.requests) == 1
    error_ = info.value
    assert error_.status == status and error_.what == "the model cannot take images"
    assert str(error_).startswith(f"model served at {server.base_url}: the model cannot take images (HTTP {status}): ")
    assert error_.hint.startswith("the model cannot take images: give the slot a model with vision")
    assert "try again later" not in str(error_)


def test_a_5xx_that_says_the_request_is_not_supported_is_permanent(server: FakeServer) -> None:
    server.play(Reply(200, completion("hi")), Reply(500, error("the 'logprobs' option is not supported", type_="server_error")))
    model = openai_compatible("default", server.base_url, None)
    assert sd.complete("Hi [[a]]", model=model)["a"] == "hi"  # the server said its name: 'fake'
    with pytest.raises(BadRequestError) as info:
        sd.complete("Again [[a]]", model=model, retry_base_delay=0, retry_max_delay=0)
    assert len(server.requests) == 2  # one each: the second is never retried
    assert str(info.value) == (
        f"model 'fake' at {server.base_url}: the model cannot serve this request (HTTP 500): "
        "the 'logprobs' option is not supported [server_error]. Hint: retrying will not help: check the slot's "
        "inputs and settings (temperature=, max_tokens=, …) or use another model (model=, --model, fallback=)"
    )


def test_a_plain_5xx_is_still_temporary(server: FakeServer) -> None:
    server.play(Reply(500, error("boom", type_="server_error")), Reply(200, completion("fine")))
    result = sd.complete("Hi [[a]]", model=openai_compatible("fake", server.base_url, None), retry_base_delay=0,
                         retry_max_delay=0)  # fmt: skip
    assert result["a"] == "fine" and len(server.requests) == 2
