"""A server that refuses tool calling gets the typed answer as prompted output (SPEC §37).

struckdown asks for a typed answer (`[[int:n]]`, `[[pick:…]]`, a record) through an
output tool. Some OpenAI-compatible servers cannot call tools: vLLM without
`--enable-auto-tool-choice`, llama.cpp without `--jinja`, an Ollama model without tool
support. They answer the request with an error; as 0.x did, the slot then asks once more
with the schema in the prompt and the answer as JSON text (pydantic-ai's `PromptedOutput`),
and every later typed slot on that model is asked that way from the start.
"""

from __future__ import annotations

import weakref
from typing import Any

#: what such servers say (lowercased), with the word "tool" or "function" somewhere in it
_REFUSALS = (
    "does not support tools", "does not support tool", "tools are not supported", "tool calling is not supported",
    "tool use is not supported", "tool_choice", "tool choice", "enable-auto-tool-choice", "tool-call-parser",
    "tools param requires", "--jinja", "function calling is not supported", "does not support function",
    "tools is not supported", "not support tool",
)  # fmt: skip
_WHO = ("tool", "function")

#: models that refused tools in this process, by identity (the model objects are cached per
#: Environment; pydantic-ai's are dataclasses, so not hashable)
_REFUSING: dict[int, Any] = {}


def remember(model: Any) -> None:
    key = id(model)

    def forget(_ref: Any) -> None:
        _REFUSING.pop(key, None)

    try:
        _REFUSING[key] = weakref.ref(model, forget)
    except TypeError:  # a model that cannot be weakly referenced is asked with tools first each time
        pass


def known_to_refuse(model: Any) -> bool:
    held = _REFUSING.get(id(model))
    return held is not None and held() is model


def refuses_tools(exc: BaseException) -> bool:
    """Whether a failed request says the server cannot call tools (a 4xx/5xx whose body says so)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = f"{current} {getattr(current, 'body', '') or ''} {getattr(current, 'detail', '') or ''}".lower()
        if any(word in text for word in _WHO) and any(refusal in text for refusal in _REFUSALS):
            return True
        current = current.__cause__ or current.__context__
    return False
