"""Files named on the command line as context values (SPEC §15).

`-c photo=@receipt.png` and `sd batch --file-columns photo` turn a path into what a
template places with `{{ photo }}`: an image becomes `sd.Image`, audio, video, a PDF
or another binary document `sd.File`, a text file its text (a `.json` file its
parsed value). `@@text` is the literal text `@text`.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import MediaError
from ..media import SNIFFABLE, File, Image, Media, guess, sniff
from .errors import CliError

_TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml")


def file_value(spec: str, where: str, base: Path | None = None) -> Any:
    """The context value for the file `spec` (relative to `base` when given): a path the
    user typed on the command line, so `~` is expanded and any readable file may be named."""
    path = Path(spec).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):  # /dev/zero, a FIFO, a folder: never read (one would never end)
            raise CliError(f"{where}: {path} is not a regular file ({_file_kind(mode)})")
        # O_NONBLOCK: a FIFO swapped in after the check opens at once, and is refused below
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise CliError(f"{where}: no such file: {path}") from None
    except OSError as exc:
        raise CliError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise CliError(f"{where}: {path} is not a regular file ({_file_kind(mode)})")
        try:
            data = handle.read()
        except OSError as exc:
            raise CliError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    return _value(data, path, where)


def _file_kind(mode: int) -> str:
    """What a path that is not a regular file is, in words."""
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a file"


def media_type_of(data: bytes, name: str) -> str | None:
    """A file's media type from its bytes (SPEC §30): the name decides only for types whose
    bytes cannot tell (text, most documents). A name that claims a type the bytes would show
    (`.png`, `.pdf`, `.mp3`, …) over bytes that do not show it is not believed: plain text
    named `fake.png` is text."""
    found = sniff(data)
    if found is not None:
        return found
    named = guess(name)
    return None if named in SNIFFABLE else named


def _value(data: bytes, path: Path, where: str) -> Any:
    """What a file's bytes become: an Image, a File, text or a parsed JSON value."""
    media_type = media_type_of(data, path.name)
    if media_type is not None and media_type.startswith("image/"):
        return Image(data, media_type, name=path.name)
    if media_type is None or media_type.startswith("text/") or media_type in _TEXT_TYPES or media_type.endswith("+json"):
        try:
            text = data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            if media_type is None:
                raise CliError(f"{where}: cannot tell what kind of file {path} is (not an image, a document or text)") from None
            raise CliError(f"{where}: {path} is not UTF-8 text") from None
        if media_type == "application/json":
            try:
                return json.loads(text)
            except ValueError:
                return text
        return text
    if not data:
        raise CliError(f"{where}: {path} is empty")
    return File(data, media_type, name=path.name)


def confined_value(spec: str, where: str, root: Path) -> Any:
    """The value of the file a row's cell names, read only if it lies under `root` (issue
    39 N2: a row is data, possibly someone else's). `~` is not expanded; an absolute path
    or `..` outside the root, a symlink out of it and anything but a regular file (a FIFO,
    a device, a folder, /proc) are a CliError naming the cell."""
    if "\0" in spec or not spec.strip():
        raise CliError(f"{where}: {spec!r} is not a path")
    if spec.startswith("~"):
        raise CliError(f"{where}: {spec!r}: ~ is not expanded in a file column (paths are relative to {root})")
    base = Path(os.path.abspath(root))
    path = Path(os.path.normpath(base / spec))  # an absolute spec replaces the base
    if not _within(path, base):  # decided on the name, before the path is touched
        raise CliError(f"{where}: {spec!r} is outside the files folder {base} (see --files-root)")
    real = Path(os.path.realpath(path))
    if not _within(real, Path(os.path.realpath(base))):
        raise CliError(f"{where}: {spec!r} leads outside the files folder {base} through a symlink")
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):
            raise CliError(f"{where}: {spec!r} is not a regular file")
        # O_NONBLOCK: a FIFO swapped in after the check opens at once (and is refused below)
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise CliError(f"{where}: no such file: {path}") from None
    except OSError as exc:
        raise CliError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise CliError(f"{where}: {spec!r} is not a regular file")
        opened = _opened_path(handle.fileno())  # a folder on the way swapped for a symlink after the check
        if opened is not None and not _within(opened, Path(os.path.realpath(base))):
            raise CliError(f"{where}: {spec!r} leads outside the files folder {base} through a symlink")
        data = handle.read()
    return _value(data, path, where)


def _opened_path(fd: int) -> Path | None:
    """The real path of an open file, where the system tells it (Linux: /proc/self/fd)."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def pair_value(key: str, raw: str) -> Any:
    """`-c key=@path`: the file's value; `-c key=@@x`: the text `@x`."""
    if raw.startswith("@@"):
        return raw[1:]
    return file_value(raw[1:], f"-c {key}=@…")


# -- sd batch --file-columns ---------------------------------------------------------


def split_columns(values: Sequence[str]) -> tuple[str, ...]:
    """`--file-columns a,b --file-columns c` → (a, b, c)."""
    return tuple(name.strip() for value in values for name in value.split(",") if name.strip())


class Unreadable(Media):
    """A file cell that could not be read: its row fails, with the reason, when the
    template places it; the other rows go on."""

    def __init__(self, message: str) -> None:  # nothing to read
        self.message = message
        self.data = self.url = self.name = self.detail = None
        self.media_type, self.metadata, self._sha, self._sent = "application/octet-stream", False, "", {}

    def placeholder(self) -> str:
        return f"<unreadable file: {self.message}>"

    def __str__(self) -> str:
        raise MediaError(self.message)

    def parts(self, max_side: int | None = None) -> list[Any]:
        raise MediaError(self.message)


def file_row(row: Mapping[str, Any], columns: Sequence[str], base: Path) -> dict[str, Any]:
    """One row with its file columns' paths turned into values (a JSON list of paths
    gives a list). An empty cell stays empty; a missing, unreadable or refused file
    (outside `base`, see `confined_value`) fails the row when the template places it."""
    out = dict(row)
    for column in columns:
        value = row.get(column)
        if value is None or value == "":
            continue
        paths = value if isinstance(value, list) else [value]
        converted: list[Any] = []
        for path in paths:
            where = f"--file-columns {column}"
            if not isinstance(path, str):
                converted.append(Unreadable(f"{where}: {path!r} is not a path"))
                continue
            try:
                converted.append(confined_value(path, where, base))
            except (CliError, ValueError) as exc:
                converted.append(Unreadable(exc.message if isinstance(exc, CliError) else f"{where}: {exc}"))
        out[column] = converted if isinstance(value, list) else converted[0]
    return out


def files_base(
    present: Sequence[str], rows: int, columns: Sequence[str], inputs: Sequence[str], root: Path | None = None
) -> Path | None:
    """The folder `--file-columns` paths are read under: `--files-root` (`root`), else the
    inputs' folder (stdin: the working directory); None without the option. From the
    columns `present` in the `rows` input rows (read once, in a scan). A CliError, before
    anything runs, for a column no row has, a root that is no folder, or inputs in
    different folders without a root."""
    columns = split_columns(columns)
    if not columns:
        if root is not None:
            raise CliError("--files-root is the folder of --file-columns paths: give --file-columns too")
        return None
    known = set(present)
    missing = [c for c in columns if c not in known]
    if rows and missing:
        listed = ", ".join(sorted(known)) or "none"
        raise CliError(f"--file-columns: no input row has a column {missing[0]!r} (columns: {listed})")
    if root is not None:
        if not root.is_dir():
            raise CliError(f"--files-root {root} is not a folder")
        return Path(os.path.abspath(root))
    folders = {os.path.dirname(os.path.abspath(spec)) for spec in inputs if spec != "-"}
    if len(folders) > 1:
        raise CliError(
            "--file-columns: the inputs are in different folders, so relative paths are ambiguous; "
            "give inputs from one folder, or the folder the paths are under with --files-root"
        )
    return Path(folders.pop()) if folders else Path.cwd()


# -- sd run's display -------------------------------------------------------------------


def attachment_lines(slot: str, messages: Sequence[Any], seen: set[str]) -> list[str]:
    """`attached receipt.png (image/png, 3 KB) → slot total`, once per run for each image
    or file the slot's request held that no earlier slot sent."""
    from ..media import attachments, human_size

    lines: list[str] = []
    for item in attachments(messages):
        key = item.get("sha256") or item.get("url") or ""
        if key in seen:
            continue
        seen.add(key)
        name = item.get("name") or item.get("url") or f"{item['kind']} {str(key)[:8]}"
        size = f", {human_size(item['bytes'])}" if "bytes" in item else ""
        lines.append(f"attached {name} ({item['media_type']}{size}) → slot {slot}")
    return lines
