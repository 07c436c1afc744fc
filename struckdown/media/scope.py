"""One run's media scope: the images and files its text placed, their tokens, its limits.

Every run opens a scope (`media_scope`, a context variable current in the run's task
and the tasks it starts). Rendering a media value inside it writes a token into the
rendered text: private-use characters around the scope's random nonce and the
value's index. Text from anywhere else (a context string, a model's answer) cannot
forge one: the nonce is made when the run places its first media value, and no model
ever sees it, since every token is replaced by content parts before a request.
A run that places no media value never makes a nonce, and everything that reads the
scope returns at once (`active()` is None).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from contextvars import ContextVar
from contextvars import Token as _Token
from typing import Any, Protocol

DEFAULT_MAX_SIDE = 2048  # pixels, the long side
DEFAULT_MAX_IMAGES = 50  # per request, earlier turns and headers included
MARK = "\ue000"  # starts every media token (a private-use character)
TOKEN = re.compile("\ue000sd([0-9a-f]{16})#(\\d+)\ue001")


class Placeable(Protocol):
    """A media value (struckdown.media.Media) as the scope sees it."""

    def parts(self, max_side: int | None) -> list[Any]: ...


def check_limits(max_side: int | None, max_images: int | None) -> None:
    """ValueError for an `image_max_side` below 1 or a `max_images` below 0 (None: no limit)."""
    if type(max_side) is int and type(max_images) is int and max_side >= 1 and max_images >= 0:
        return  # the common case, checked once per run
    for name, value, least in (("image_max_side", max_side, 1), ("max_images", max_images, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise ValueError(f"{name} must be a whole number of at least {least}, or None, not {value!r}")


class MediaScope:
    """The media one run placed, its token nonce and its limits."""

    def __init__(self, max_side: int | None = DEFAULT_MAX_SIDE, max_images: int | None = DEFAULT_MAX_IMAGES) -> None:
        check_limits(max_side, max_images)
        self.max_side, self.max_images = max_side, max_images
        self.items: list[Any] = []
        self.nonce: str | None = None  # made with the first token: a run without media pays nothing
        self._index: dict[int, int] = {}
        self._sent: dict[int, tuple[Any, Any]] = {}  # id(content part) → (the part, kept alive; its media value)
        self._digests: dict[int, tuple[bytes, str]] = {}  # id(bytes sent) → (them, kept alive so the id stays theirs; sha256)

    def token(self, media: Placeable) -> str:
        if self.nonce is None:
            self.nonce = secrets.token_hex(8)
        index = self._index.get(id(media))
        if index is None:
            index = self._index[id(media)] = len(self.items)
            self.items.append(media)
        return f"\ue000sd{self.nonce}#{index}\ue001"

    def media_at(self, match: re.Match[str]) -> Any:
        """The value a TOKEN match stands for, or None when it is not this run's (it stays text)."""
        if match.group(1) != self.nonce:
            return None
        index = int(match.group(2))
        return self.items[index] if index < len(self.items) else None

    def parts_of(self, media: Placeable) -> list[Any]:
        parts = media.parts(self.max_side)
        for part in parts:
            if not isinstance(part, str):
                self._sent[id(part)] = (part, media)
        return parts

    def source_of(self, part: Any) -> Any:
        """The media value a content part was made from (None: not made by this run)."""
        found = self._sent.get(id(part))
        return found[1] if found is not None else None

    def digest(self, data: bytes) -> str:
        found = self._digests.get(id(data))
        if found is None:
            found = self._digests[id(data)] = (data, hashlib.sha256(data).hexdigest())
        return found[1]


#: The run's media scope. A ContextVar: media values are placed by Jinja filters and the
#: prompt renderer, which take no argument of ours, and concurrent runs each have their own.
CURRENT: ContextVar[MediaScope | None] = ContextVar("struckdown_media_scope", default=None)


class media_scope:  # noqa: N801 - used as a function: `with media_scope(…):`
    """A run's scope, current in this task (and the tasks it starts) until the run ends."""

    __slots__ = ("scope", "_reset")
    _reset: _Token[MediaScope | None]

    def __init__(self, max_side: int | None = DEFAULT_MAX_SIDE, max_images: int | None = DEFAULT_MAX_IMAGES) -> None:
        self.scope = MediaScope(max_side, max_images)

    def __enter__(self) -> MediaScope:
        self._reset = CURRENT.set(self.scope)
        return self.scope

    def __exit__(self, *exc: object) -> None:
        CURRENT.reset(self._reset)


def active() -> MediaScope | None:
    """The current scope when it placed any media value (else None: nothing to do)."""
    scope = CURRENT.get()
    return scope if scope is not None and scope.nonce is not None else None
