"""Real provider models (pydantic-ai's Anthropic and OpenAI chat models) whose HTTP goes to
an in-process mock transport: each request body is recorded as the provider would get
it, and each reply carries the usage the test scripts (prompt-cache tokens included).

`Wire.anthropic()`, `Wire.openai()` (OpenAI's own API) and `Wire.llama_cpp()` (an
OpenAI-compatible server on 127.0.0.1) share one transport; `wire.bodies` holds every
request body in the order sent.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import httpx2


@dataclass
class Wire:
    """The usage each reply reports: `cached` input tokens read from the cache, `written` to it."""

    input_tokens: int = 1000
    cached: int = 0
    written: int = 0
    output_tokens: int = 2
    answer: str = "ok"
    bodies: list[dict[str, Any]] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    # "anthropic" / "prefix": the usage is computed from each body by that provider's cache rule
    # (4 characters a token): what a cache-reporting provider would say, for the prediction tests
    rule: str | None = None
    cache: list[str] = field(default_factory=list)  # the prefixes the simulated provider holds

    def _simulate(self, body: dict[str, Any]) -> None:
        text, points = _anthropic_text(body) if "system" in body or "tools" in body else _chat_text(body)
        if self.rule == "anthropic":
            best = max((len(p) for p in self.cache if text.startswith(p)), default=0)
            self.cache += [text[:point] for point in points]
        else:
            shared = max((_common(p, text) for p in self.cache), default=0) // 4
            best = 0 if shared < 1024 else (1024 + (shared - 1024) // 128 * 128) * 4
            self.cache.append(text)
        self.input_tokens, self.cached, self.written = -(-len(text) // 4), best // 4, 0

    def _reply(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        self.urls.append(str(request.url))
        if self.rule is not None:
            self._simulate(body)
        if request.url.path.endswith("/messages"):  # Anthropic: input_tokens excludes the cache's
            usage = {
                "input_tokens": self.input_tokens - self.cached - self.written,
                "output_tokens": self.output_tokens,
                "cache_read_input_tokens": self.cached,
                "cache_creation_input_tokens": self.written,
            }
            message = {
                "id": f"msg_{len(self.bodies)}", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": self.answer}], "stop_reason": "end_turn",
                "stop_sequence": None, "usage": usage,
            }
            if not body.get("stream"):
                return httpx2.Response(200, json=message)
            start = {**message, "content": [], "stop_reason": None}
            return _sse([
                ("message_start", {"type": "message_start", "message": start}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": self.answer}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                   "usage": {"output_tokens": self.output_tokens}}),
                ("message_stop", {"type": "message_stop"}),
            ])
        usage = {  # OpenAI and llama.cpp: prompt_tokens includes the cached ones
            "prompt_tokens": self.input_tokens, "completion_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached},
        }
        head = {"id": f"chatcmpl-{len(self.bodies)}", "created": 0, "model": body["model"]}
        if not body.get("stream"):
            return httpx2.Response(200, json={
                **head, "object": "chat.completion", "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer}, "finish_reason": "stop"}],
            })
        chunk = {**head, "object": "chat.completion.chunk"}
        return _sse([
            (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": self.answer},
                                          "finish_reason": None}]}),
            (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            (None, {**chunk, "choices": [], "usage": usage}),
            (None, "[DONE]"),
        ])

    def _client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self._reply))

    def anthropic(self, name: str = "claude-sonnet-4-5") -> Any:
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        return AnthropicModel(name, provider=AnthropicProvider(api_key="test-key", http_client=self._client()))

    def openai(self, name: str = "gpt-4o") -> Any:
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        return OpenAIChatModel(name, provider=OpenAIProvider(api_key="test-key", http_client=self._client()))

    def llama_cpp(self, name: str = "qwen") -> Any:
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(base_url="http://127.0.0.1:8765/v1", api_key="none", http_client=self._client())
        return OpenAIChatModel(name, provider=provider)


def _anthropic_text(body: dict[str, Any]) -> tuple[str, list[int]]:
    """An Anthropic body as text (tools, system, messages) and its breakpoints' offsets."""
    text, points = "", []
    for tool in body.get("tools", []):
        text += json.dumps({k: v for k, v in tool.items() if k != "cache_control"}, sort_keys=True)
        if "cache_control" in tool:
            points.append(len(text))
    for block in body.get("system", []):
        text += "[system]" + block["text"]
        if "cache_control" in block:
            points.append(len(text))
    for message in body["messages"]:
        for block in message["content"]:
            text += f"[{message['role']}]" + json.dumps({k: v for k, v in block.items() if k != "cache_control"})
            if "cache_control" in block:
                points.append(len(text))
    if "cache_control" in body:
        points.append(len(text))
    return text, points


def _chat_text(body: dict[str, Any]) -> tuple[str, list[int]]:
    text = "".join(json.dumps(tool, sort_keys=True) for tool in body.get("tools", []))
    text += "".join(f"[{m['role']}]" + json.dumps(m.get("content"), sort_keys=True) for m in body["messages"])
    return text, []


def _common(a: str, b: str) -> int:
    """The length of the prefix two texts share (the standard library's, not struckdown's:
    this side is the provider the prediction is checked against)."""
    return len(os.path.commonprefix([a, b]))


def _sse(events: list[tuple[str | None, Any]]) -> httpx2.Response:
    lines = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.append(f"data: {data if isinstance(data, str) else json.dumps(data)}\n")
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content="\n".join(lines).encode())


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where an Anthropic request body asks for `cache_control`, in request order:
    `tools[i]`, `system[i]`, `messages[i].content[j]`, and `request` (the automatic one)."""
    found = [f"tools[{i}]" for i, tool in enumerate(body.get("tools", [])) if "cache_control" in tool]
    found += [f"system[{i}]" for i, block in enumerate(body.get("system", [])) if "cache_control" in block]
    for i, message in enumerate(body.get("messages", [])):
        content = message["content"]
        if isinstance(content, list):
            found += [f"messages[{i}].content[{j}]" for j, b in enumerate(content) if "cache_control" in b]
    if "cache_control" in body:
        found.append("request")
    return found


def dumped(value: Any) -> bytes:
    """The JSON bytes of part of a body, as compared for a byte-identical prefix."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
