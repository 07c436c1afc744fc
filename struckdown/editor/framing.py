"""LSP base-protocol framing: `Content-Length` headers, then that many bytes of JSON.

A `Framer` is fed the bytes as they arrive and hands back whole bodies, or a
`FrameError` when a header is wrong. After an error it finds the next message by its
header, `Content-Length: N` and a line end: those bytes cannot occur in a JSON body
(JSON strings hold no raw line breaks, and outside strings the words are not JSON), so
the search never mistakes a well-formed body for a header.

- no `Content-Length`, or one that is not a byte count (`abc`, `-5`, `1e3`): an error;
  the bytes up to the next header are skipped.
- a `Content-Length` larger than the body that follows (a truncated body): the next
  header shows up inside the bytes the length promised; an error, and reading goes
  on at that header. Without a next message there is nothing to tell a slow body from
  a short one, so the framer waits, as every reader must.
- a `Content-Length` above `MAX_BODY`: an error, and the body is skipped.

No I/O here: the server's reader loop feeds it (`server.StruckdownServer`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MAX_BODY = 256 * 1024 * 1024
MAX_HEADERS = 64 * 1024

_HEADERS_END = b"\r\n\r\n"
_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)
_NEXT_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*[0-9]+[ \t]*\r\n", re.IGNORECASE)
_DIGITS = re.compile(rb"[0-9]+")
_HEADER_LINE = re.compile(rb"[A-Za-z][A-Za-z0-9-]*[ \t]*:")


@dataclass(frozen=True)
class Body:
    data: bytes


@dataclass(frozen=True)
class FrameError:
    reason: str


def _headers_start(head: bytes, start: int) -> int:
    """Where the header lines that hold the `Content-Length` at `start` begin: before it,
    only whole `Name: value` lines count as headers; anything else is junk."""
    while start > 0 and head[start - 2 : start] == b"\r\n":
        previous = head.rfind(b"\r\n", 0, start - 2)
        line_start = previous + 2 if previous >= 0 else 0
        if not _HEADER_LINE.match(head, line_start, start - 2):
            break
        start = line_start
    return start


class Framer:
    def __init__(self) -> None:
        self.buffer = bytearray()
        self.length: int | None = None  # the body being read, once its headers are in
        self.scanned = 0  # how far the current body was searched for a next header
        self.skipping = False  # after an error: bytes before the next header are not news

    def feed(self, data: bytes) -> Iterator[Body | FrameError]:
        """The bodies and errors `data` completes, one at a time: the caller may set
        `skipping` between them (after a body that was not JSON)."""
        self.buffer += data
        while True:
            item = self._body() if self.length is not None else self._headers()
            if item is None:
                return
            if isinstance(item, (Body, FrameError)):
                yield item

    def _headers(self) -> Body | FrameError | bool | None:
        end = self.buffer.find(_HEADERS_END)
        if end < 0:
            if len(self.buffer) > MAX_HEADERS:
                return self._resync(f"{len(self.buffer):,} bytes without the blank line that ends a header", 1)
            return None
        head = bytes(self.buffer[:end])
        found = list(_LENGTH.finditer(head))
        if not found:
            del self.buffer[: end + len(_HEADERS_END)]
            return self._resync("a message without a Content-Length header")
        value = found[-1]
        junk = head[: _headers_start(head, value.start())]
        del self.buffer[: end + len(_HEADERS_END)]
        raw = value.group(1).strip()
        reported = self._skipped(junk)
        if not _DIGITS.fullmatch(raw):
            self.skipping = True
            return FrameError(f"Content-Length {raw.decode('latin-1')!r} is not a byte count; the message is skipped")
        length = int(raw)
        if length > MAX_BODY:
            self.skipping = True
            return FrameError(f"Content-Length {length:,} is above the limit of {MAX_BODY:,} bytes; the message is skipped")
        self.skipping = False
        self.length, self.scanned = length, 0
        return reported or True

    def _skipped(self, junk: bytes) -> FrameError | None:
        if not junk or self.skipping:
            return None
        return FrameError(f"skipped {len(junk):,} bytes that are not a message header")

    def _resync(self, reason: str, start: int = 0) -> FrameError:
        """Drop what comes before the next header found from `start` (or all but a
        possible beginning of one)."""
        self.skipping = True
        found = _NEXT_HEADER.search(self.buffer, start)
        if found:
            del self.buffer[: found.start()]
        else:
            del self.buffer[: max(0, len(self.buffer) - 64)]
        return FrameError(reason)

    def _body(self) -> Body | FrameError | None:
        assert self.length is not None
        window = min(self.length, len(self.buffer))
        found = _NEXT_HEADER.search(self.buffer, max(0, self.scanned - 64), window)
        if found:
            promised = self.length
            del self.buffer[: found.start()]
            self.length = None
            return FrameError(
                f"the body ended after {found.start():,} of the {promised:,} bytes its Content-Length promised "
                "(the next message's header came first); the message is skipped"
            )
        self.scanned = window
        if len(self.buffer) < self.length:
            return None
        data = bytes(self.buffer[: self.length])
        del self.buffer[: self.length]
        self.length = None
        return Body(data)
