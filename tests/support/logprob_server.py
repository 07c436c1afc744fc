"""A scripted OpenAI-compatible chat server on 127.0.0.1 whose answers carry token logprobs,
the way OpenAI and llama.cpp send them (`choices[0].logprobs.content`).

Each model name has a list of answers, used in order; an answer is a list of
(token, probability) pairs (the content is the tokens joined) or, with `logprobs=False`
for the model, sent without logprobs.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from http_support import http_serving

Tokens = Sequence[tuple[str, float]]


def answer_tokens(value: Any, *probabilities: float) -> list[tuple[str, float]]:
    """`{"response": VALUE}` as tokens: the structure certain (probability 1), the value's JSON
    split into one token per given probability (the last token takes the rest of the text)."""
    text = json.dumps(value)
    pieces: list[str] = []
    size = max(1, len(text) // len(probabilities))
    for i in range(len(probabilities)):
        pieces.append(text[i * size:] if i == len(probabilities) - 1 else text[i * size:(i + 1) * size])
    return [('{"', 1.0), ("response", 1.0), ('":', 1.0), (" ", 1.0), *zip(pieces, probabilities), ("}", 1.0)]


@dataclass
class LogprobServer:
    answers: dict[str, list[Tokens] | Callable[[dict[str, Any]], Tokens]]  # in order, or by request body
    without_logprobs: frozenset[str] = frozenset()
    bodies: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.bodies.append(body)
            script = self.answers[body["model"]]
            tokens = script(body) if callable(script) else script.pop(0)
        content = "".join(t for t, _ in tokens)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if body.get("tools"):  # the answer as the output tool's call (a model asked without logprobs)
            name = body["tools"][0]["function"]["name"]
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": name, "arguments": content}},
            ]}
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "message": message}
        if body.get("logprobs") and body["model"] not in self.without_logprobs:
            choice["logprobs"] = {"content": [
                {"token": t, "logprob": math.log(p), "bytes": None, "top_logprobs": []} for t, p in tokens
            ]}
        return {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": len(tokens), "total_tokens": 10 + len(tokens)},
        }

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                data = json.dumps(server.reply(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        with http_serving(Handler) as url:
            yield url + "/v1"


def split_vote_model() -> Any:
    """A model factory (`--model logprob_server:split_vote_model`): a typed slot's three asks
    answer red, blue, red (a 2-of-3 vote); a text slot answers `after <the answer before>`."""
    from scripted import Script

    answers = iter(["red", "blue", "red"])
    return Script(lambda call: next(answers) if call.schema else f"after {call.turns[-2][1]}").model()
