"""What a real provider receives: the OpenAI chat request body, through an HTTP mock transport."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx2 as httpx
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import struckdown as sd
from media_support import PDF, png

RED = png(4, 3, 200)


def openai_model(bodies: list[dict[str, Any]], answer: str = "red") -> OpenAIChatModel:
    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
        })

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(api_key="test-key", http_client=client))


def data_uri(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def test_the_chat_request_body_carries_the_image_url_part_in_place() -> None:
    bodies: list[dict[str, Any]] = []
    result = sd.complete("<system>Be brief.</system>Receipt: {{ photo }} What colour? [[colour]]",
                         {"photo": sd.Image(RED, detail="low")}, model=openai_model(bodies))
    assert result["colour"] == "red"
    (body,) = bodies
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "Receipt: "},
            {"type": "image_url", "image_url": {"url": data_uri("image/png", RED), "detail": "low"}},
            {"type": "text", "text": " What colour?"},
        ]},
    ]


def test_a_url_image_and_a_pdf_reach_the_provider_as_url_and_file_parts() -> None:
    bodies: list[dict[str, Any]] = []
    context = {"web": sd.Image("https://example.com/photo.jpg"), "doc": sd.File(PDF, name="terms.pdf")}
    sd.complete("{{ web }} and {{ doc }} Compare. [[a]]", context, model=openai_model(bodies))
    (body,) = bodies
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/photo.jpg"}},
        {"type": "text", "text": " and "},
        {"type": "file", "file": {"file_data": data_uri("application/pdf", PDF), "filename": "filename.pdf"}},
        {"type": "text", "text": " Compare."},
    ]}]


def test_the_image_stays_in_its_turn_in_later_requests() -> None:
    bodies: list[dict[str, Any]] = []
    sd.complete("Look: {{ photo }} [[a]] Again? [[b]]", {"photo": sd.Image(RED)}, model=openai_model(bodies))
    image = {"type": "image_url", "image_url": {"url": data_uri("image/png", RED)}}
    assert bodies[1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Look: "}, image]},
        {"role": "assistant", "content": "red"},
        {"role": "user", "content": "Again?"},
    ]
