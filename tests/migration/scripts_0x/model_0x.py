"""The model behind script_0x.py: `DEFAULT_LLM=model_0x:model` (a factory, no network).
It answers by the question in the last user turn and records every request."""

from __future__ import annotations

from typing import Any

from scripted import Call, Script


def _answer(call: Call) -> Any:
    last = call.last_user
    if "Fail" in last:
        raise RuntimeError("the provider is down")
    if "Greet" in last:
        return "Hi Ann"
    if "Age" in last:
        return None  # an optional number that came back null
    if "Mood" in last:
        return "happy"
    return f"answer {len(SCRIPT.calls)}"


SCRIPT = Script(_answer)


def model() -> Any:
    return SCRIPT.model("model_0x")
