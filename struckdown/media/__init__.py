"""Images and files in the context (SPEC §15): `sd.Image`, `sd.File` and the 0.x `sd.attach`.

A value of these kinds placed with `{{ photo }}` becomes a content part of that user
turn (pydantic-ai `BinaryContent`, or `ImageUrl` / `DocumentUrl` / `AudioUrl` /
`VideoUrl` for a URL), at that position among the turn's text, never text.

How it gets there. Inside a run (its `media_scope.MediaScope`), `str()` of a media
value (what Jinja calls for `{{ photo }}`) is an unforgeable token; the conversation
splits each user turn at the tokens into its content parts (`media/turns.py`),
and a token in `<system>` or in an assistant turn is a `MediaError`. Outside a run a
media value renders as its short placeholder
(`<image receipt.png image/png 3 KB sha256:ab12cd34…>`), which is also its repr and
what `SlotResult.messages` holds in place of the bytes (`redact`), so neither logs
nor dumps of the messages carry the content.

Nothing here imports pydantic-ai or Pillow at module level: the Jinja sandbox imports
this module, and parsing must stay light.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MediaError
from .scope import CURRENT, DEFAULT_MAX_SIDE

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, UserContent

DETAILS = ("auto", "low", "high", "original")
_URL = re.compile(r"(?i)^https?://")
PLACEHOLDER_KEY = "struckdown_media"  # TextContent.metadata key of a placeholder in SlotResult.messages

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"%PDF-", "application/pdf"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
)
#: Types `sniff` recognises: a file named like one of these must start like one.
_SNIFFABLE = frozenset(t for _, t in _SIGNATURES) | {"image/webp", "image/heic", "image/avif", "audio/wav"}
SNIFFABLE = _SNIFFABLE
_EXTENSIONS = {  # what `mimetypes` may not know on every platform
    ".md": "text/markdown", ".webp": "image/webp", ".heic": "image/heic", ".heif": "image/heif",
    ".avif": "image/avif", ".m4a": "audio/mp4", ".flac": "audio/flac", ".mkv": "video/x-matroska",
    ".webm": "video/webm", ".opus": "audio/ogg", ".oga": "audio/ogg",
}  # fmt: skip


def sniff(data: bytes) -> str | None:
    """The media type the first bytes say, for the common image, audio, video and PDF formats."""
    for magic, media_type in _SIGNATURES:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF":
        return {b"WEBP": "image/webp", b"WAVE": "audio/wav", b"AVI ": "video/x-msvideo"}.get(data[8:12])
    if data[:4] == b"FORM" and data[8:12] in (b"AIFF", b"AIFC"):
        return "audio/aiff"
    if data[4:8] == b"ftyp":
        brand = data[8:12]
        if brand in (b"heic", b"heix", b"heim", b"heis", b"mif1"):
            return "image/heic"
        if brand == b"avif":
            return "image/avif"
        if brand in (b"M4A ", b"M4B "):
            return "audio/mp4"
        return "video/quicktime" if brand == b"qt  " else "video/mp4"
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "video/webm"
    if data[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    return None


def guess(name: str | None) -> str | None:
    """The media type a file name (or URL path) suggests."""
    if not name:
        return None
    suffix = os.path.splitext(name)[1].lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    import mimetypes

    return mimetypes.guess_type(name, strict=False)[0]


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def kind_word(media_type: str) -> str:
    for word in ("image", "audio", "video"):
        if media_type.startswith(word + "/"):
            return word
    return "file"


class Media:
    """An image or a file for the model to read: bytes (read from a path, given, or a
    Pillow image) or a URL the provider fetches. Build one with `Image`, `File` or
    `attach`. Read-only: `data`, `url`, `media_type`, `name`, `detail`, `metadata`."""

    data: bytes | None
    url: str | None

    def __init__(
        self,
        source: Any,
        media_type: str | None = None,
        detail: str | None = None,
        *,
        name: str | None = None,
        metadata: bool = False,
    ) -> None:
        if detail is not None and detail not in DETAILS:
            raise ValueError(f"detail must be one of {', '.join(DETAILS)}, not {detail!r}")
        what = type(self).__name__
        data, url, found_name, found_type = _read(source, what)
        self.data, self.url = data, url
        self.name = name if name is not None else found_name
        self.detail = detail if detail is not None else getattr(source, "detail", None)
        self.metadata = bool(metadata or getattr(source, "metadata", False))
        found = media_type or found_type or (sniff(data) if data is not None else None)
        named = guess(self.name) or (guess(_url_path(url)) if url else None)
        if found is None and named is not None and data is not None and named.lower() in _SNIFFABLE:
            raise ValueError(
                f"sd.{what}: {self._label()} is named like {named} but its bytes are not one "
                f"(they start {data[:8]!r}); pass media_type=… if it really is"
            )
        found = found or named
        if found is None:
            raise ValueError(f"sd.{what}: cannot tell what kind of {self._noun()} {self._label()} is; pass media_type=…")
        self.media_type = found.lower()
        if self.media_type == "image/svg+xml":
            raise ValueError(
                f"sd.{what}: {self._label()} is SVG, which is not sent: it is XML that can carry scripts and "
                "links to other files, and most models do not read it; convert it to PNG first"
            )
        self._check()
        self._sha: str | None = None
        self._sent: dict[int | None, tuple[bytes, str]] = {}  # image_max_side → the bytes sent

    def _noun(self) -> str:
        return "file"

    def _check(self) -> None:
        pass

    def _label(self) -> str:
        if self.name:
            return repr(self.name)
        return self.url if self.url is not None else "the bytes given"

    # -- what it is --------------------------------------------------------------
    @property
    def is_image(self) -> bool:
        return self.media_type.startswith("image/")

    @property
    def size(self) -> int | None:
        """Bytes held (None for a URL)."""
        return None if self.data is None else len(self.data)

    @property
    def sha256(self) -> str:
        """Hex digest of the bytes (of the URL, for a URL)."""
        if self._sha is None:
            self._sha = hashlib.sha256(self.data if self.data is not None else (self.url or "").encode()).hexdigest()
        return self._sha

    def placeholder(self) -> str:
        """What stands for the content in text, logs and SlotResult.messages."""
        name = f"{self.name} " if self.name else ""
        if self.url is not None:
            url = self.url if len(self.url) <= 80 else self.url[:79] + "…"
            return f"<{kind_word(self.media_type)} {name}{self.media_type} {url}>"
        return f"<{kind_word(self.media_type)} {name}{self.media_type} {human_size(self.size or 0)} sha256:{self.sha256[:8]}…>"

    def __str__(self) -> str:
        scope = CURRENT.get()
        return scope.token(self) if scope is not None else self.placeholder()

    def __repr__(self) -> str:
        return self.placeholder()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Media):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def _identity(self) -> tuple[Any, ...]:
        return (type(self), self.media_type, self.detail, self.metadata, self.url, self.sha256 if self.data else None)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_sent"] = {}  # shrunk copies are made again where it is unpickled
        return state

    # -- what is sent ------------------------------------------------------------
    def parts(self, max_side: int | None = DEFAULT_MAX_SIDE) -> list[UserContent]:
        """The content parts sent for this value: one part, and for `attach(…,
        metadata=True)` a line of text about the image after it."""
        from pydantic_ai import messages as m

        extra = {"detail": self.detail} if self.detail else None
        if self.url is not None:
            kind: type[m.ImageUrl | m.AudioUrl | m.VideoUrl | m.DocumentUrl] = m.DocumentUrl
            if self.is_image:
                kind = m.ImageUrl
            elif self.media_type.startswith("audio/"):
                kind = m.AudioUrl
            elif self.media_type.startswith("video/"):
                kind = m.VideoUrl
            return [kind(self.url, media_type=self.media_type, vendor_metadata=extra)]
        assert self.data is not None
        data, media_type = self.sent_bytes(max_side)
        binary = m.BinaryContent(data, media_type=media_type, vendor_metadata=extra)
        parts: list[UserContent] = [m.BinaryContent.narrow_type(binary)]
        if self.metadata and self.is_image:
            from .pixels import metadata_line

            parts.append(metadata_line(self.data, self.name))
        return parts

    def sent_bytes(self, max_side: int | None) -> tuple[bytes, str]:
        """(bytes, media type) as sent: an image larger than `max_side` shrunk with Pillow."""
        assert self.data is not None
        if not self.is_image:
            return self.data, self.media_type
        sent = self._sent.get(max_side)
        if sent is None:
            from .pixels import fit

            sent = self._sent[max_side] = fit(self.data, self.media_type, max_side, f"image {self._label()}")
        return sent


class Image(Media):
    """An image for the model: `Image(path | bytes | url, media_type=None, detail=None)`.

    `detail` (auto, low, high, original) is passed to providers that take it (OpenAI)."""

    def _noun(self) -> str:
        return "image"

    def _check(self) -> None:
        if not self.is_image:
            raise ValueError(
                f"sd.Image: {self._label()} is {self.media_type}, not an image; use sd.File for audio, video and documents"
            )


class File(Media):
    """Audio, video, a PDF or another document for the model: `File(path | bytes | url, media_type=None)`."""

    def __init__(self, source: Any, media_type: str | None = None, *, name: str | None = None) -> None:
        super().__init__(source, media_type, name=name)


class MediaList(list[Media]):
    """Several media values (what `attach([...])` returns); renders as each in order."""

    def __str__(self) -> str:
        return "".join(str(item) for item in self)


def attach(source: Any, *, detail: str | None = None, metadata: bool = False, media_type: str | None = None) -> Any:
    """struckdown 0.x's way in: a path, bytes, a Pillow image, an Image/File, or a list of
    these (which gives a MediaList). An image gives an `Image`, anything else a `File`.
    `metadata=True` sends a line about the image (size; date taken and camera, with
    Pillow) after it."""
    if isinstance(source, (list, tuple)):
        return MediaList(attach(s, detail=detail, metadata=metadata, media_type=media_type) for s in source)
    found = source if isinstance(source, Media) and media_type is None else File(source, media_type)
    if found.is_image:
        return Image(found, detail=detail, metadata=metadata)
    if detail is not None or metadata:
        raise ValueError(f"attach: detail= and metadata= are for images; {found._label()} is {found.media_type}")
    return found


def _url_path(url: str | None) -> str | None:
    if not url:
        return None
    from urllib.parse import urlsplit

    return urlsplit(url).path


def _read(source: Any, what: str) -> tuple[bytes | None, str | None, str | None, str | None]:
    """(data, url, name, media type) of a source."""
    if isinstance(source, Media):
        return source.data, source.url, source.name, source.media_type
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _nonempty(bytes(source), what), None, None, None
    if isinstance(source, str) and _URL.match(source):
        return None, source, os.path.basename(_url_path(source) or "") or None, None
    if isinstance(source, str) and source[:5].lower() == "data:":
        return _data_uri(source, what)
    if isinstance(source, (str, os.PathLike)):
        path = Path(os.fspath(source)).expanduser()
        _refuse_special(path, what)
        return _nonempty(path.read_bytes(), what), None, path.name, None
    if type(source).__module__.startswith("PIL.") and hasattr(source, "save"):
        import io

        out = io.BytesIO()
        source.save(out, "PNG")
        return out.getvalue(), None, None, "image/png"
    if callable(getattr(source, "read", None)):
        data = source.read()
        if not isinstance(data, bytes):
            raise TypeError(f"sd.{what}: a file object must be opened in binary mode ('rb')")
        name = getattr(source, "name", None)
        return _nonempty(data, what), None, os.path.basename(name) if isinstance(name, str) else None, None
    raise TypeError(f"sd.{what}() takes a path, bytes, a URL or a binary file object, not {type(source).__name__}")


#: Folders of devices and kernel files: never read as media, whatever is there.
_SPECIAL_ROOTS = ("/dev", "/proc", "/sys")


def _refuse_special(path: Path, what: str) -> None:
    """A path must name a regular file, outside /dev, /proc and /sys (checked by the
    name it resolves to, before anything is opened): `/dev/zero` never ends, and
    `/proc/self/environ` holds the process's keys."""
    resolved = os.path.realpath(path)
    for root in _SPECIAL_ROOTS:
        if resolved == root or resolved.startswith(root + "/"):
            raise ValueError(f"sd.{what}: {path} is a device or kernel file ({resolved}), not a file to send")
    try:
        mode = os.stat(resolved).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"sd.{what}: no such file: {path}") from None
    import stat

    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
        raise ValueError(f"sd.{what}: {path} is {kind}, not a regular file")


def _nonempty(data: bytes, what: str) -> bytes:
    if not data:
        raise ValueError(f"sd.{what}: no bytes (an empty file?)")
    return data


def _data_uri(uri: str, what: str) -> tuple[bytes | None, str | None, str | None, str | None]:
    import base64
    import binascii

    head, sep, body = uri[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        raise ValueError(f"sd.{what}: a data: URI must be base64 (data:image/png;base64,…)")
    try:
        data = base64.b64decode(body, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"sd.{what}: the data: URI is not valid base64: {exc}") from None
    return _nonempty(data, what), None, None, head[: -len(";base64")] or None


def render_list(items: Sequence[Any]) -> str:
    """`{{ photos }}` for a list whose first item is a media value: each value in order."""
    if not all(isinstance(item, Media) for item in items):
        raise MediaError(
            "a list that mixes images or files with other values cannot be placed as it is; "
            "loop over it: {% for item in items %}{{ item }}{% endfor %}"
        )
    return "".join(str(item) for item in items)


def attachments(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """What SlotResult.messages says was sent: one dict (kind, name, media_type, bytes,
    sha256, or url) per image or file part, in order."""
    from pydantic_ai.messages import FileUrl, ModelRequest, TextContent, UserPromptPart

    found: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if not isinstance(part, UserPromptPart) or isinstance(part.content, str):
                continue
            for item in part.content:
                if isinstance(item, TextContent) and isinstance(item.metadata, dict) and PLACEHOLDER_KEY in item.metadata:
                    found.append(dict(item.metadata[PLACEHOLDER_KEY]))
                elif isinstance(item, FileUrl):
                    media_type = str(item.media_type)
                    found.append({"kind": kind_word(media_type), "name": None, "media_type": media_type, "url": item.url})
    return found
