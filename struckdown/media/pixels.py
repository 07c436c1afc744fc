"""Pixels: an image's size read from its header, and shrinking it with Pillow.

The size of a PNG, GIF, JPEG or WebP is read from its first bytes, so an image that
fits `image_max_side` is sent as it is and needs no Pillow. Pillow (the `images`
extra) is imported only to shrink or convert an image, or to measure a format whose
header is not read here (TIFF, BMP, HEIC with pillow-heif).
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

from ..errors import MediaError

#: Image types every vision provider accepts; others are converted to PNG when Pillow can read them.
WEB_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
INSTALL_HINT = "pip install 'struckdown[images]'"

_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers (not DHT, JPG, DAC)


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, JPEG or WebP header; None for anything else."""
    try:
        if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return width, height
        if data[:6] in (b"GIF87a", b"GIF89a"):
            width, height = struct.unpack("<HH", data[6:10])
            return width, height
        if data.startswith(b"\xff\xd8"):
            return _jpeg_size(data)
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp_size(data)
    except struct.error:  # a header cut short
        return None
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _JPEG_SOF:
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        if marker == 0x01 or 0xD0 <= marker <= 0xD9:  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        i += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        b0, b1, b2, b3 = data[21:25]
        return 1 + (b0 | (b1 & 0x3F) << 8), 1 + (b1 >> 6 | b2 << 2 | (b3 & 0x0F) << 10)
    if chunk == b"VP8X":
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    return None


def _pillow() -> Any:
    from PIL import Image

    return Image


def measure(data: bytes) -> tuple[int, int] | None:
    """The image's size: from its header, else from Pillow when it is installed (and
    can read the format); None when neither can tell."""
    size = image_size(data)
    if size is not None:
        return size
    try:
        pil = _pillow()
    except ImportError:
        return None
    try:
        with pil.open(io.BytesIO(data)) as im:
            width, height = im.size
            return int(width), int(height)
    except Exception:  # noqa: BLE001 - a format Pillow cannot read: size unknown
        return None


def fit(data: bytes, media_type: str, max_side: int | None, label: str) -> tuple[bytes, str]:
    """The bytes to send: as they are when the image fits `max_side` (None: any size) and
    is of a type providers take; else shrunk (and converted) with Pillow. An image
    that must shrink without Pillow installed is a MediaError naming the fix."""
    size = measure(data)
    if size is None or max_side is None or max(size) <= max_side:
        if media_type in WEB_TYPES:
            return data, media_type
        try:  # TIFF, BMP, …: PNG when Pillow reads it, else as it is (the provider decides)
            return _shrink(_pillow(), data, None, label)
        except (ImportError, MediaError):
            return data, media_type
    try:
        pil = _pillow()
    except ImportError:
        raise MediaError(
            f"{label} is {size[0]}x{size[1]} pixels, larger than image_max_side={max_side}, and shrinking it "
            f"needs Pillow: {INSTALL_HINT} (or pass a larger image_max_side, or None to send any size)"
        ) from None
    return _shrink(pil, data, max_side, label)


def _shrink(pil: Any, data: bytes, max_side: int | None, label: str) -> tuple[bytes, str]:
    from PIL import ImageOps

    try:
        with pil.open(io.BytesIO(data)) as opened:
            source_format = (opened.format or "").upper()
            im = ImageOps.exif_transpose(opened)  # re-encoding drops EXIF: keep the picture upright
            if max_side is not None:
                im.thumbnail((max_side, max_side), pil.Resampling.LANCZOS)
            out = io.BytesIO()
            if source_format == "JPEG":
                if im.mode not in ("RGB", "L"):
                    im = im.convert("RGB")
                im.save(out, "JPEG", quality=90)
                return out.getvalue(), "image/jpeg"
            if im.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
                im = im.convert("RGBA" if "A" in im.getbands() else "RGB")
            im.save(out, "PNG", optimize=True)
            return out.getvalue(), "image/png"
    except MediaError:
        raise
    except Exception as exc:
        raise MediaError(f"{label} cannot be read as an image: {type(exc).__name__}: {exc}") from exc


def metadata_line(data: bytes, name: str | None) -> str:
    """`attach(…, metadata=True)`: one line of text about the image sent after it: its
    size, and with Pillow the date taken and the camera from its EXIF data."""
    fields: dict[str, Any] = {}
    size = measure(data)
    if size is not None:
        fields["size"] = f"{size[0]}x{size[1]}"
    try:
        pil = _pillow()
        with pil.open(io.BytesIO(data)) as im:
            exif = im.getexif()
            taken = exif.get_ifd(0x8769).get(0x9003) or exif.get(0x0132)  # DateTimeOriginal, DateTime
            camera = " ".join(str(exif.get(tag, "")).strip() for tag in (0x010F, 0x0110)).strip()  # Make, Model
            if taken:
                fields["taken"] = str(taken).strip()
            if camera:
                fields["camera"] = camera
    except Exception:  # noqa: BLE001 - no Pillow, or no EXIF: size only
        pass
    return f"[metadata of {name or 'the image above'}: {json.dumps(fields, ensure_ascii=False)}]"
