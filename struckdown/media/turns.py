"""Media values in the conversation: tokens become content parts (SPEC §15).

The conversation calls `user_content` for each user turn whose text holds a media
token, and `refuse_media` for `<system>` text and assistant turns; the slot run
calls `prepare_prompt` for its question (and the `max_images` check) and `redact` on
the messages it keeps; the response cache keys requests through `for_cache_key`.
Each returns at once for a run that placed no media value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import MediaError
from . import PLACEHOLDER_KEY, human_size, kind_word
from .scope import MARK, TOKEN, active

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, UserContent


def user_content(text: str) -> str | list[UserContent]:
    """A user turn's text split at this run's media tokens into its content parts, in
    order (text that is only whitespace between two parts is dropped); the text itself
    when it holds none."""
    scope = active()
    if scope is None:
        return text
    parts: list[UserContent] = []
    last = 0
    for match in TOKEN.finditer(text):
        media = scope.media_at(match)
        if media is None:
            continue
        piece = text[last : match.start()]
        if piece.strip():
            parts.append(piece)
        parts.extend(scope.parts_of(media))
        last = match.end()
    if not last:
        return text
    if text[last:].strip():
        parts.append(text[last:])
    return parts


def refuse_media(text: str, where: str) -> None:
    """A MediaError if `text` holds one of this run's media tokens."""
    scope = active()
    if scope is None:
        return
    for match in TOKEN.finditer(text):
        media = scope.media_at(match)
        if media is not None:
            raise MediaError(
                f"{media.placeholder()} cannot go in {where}: images and files go in user text "
                "(the text before a slot, a <user> turn or a <header>)"
            )


def prepare_prompt(history: Sequence[ModelMessage], prompt: str | None) -> str | list[UserContent] | None:
    """A slot's question as it is sent: split into content parts when it places media.
    A MediaError, before the request, when the request would hold more than
    `max_images` images (its history and headers included)."""
    scope = active()
    if scope is None:
        return prompt
    content = user_content(prompt) if prompt and MARK in prompt else prompt
    if scope.max_images is not None:
        count = count_images(history) + (0 if isinstance(content, str) or content is None else _images_in(content))
        if count > scope.max_images:
            raise MediaError(
                f"this request would hold {count} images (earlier turns and headers included); "
                f"the limit is max_images={scope.max_images}"
            )
    return content


def count_images(messages: Sequence[ModelMessage]) -> int:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    count = 0
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                    count += _images_in(part.content)
    return count


def _images_in(content: Sequence[Any]) -> int:
    from pydantic_ai.messages import BinaryContent, ImageUrl

    return sum(1 for item in content if isinstance(item, ImageUrl) or (isinstance(item, BinaryContent) and item.is_image))


def redact(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The messages with each BinaryContent replaced by its placeholder (a TextContent
    whose metadata describes what was sent): what SlotResult.messages keeps, so the
    bytes stay out of its dumps and out of memory once the run is over. The requests
    that were sent are not changed (new message objects are made)."""
    scope = active()
    if scope is None:
        return messages
    from dataclasses import replace

    from pydantic_ai.messages import BinaryContent, ModelRequest, TextContent, UserPromptPart

    def placeholder(item: BinaryContent) -> TextContent:
        media = scope.source_of(item)
        name = media.name if media is not None else None
        kind, digest = kind_word(item.media_type), scope.digest(item.data)
        info = {"kind": kind, "name": name, "media_type": item.media_type, "bytes": len(item.data), "sha256": digest}
        shown = f"{name} " if name else ""
        text = f"<{kind} {shown}{item.media_type} {human_size(len(item.data))} sha256:{digest[:8]}…>"
        return TextContent(text, metadata={PLACEHOLDER_KEY: info})

    def redacted(part: Any) -> Any:
        if not isinstance(part, UserPromptPart) or isinstance(part.content, str):
            return part
        if not any(isinstance(item, BinaryContent) for item in part.content):
            return part
        return replace(part, content=[placeholder(c) if isinstance(c, BinaryContent) else c for c in part.content])

    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            parts = [redacted(p) for p in message.parts]
            if any(new is not old for new, old in zip(parts, message.parts)):
                message = replace(message, parts=parts)
        out.append(message)
    return out


def for_cache_key(messages: list[ModelMessage]) -> list[Any]:
    """The messages as the response cache keys them: each binary part's bytes stand as
    their sha256, so the content decides the key (and megabytes of base64 are not
    serialised again into the key's text)."""
    if active() is None:
        return messages
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    dumped: list[Any] = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    stack: list[Any] = [dumped]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("kind") == "binary" and isinstance(item.get("data"), str):
                item["data"] = "sha256:" + hashlib.sha256(item["data"].encode("ascii")).hexdigest()
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return dumped
