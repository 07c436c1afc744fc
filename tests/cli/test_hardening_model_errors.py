"""An endpoint answering with an empty `choices` list is a ModelError that says so, not an IndexError.

A real OpenAIChatModel talks to a loopback fake server (no network).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from cli_support import plain_environment, sd  # noqa: F401
from http_support import http_serving
from model_support import clear_model_cache
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from struckdown import complete
from struckdown.errors import StruckdownError
from struckdown.models.errors import ModelError

EMPTY = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "fake", "choices": [],
    "usage": {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5},
}  # fmt: skip


@pytest.fixture
def empty_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            self.rfile.read(int(self.headers.get("content-length", 0)))
            data = json.dumps(EMPTY).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    with http_serving(Handler) as url:
        base = f"{url}/v1"
        for var in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_KEY"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("LLM_API_BASE", base)
        monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "0")
        clear_model_cache()
        try:
            yield base
        finally:
            clear_model_cache()


def test_empty_choices_is_a_model_error_through_the_api(empty_server: str) -> None:
    with pytest.raises(ModelError) as caught:
        complete("Say hi [[greeting]]", {})
    error = caught.value
    assert isinstance(error, StruckdownError) and not isinstance(error, IndexError)
    assert error.model == f"served at {empty_server}"  # where it runs (LLM_API_BASE names no model: issue 40 item 19)
    assert "the provider sent no answer: the response holds no choices" in str(error)
    assert "empty `choices` list" in error.hint
    # pydantic-ai before 2.78 read `choices[0]` (IndexError); 2.78 raises ModelEmptyResponseError
    assert type(error.__cause__).__name__ in {"IndexError", "ModelEmptyResponseError"}


def _ways_to_say_no_choices() -> list[str]:
    from pydantic_ai import exceptions as pe

    # ModelEmptyResponseError came with pydantic-ai 2.78; the oldest supported version has the other two
    return ["index", "plain"] + (["empty"] if hasattr(pe, "ModelEmptyResponseError") else [])


@pytest.mark.parametrize("raised", _ways_to_say_no_choices())
def test_every_way_pydantic_ai_says_no_choices_is_the_same_model_error(raised: str) -> None:
    from pydantic_ai import exceptions as pe

    from struckdown.models.errors import is_transient, map_model_error

    made: BaseException
    if raised == "index":  # pydantic-ai < 2.78, raised inside its adapters
        from pydantic_ai.models.openai import _chat_model

        try:
            exec(compile("[][0]", _chat_model.__file__, "exec"))
        except IndexError as exc:
            made = exc
    elif raised == "empty":
        made = pe.ModelEmptyResponseError("m", "Empty response from openai chat completions endpoint: no choices")
    else:  # adapters that still raise a plain ModelAPIError for `null` choices
        made = pe.ModelAPIError("m", "Invalid response from OpenRouter chat completions endpoint: no choices")
    mapped = map_model_error(made, "openai-chat:m")
    assert mapped is not None and type(mapped) is ModelError
    assert str(mapped).startswith("model openai-chat:m: the provider sent no answer: the response holds no choices. Hint: ")
    assert "check that the server is running" not in str(mapped) and is_transient(mapped)


def test_empty_choices_is_one_clear_line_in_the_cli(empty_server: str, tmp_path: Path) -> None:
    template = tmp_path / "t.sd"
    template.write_text("Say hi [[greeting]]\n", encoding="utf-8")
    result = sd("run", template, "--no-stream", "--no-cache")
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "IndexError" not in last
    assert "the provider sent no answer: the response holds no choices. Hint: the endpoint answered" in last


def test_an_index_error_of_our_own_code_is_not_called_a_provider_fault() -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> Any:
        return [][0]

    with pytest.raises(IndexError):  # a bug in the model function stays that bug
        complete("Say hi [[greeting]]", {}, model=FunctionModel(broken))


BODIES = {
    "html": ("text/html", b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"),
    "empty": ("text/event-stream", b""),
}


@pytest.fixture
def odd_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Answers every request with 200 and the body `state["body"]` names, counting requests."""
    state: dict[str, Any] = {"body": "html", "requests": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            self.rfile.read(int(self.headers.get("content-length", 0)))
            state["requests"] += 1
            media_type, data = BODIES[state["body"]]
            self.send_response(200)
            self.send_header("content-type", media_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    with http_serving(Handler) as url:
        for var in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_KEY", "STRUCKDOWN_MAX_RETRIES"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("LLM_API_BASE", f"{url}/v1")
        clear_model_cache()
        try:
            yield state
        finally:
            clear_model_cache()


WRONG_BODY_HINT = (
    "Hint: check the base URL (an OpenAI-compatible one usually ends in /v1) and that no proxy, gateway or "
    "login page answers in the model server's place; the server's logs say more"
)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("html", "an HTML page (text/html, 74 bytes) where a stream of completion events was expected"),
        ("empty", "an empty body (text/event-stream, 0 bytes) where a stream of completion events was expected"),
    ],
)
def test_an_html_or_empty_body_while_streaming_says_what_the_server_sent(
    odd_server: dict[str, Any], tmp_path: Path, body: str, said: str
) -> None:
    """Issue 39 N19: these were "gave no usable answer: Streamed response ended without content
    or tool calls. Hint: make the question clearer", which sent users to their prompt."""
    odd_server["body"] = body
    template = tmp_path / "t.sd"
    template.write_text("Say hi [[greeting]]\n", encoding="utf-8")
    result = sd("run", template, "--no-cache")  # streams
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    base = f"http://{last.split('http://')[1].split('/v1')[0]}/v1"
    assert last == (
        f"error: slot 'greeting': ModelError: model served at {base}: the endpoint sent no completion (HTTP 200): "
        f"{said}. {WRONG_BODY_HINT}"
    )
    assert odd_server["requests"] == 1  # a wrong body is not retried


def test_an_html_body_without_streaming_shows_its_beginning(odd_server: dict[str, Any]) -> None:
    with pytest.raises(ModelError) as caught:
        complete("Say hi [[greeting]]", {})
    assert str(caught.value).endswith(
        ": the endpoint sent no completion (HTTP 200): an HTML page, not JSON: <html><head><title>502 Bad Gateway"
        f"</title></head><body>nginx</body></html>. {WRONG_BODY_HINT}"
    )
    assert odd_server["requests"] == 1
