"""The default output cap never asks for more than the server's context leaves (issue 40 item 17).

A local OpenAI-compatible server has a small context: llama.cpp's bundled server holds 4,096
tokens in all, prompt and answer together, so the default cap of 4,096 answer tokens can
never be reached and only lets a runaway answer run until the context is full. For such a
server (an OpenAI-compatible base URL that is not OpenAI's or Azure's own) struckdown asks
`GET /props` once per model (llama.cpp answers `default_generation_settings.n_ctx`) and caps
a *default* `max_tokens` at n_ctx minus the request's estimated prompt (4 characters a
token, plus a margin for the chat template). A cap the user set is left alone. A server
that does not answer /props (vLLM, Ollama, a proxy), answers something else, or fails:
no cap, the default stays. The answer is kept for the process (per base URL and model name).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .prompt_cache import provider_kind

#: Characters per token of the prompt estimate (as `sd explain`'s); the margin covers the
#: chat template's role markers and the tool/output schemas the estimate does not see.
CHARS_PER_TOKEN = 4
TEMPLATE_MARGIN = 64
PROPS_TIMEOUT = 3.0

_windows: dict[tuple[str, str], int | None] = {}


def _served(model: Any) -> Any:
    """The OpenAI-compatible chat model under any wrappers, or None when it is not one that
    runs on a server of its own (OpenAI's API, Azure, other providers, test models)."""
    from pydantic_ai.models.wrapper import WrapperModel

    if provider_kind(model) != "llama.cpp":
        return None
    while isinstance(model, WrapperModel):
        model = model.wrapped
    return model if hasattr(model, "client") else None


def props_url(base_url: str) -> str:
    """`http://host:port/v1` → `http://host:port/props` (llama.cpp serves it at the root)."""
    base = base_url.rstrip("/")
    return (base.removesuffix("/v1") or base) + "/props"


async def context_window(model: Any) -> int | None:
    """The server's context size in tokens (llama.cpp's n_ctx), asked once per base URL and
    model name; None when the model is not on such a server or the server does not say."""
    served = _served(model)
    if served is None:
        return None
    key = (str(served.base_url), str(getattr(served, "model_name", "")))
    if key not in _windows:
        # a run on another event loop than the client's last one gets a new client; the agent
        # does this at the start of its run, this request comes just before it
        refresh = getattr(served, "_refresh_http_client", None)
        if callable(refresh):
            refresh()
        _windows[key] = await _ask(served.client, props_url(key[0]))
    return _windows[key]


async def _ask(client: Any, url: str) -> int | None:
    try:  # through the model's own client (its transport, its headers); no retries
        props = await client.get(url, cast_to=object, options={"max_retries": 0, "timeout": PROPS_TIMEOUT})
        n_ctx = props["default_generation_settings"]["n_ctx"]
    except Exception:  # noqa: BLE001 - any server that does not say keeps the default cap
        return None
    return n_ctx if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0 else None


def prompt_tokens(instructions: str | None, history: Sequence[Any], prompt: Any) -> int:
    """A request's prompt in tokens, estimated from its text (4 characters a token)."""
    chars = len(instructions or "") + _chars(prompt)
    for message in history:
        for part in getattr(message, "parts", ()):
            chars += _chars(getattr(part, "content", None)) + _chars(getattr(part, "args", None))
    return -(-chars // CHARS_PER_TOKEN)


def _chars(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (list, tuple)):
        return sum(_chars(v) for v in value)
    if isinstance(value, dict):  # a tool call's arguments
        return len(json.dumps(value, default=str))
    return 0  # an image or document part: the server counts it its own way


def has_context_window(model: Any) -> bool:
    """Whether `model` runs on a server whose context size struckdown asks for (only then is
    `context_left` worth awaiting: every other model gets None)."""
    return provider_kind(model) == "llama.cpp"


async def context_left(model: Any, instructions: str | None, history: Sequence[Any], prompt: Any) -> int | None:
    """What the server's context leaves for the answer of this request, or None (no cap).
    A prompt that already fills the context gets no cap: the server's own error says so."""
    window = await context_window(model)
    if window is None:
        return None
    left = window - prompt_tokens(instructions, history, prompt) - TEMPLATE_MARGIN
    return left if left >= 1 else None


def forget() -> None:
    """Drop the learned context sizes (tests; a server restarted with another -c)."""
    _windows.clear()
