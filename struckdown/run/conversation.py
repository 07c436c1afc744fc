"""The conversation of one segment: turns, pending text, instructions and headers.

Within a segment each slot's request holds the text before each earlier slot as a
user turn and that slot's answer as an assistant turn, then the text before this
slot as the last user turn (SPEC §2.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from ..media.scope import MARK
from ..media.turns import refuse_media, user_content


def user_turn(text: str) -> ModelRequest:
    if MARK in text:  # images and files placed in it become its content parts
        return ModelRequest(parts=[UserPromptPart(user_content(text))])
    return ModelRequest(parts=[UserPromptPart(text)])


def assistant_turn(text: str) -> ModelResponse:
    if MARK in text:
        refuse_media(text, "an assistant turn")
    return ModelResponse(parts=[TextPart(text)])


@dataclass
class Layers:
    """Active <system> or <header> text: a global layer carried across segments and
    a local one for this segment only. `replace` replaces what is active in its own
    scope: `<system replace>` the global text (and this segment's local text with it),
    `<system local replace>` only this segment's local text; the global text stays
    (SPEC §2.4 as clarified by issue 32)."""

    global_parts: list[str] = field(default_factory=list)
    local_parts: list[str] = field(default_factory=list)

    def apply(self, text: str, scope: str, mode: str) -> None:
        if scope == "global":
            if mode == "replace":
                self.global_parts = [text]
                self.local_parts = []
            else:
                self.global_parts.append(text)
        elif mode == "replace":
            self.local_parts = [text]
        else:
            self.local_parts.append(text)

    def active(self) -> list[str]:
        return [p for p in (*self.global_parts, *self.local_parts) if p]

    def carried(self) -> Layers:
        return Layers(list(self.global_parts))


@dataclass
class Conversation:
    system: Layers = field(default_factory=Layers)
    header: Layers = field(default_factory=Layers)
    history: list[ModelMessage] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    def add_text(self, text: str) -> None:
        self.pending.append(text)

    def take_prompt(self) -> str:
        text = "".join(self.pending).strip()
        self.pending.clear()
        return text

    def flush_pending(self) -> None:
        text = self.take_prompt()
        if text:
            self.history.append(user_turn(text))

    def add_turn(self, role: str, text: str) -> None:
        self.flush_pending()
        self.history.append(user_turn(text) if role == "user" else assistant_turn(text))

    def instructions(self) -> str | None:
        parts = self.system.active()
        text = "\n\n".join(parts) if parts else None
        if text is not None and MARK in text:
            refuse_media(text, "<system>")
        return text

    def request(self, prompt: str, *, with_history: bool = True) -> tuple[list[ModelMessage], str | None]:
        """(message_history, user_prompt) for a slot whose question is `prompt`."""
        messages: list[ModelMessage] = []
        headers = self.header.active()
        if headers:
            messages.append(user_turn("\n\n".join(headers)))
        if with_history:
            messages.extend(self.history)
        if prompt:
            return messages, prompt
        if messages and isinstance(messages[-1], ModelRequest):
            return messages, None
        return messages, ""

    def record(self, prompt: str, answer: str) -> None:
        if prompt:
            self.history.append(user_turn(prompt))
        self.history.append(assistant_turn(answer))
