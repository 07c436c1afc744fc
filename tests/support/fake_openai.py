"""A fake OpenAI-compatible chat server on 127.0.0.1 that records every request body.

`FakeOpenAI(answer)`: `answer(body)` returns the assistant's text for a request, or a
dict `{"tool": name, "arguments": {...}}` to answer with one tool call. With
`refuse_tools=` set to an error text, any request that offers tools is answered with
that error (HTTP `refuse_status`), as vLLM, llama.cpp and Ollama do when they cannot
call tools. Streaming requests get the same answer as server-sent chunks.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from http_support import http_serving

Answer = Callable[[dict[str, Any]], Any]

#: what the servers send when they cannot call tools
VLLM_NO_TOOLS = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
OLLAMA_NO_TOOLS = "registry.ollama.ai/library/gemma:2b does not support tools"


@dataclass
class FakeOpenAI:
    answer: Answer
    refuse_tools: str | None = None
    refuse_status: int = 400
    bodies: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        """The base URL (`http://127.0.0.1:PORT/v1`) while the server runs."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                with fake._lock:
                    fake.bodies.append(body)
                    fake.paths.append(self.path)
                if fake.refuse_tools is not None and body.get("tools"):
                    self._send(fake.refuse_status, {"error": {"message": fake.refuse_tools, "type": "BadRequestError",
                                                              "param": None, "code": fake.refuse_status}})
                    return
                reply = fake.answer(body)
                if body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._send(200, _completion(body, reply))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], reply: Any) -> None:
                message = _completion(body, reply)["choices"][0]["message"]
                delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
                if message.get("tool_calls"):
                    delta["tool_calls"] = [{**call, "index": 0} for call in message["tool_calls"]]
                chunks = [
                    {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model"),
                     "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                    {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model"),
                     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}},
                ]
                data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                raw = data.encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        with http_serving(Handler) as url:
            yield url + "/v1"


def _completion(body: dict[str, Any], reply: Any) -> dict[str, Any]:
    if isinstance(reply, dict) and "tool" in reply:
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": reply["tool"], "arguments": json.dumps(reply["arguments"])},
        }]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": str(reply)}, "stop"
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content)
    return ""
