"""Issue 55 (SPEC §37): providers as 0.x reached them — `anthropic:` and `google:` model
names go to an `LLM_API_BASE` proxy (the prefix dropped), and a server that refuses tool
calling gets the typed answer as prompted output. A fake OpenAI-compatible server on
127.0.0.1 records every request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import struckdown as sd
from fake_openai import OLLAMA_NO_TOOLS, VLLM_NO_TOOLS, FakeOpenAI, last_user_text


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_BASE", "LLM_API_KEY", "OPENAI_BASE_URL",
                "STRUCKDOWN_CACHE", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "0")
    yield


@pytest.mark.parametrize(
    ("name", "served"),
    [
        ("anthropic:claude-3-5-haiku-latest", "claude-3-5-haiku-latest"),
        ("google:gemini-2.0-flash", "gemini-2.0-flash"),
        ("google-gla:gemini-2.0-flash", "gemini-2.0-flash"),
    ],
)
def test_anthropic_and_google_names_go_to_the_llm_api_base_proxy(
    name: str, served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeOpenAI(lambda body: "Hello from the proxy")
    with fake.serving() as base:
        monkeypatch.setenv("LLM_API_BASE", base)
        monkeypatch.setenv("LLM_API_KEY", "proxy-key")
        result = sd.complete("Say hello [[greeting]]", model=name)
    assert result["greeting"] == "Hello from the proxy"
    assert fake.paths == ["/v1/chat/completions"]
    assert fake.bodies[0]["model"] == served
    assert [m["role"] for m in fake.bodies[0]["messages"]] == ["user"]
    assert last_user_text(fake.bodies[0]) == "Say hello"


def _typed_answer(body: dict[str, Any]) -> Any:
    """A server without tools: the answer is JSON text (the schema was in the prompt)."""
    text = last_user_text(body)
    if "How many" in text:
        return json.dumps({"response": 3})
    return json.dumps({"response": "negative"})


@pytest.mark.parametrize("refusal", [VLLM_NO_TOOLS, OLLAMA_NO_TOOLS], ids=["vllm", "ollama"])
def test_a_server_that_refuses_tools_gets_prompted_output(refusal: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenAI(_typed_answer, refuse_tools=refusal)
    template = "Review: {{ review }}\nHow many stars? [[int:stars]]\nSentiment? [[pick:sentiment|positive,negative]]"
    with fake.serving() as base:
        monkeypatch.setenv("LLM_API_BASE", base)
        result = sd.complete(template, {"review": "Cold soup."}, model="served-model")
    assert (result["stars"], result["sentiment"]) == (3, "negative")
    # the first typed request offered the output tool and was refused; it was asked again with the
    # schema in the prompt and no tools; the next typed slot was asked that way from the start
    offered = [bool(b.get("tools")) for b in fake.bodies]
    assert offered == [True, False, False]
    retry, second = fake.bodies[1], fake.bodies[2]
    assert retry["messages"][-1] == fake.bodies[0]["messages"][-1]  # the same question
    assert [m["role"] for m in retry["messages"]] == ["system", "user"]  # pydantic-ai's schema instructions
    assert retry["messages"][0]["content"].lstrip().startswith("Always respond with a JSON object")
    assert '"response"' in retry["messages"][0]["content"] and '"integer"' in retry["messages"][0]["content"]
    assert '["positive","negative"]' in second["messages"][0]["content"].replace(" ", "")
    assert "tool_choice" not in retry and "tool_choice" not in second


def test_any_other_bad_request_is_still_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenAI(_typed_answer, refuse_tools="temperature must be between 0 and 2")
    with fake.serving() as base:
        monkeypatch.setenv("LLM_API_BASE", base)
        with pytest.raises(sd.BadRequestError, match="temperature must be between 0 and 2"):
            sd.complete("How many? [[int:n]]", model="served-model")
    assert len(fake.bodies) == 1
