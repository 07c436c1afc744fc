"""Small media files made in memory (no Pillow needed), and reading what a request held."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart


def png(width: int = 4, height: int = 3, shade: int = 0) -> bytes:
    """A valid greyscale PNG of exactly this size (one shade: it compresses to almost nothing)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes([shade % 256]) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"


def user_contents(messages: list[ModelMessage]) -> list[Any]:
    """The content of each user prompt part of a request, in order (a str or a list of parts)."""
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if type(part) is UserPromptPart
    ]


def shape(content: Any) -> Any:
    """A user prompt's content with each binary part as ('binary', media type, bytes)
    and each URL part as (kind, url): easy to compare exactly."""
    from pydantic_ai.messages import BinaryContent, FileUrl, TextContent

    if isinstance(content, str):
        return content
    out: list[Any] = []
    for item in content:
        if isinstance(item, BinaryContent):
            out.append(("binary", item.media_type, item.data))
        elif isinstance(item, FileUrl):
            out.append((item.kind, item.url))
        elif isinstance(item, TextContent):
            out.append(("text-content", item.content))
        else:
            out.append(item)
    return out
