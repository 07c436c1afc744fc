"""Reading and writing the files a user names: one message naming the file for every
failure, and output written the way a careful shell redirection would.

Shared by the front ends (`sd`, the playground) and the batch tables and journal; a
problem with what the user gave is an `InputError`, a file that cannot be written an
`OutputError`.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from .errors import InputError, OutputError

BOM = "\ufeff"  # a UTF-8 byte order mark, as some editors write at the start of a file


def read_text(path: Path, what: str = "file") -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path} is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what} {path}: {exc}") from None


def parse_json(text: str, where: str, *, position: bool = True) -> Any:
    """`json.loads`, with every failure an InputError starting with `where` (then `:line:col`
    when `position`)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f":{exc.lineno}:{exc.colno}" if position else ""
        raise InputError(f"{where}{at}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{where}: invalid JSON: nested too deeply for this parser") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise InputError(f"{where}: invalid JSON: {exc}") from None


def write_atomically(path: Path, write: Any, *, binary: bool = False) -> None:
    """Write an output file the way a careful shell redirection would.

    A regular file (or a new one) is written to a temporary file beside it and renamed
    over it, so a crash never leaves half a file. A symlink is written through: its
    target is replaced and the link stays. Anything else that already exists (a
    device such as /dev/null, a FIFO) is opened and written in place, never replaced.
    A new file gets the umask's mode (0666 less the umask), a replaced file keeps its
    mode (and its owner, where we may set it). A directory is an error.
    """
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "it is a directory")
    if info is not None and not stat.S_ISREG(info.st_mode):
        with _open_for_writing(target, binary) as handle:
            write(handle)
        return
    if target is path:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_temporary(target)
    try:
        if info is not None:
            _copy_ownership(tmp, info)
        with _open_for_writing(tmp, binary) as handle:
            write(handle)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _new_temporary(target: Path) -> Path:
    """An empty file beside `target`, created with mode 0666 so the umask decides its mode."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {target}")


def _copy_ownership(tmp: Path, info: os.stat_result) -> None:
    """The replacement keeps the replaced file's mode, and its owner when we may set it."""
    try:
        os.chown(tmp, info.st_uid, info.st_gid)
    except OSError:
        pass  # not ours to give away: the mode still follows
    os.chmod(tmp, stat.S_IMODE(info.st_mode))


def _open_for_writing(path: Path, binary: bool) -> Any:
    if binary:
        return open(path, "wb")
    return open(path, "w", encoding="utf-8", newline="")


def check_writable(path: Path) -> None:
    """Before any paid work: the output `path` can be written where `write_atomically`
    will write it (a symlink's target, whose folder must exist; a new file's nearest
    existing folder), else the OutputError the write would end with (issue 39 N17)."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if target.is_dir():
        raise write_error(path, IsADirectoryError(errno.EISDIR, "it is a directory"))
    if target.exists():
        return
    folder = target.parent
    if target is not path:
        if not folder.is_dir():
            raise OutputError(f"cannot write {path}: it is a symlink to {target}, whose folder does not exist")
    else:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # write_atomically makes the missing folders
        if not folder.is_dir():
            raise OutputError(f"cannot write {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise write_error(path, PermissionError(errno.EACCES, f"{folder} is not writable"))


def write_error(path: Path, exc: OSError) -> OutputError:
    """`cannot write PATH: reason`, naming the output the user gave (never a temporary file)."""
    return OutputError(f"cannot write {path}: {exc.strerror or exc}")
